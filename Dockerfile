# dra-extender: a small image, non-root, fine with a read-only root filesystem.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY extender ./extender
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /install /usr/local
COPY examples /app/examples
WORKDIR /app
# 65532: the conventional "nonroot" uid; nothing is written at runtime (no bytecode, no state).
USER 65532:65532
EXPOSE 8888 8889
ENTRYPOINT ["dra-extender", "serve"]
# The README's first command (the embedded example cluster), listening on all interfaces as a
# container must. The Deployment in manifests/ passes cluster-mode arguments instead.
CMD ["--host", "0.0.0.0", "--state", "examples/"]
