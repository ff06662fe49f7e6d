# dra-extender: a small image, non-root, fine with a read-only root filesystem.
# The base image is pinned by digest and the dependencies by constraints.txt (the runtime part of
# the lock that `bash .ci/lock` writes; docs/dependencies.md), so two builds of
# one commit install the same bits. Bump the digest for security patches:
#   docker buildx imagetools inspect python:3.11-slim   (the index digest, all platforms)
ARG PYTHON_IMAGE=python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY extender ./extender
COPY examples ./examples
RUN pip install --no-cache-dir --prefix=/install -c constraints.txt .

FROM ${PYTHON_IMAGE}
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
CMD ["--host", "0.0.0.0", "--ops-host", "0.0.0.0", "--state", "examples/"]
