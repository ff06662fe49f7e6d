"""The HTTP layer: kube-scheduler's verbs, health, metrics and debug endpoints.

Bodies are read raw and decoded with msgspec (no per-request pydantic models); answers are
JSON bytes with kube-scheduler's exact keys. Every well-formed request gets HTTP 200; malformed
ones get 400 with the reason, oversized ones 413, and nothing about the state changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from extender.model.core import Node, parse_pod
from extender.model.errors import ObjectError
from extender.scheduling.engine import Engine
from extender.service import debug, wire
from extender.service.metrics import Metrics
from extender.service.worker import EngineWorker

log = logging.getLogger("dra_extender.http")

#: A 500-node NodeList (nodeCacheCapable: false) is about 1 MiB; names only are far less.
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
JSON = "application/json"
#: ``?format=`` of the debug views.
VIEW_FORMATS = ("json", "text", "yaml")


class BodyTooLarge(Exception):
    pass


@dataclass
class Service:
    """Everything the HTTP layer talks to."""

    engine: Engine
    metrics: Metrics
    ready: Callable[[], bool]
    mode: str
    #: Why the service is not ready (for /readyz), or None; defaults to a generic reason.
    not_ready: Callable[[], str | None] | None = None
    #: Where all engine work and cache changes run: the verbs' server loop.
    worker: EngineWorker = field(default_factory=EngineWorker)
    #: Run inside the server's event loop at startup / shutdown (e.g. start the informers).
    startup: Callable[[], Awaitable[None]] | None = None
    shutdown: Callable[[], Awaitable[None]] | None = None


class BodyTooSlow(Exception):
    pass


#: A request body must arrive within this time (a slow client cannot hold a connection slot).
BODY_READ_SECONDS = 10.0


async def _read_body(request: Request, limit: int, seconds: float = BODY_READ_SECONDS) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTooSlow from None
    return b"".join(chunks)


def _json(payload: bytes, status: int = 200) -> Response:
    return Response(content=payload, status_code=status, media_type=JSON)


def _bad_request(message: str, status: int = 400) -> Response:
    return _json(wire.encode({"Error": message}), status)


def verb_prefix(prefix: str) -> str:
    """``--prefix`` as the verbs' routes use it: ``/scheduler``, or ``""`` for the root."""
    return "/" + prefix.strip("/") if prefix.strip("/") else ""


def create_app(
    service: Service, *, prefix: str = "/scheduler", max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        service.worker.attach(asyncio.get_running_loop())  # before informers deliver events
        if service.startup is not None:
            await service.startup()
        try:
            yield
        finally:
            if service.shutdown is not None:
                await service.shutdown()
            service.worker.stop()

    app = FastAPI(
        title="dra-extender",
        version="0.1.0",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    engine, metrics, worker = service.engine, service.metrics, service.worker
    prefix = verb_prefix(prefix)

    def refuse(request: Request, verb: str, reason: str, status: int = 400) -> Response:
        """A malformed request's answer; counted and logged with the caller's address."""
        metrics.bad_requests.labels(verb).inc()
        peer = request.client.host if request.client else None
        log.warning(
            "bad %s request", verb, extra={"fields": {"status": status, "error": reason, "peer": peer}}
        )
        return _bad_request(reason, status)

    async def read(request: Request, verb: str) -> bytes | Response:
        """The body, or the answer for a body too large (413) or too slow (408)."""
        try:
            return await _read_body(request, max_body_bytes)
        except BodyTooLarge:
            return refuse(request, verb, f"request body larger than {max_body_bytes} bytes", 413)
        except BodyTooSlow:
            return refuse(request, verb, f"request body not received within {BODY_READ_SECONDS:g} s", 408)

    async def decode_args(request: Request, verb: str) -> tuple[wire.DecodedArgs, Any] | Response:
        body = await read(request, verb)
        if isinstance(body, Response):
            return body
        try:
            args = wire.decode_args(body)
            pod = parse_pod(args.pod)
        except (wire.WireError, ObjectError) as exc:
            reason = str(exc) if isinstance(exc, wire.WireError) else f"malformed request: Pod: {exc}"
            return refuse(request, verb, reason)
        return args, pod

    def request_nodes(args: wire.DecodedArgs) -> dict[str, Node] | None:
        if args.raw_node_labels is None:
            return None
        return engine.nodes_as_sent(args.raw_node_labels)

    @app.post(f"{prefix}/filter")
    async def filter_verb(request: Request) -> Response:
        started = time.perf_counter()
        decoded = await decode_args(request, "filter")
        if isinstance(decoded, Response):
            return decoded
        args, pod = decoded
        # Binds kube-scheduler has already decided come first (their devices are taken).
        await engine.expected.settle(pod.uid)
        result = await worker.call(lambda: engine.filter(pod, args.node_names, request_nodes(args)))
        payload = wire.encode_filter_result(
            args, result.passed, result.failed, result.unresolvable, result.error
        )
        metrics.latency.labels("filter").observe(time.perf_counter() - started)
        return _json(payload)

    @app.post(f"{prefix}/prioritize")
    async def prioritize_verb(request: Request) -> Response:
        started = time.perf_counter()
        decoded = await decode_args(request, "prioritize")
        if isinstance(decoded, Response):
            return decoded
        args, pod = decoded
        scores = await worker.call(lambda: engine.prioritize(pod, args.node_names, request_nodes(args)))
        metrics.latency.labels("prioritize").observe(time.perf_counter() - started)
        return _json(wire.encode_priorities(scores))

    @app.post(f"{prefix}/bind")
    async def bind_verb(request: Request) -> Response:
        started = time.perf_counter()
        body = await read(request, "bind")
        if isinstance(body, Response):
            return body
        try:
            args = wire.decode_binding(body)
        except wire.WireError as exc:
            return refuse(request, "bind", str(exc))
        error = await worker.run(engine.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node))
        metrics.latency.labels("bind").observe(time.perf_counter() - started)
        return _json(wire.encode_binding_result(error))

    @app.post(f"{prefix}/preempt")
    async def preempt_verb(request: Request) -> Response:
        started = time.perf_counter()
        body = await read(request, "preempt")
        if isinstance(body, Response):
            return body
        try:
            args = wire.decode_preemption(body)
            pod = parse_pod(args.pod)
        except (wire.WireError, ObjectError) as exc:
            reason = str(exc) if isinstance(exc, wire.WireError) else f"malformed request: Pod: {exc}"
            return refuse(request, "preempt", reason)
        answer = await worker.call(engine.preempt, pod, args.candidates)
        metrics.latency.labels("preempt").observe(time.perf_counter() - started)
        return _json(wire.encode_preemption_result(answer))

    add_probes(app, service)

    def view(name: str, data: dict[str, Any], fmt: str | None) -> Response:
        if fmt == "text":
            return PlainTextResponse(debug.render_text(name, data))
        if fmt == "yaml":
            return Response(yaml.safe_dump(data, sort_keys=False), media_type="application/yaml")
        return _json(wire.encode(data))

    def bad_format(fmt: str | None) -> Response | None:
        if fmt is None or fmt in VIEW_FORMATS:
            return None
        return _bad_request(f"format must be one of {', '.join(VIEW_FORMATS)}, not {fmt!r}")

    @app.get("/debug/inventory")
    async def debug_inventory(format: str | None = None) -> Response:
        return bad_format(format) or view("inventory", await worker.call(debug.inventory, engine), format)

    @app.get("/debug/claims")
    async def debug_claims(format: str | None = None) -> Response:
        return bad_format(format) or view("claims", await worker.call(debug.claims, engine), format)

    @app.get("/debug/inflight")
    async def debug_in_flight(format: str | None = None) -> Response:
        return bad_format(format) or view("inflight", await worker.call(debug.in_flight, engine), format)

    @app.get("/debug/capacity")
    async def debug_capacity(
        request: Request, format: str | None = None, count: str | None = None
    ) -> Response:
        if (refused := bad_format(format)) is not None:
            return refused
        device_class = request.query_params.get("class")
        wanted: int | None = None
        if count is not None:
            if not count.isdigit() or int(count) < 1:
                return _bad_request(f"count must be a positive integer, not {count!r}")
            wanted = int(count)
        return view("capacity", await worker.call(debug.capacity_view, engine, device_class, wanted), format)

    @app.get("/debug/decisions")
    async def debug_decisions(format: str | None = None, limit: str = "50") -> Response:
        if (refused := bad_format(format)) is not None:
            return refused
        if not limit.isdigit() or int(limit) < 1:
            return _bad_request(f"limit must be a positive integer, not {limit!r}")
        return view("decisions", await worker.call(debug.decisions, engine, int(limit)), format)

    @app.get("/debug/pods/{namespace}/{name}")
    async def debug_pod(namespace: str, name: str, format: str | None = None) -> Response:
        if (refused := bad_format(format)) is not None:
            return refused

        def explain() -> dict[str, Any] | None:
            pod = engine.state.pods.get((namespace, name))
            return None if pod is None else debug.pod(engine, pod)

        data = await worker.call(explain)
        if data is None:
            return _json(wire.encode({"Error": f"pod {namespace}/{name} not found"}), 404)
        return view("pod", data, format)

    return app


def add_probes(app: FastAPI, service: Service) -> None:
    """/healthz, /readyz and /metrics (on the ops listener, never waiting for the engine), and
    errors in the verbs' shape (``{"Error": ...}``) for unknown paths and wrong methods."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return _json(wire.encode({"Error": message}), exc.status_code)

    @app.api_route("/healthz", methods=["GET", "HEAD"])
    async def healthz() -> Response:
        return PlainTextResponse("ok\n")

    @app.api_route("/readyz", methods=["GET", "HEAD"])
    async def readyz() -> Response:
        if service.ready():
            return PlainTextResponse("ok\n")
        reason = (service.not_ready() if service.not_ready else None) or "the cache has not synced"
        return PlainTextResponse(f"not ready: {reason}\n", status_code=503)

    @app.get("/metrics")
    async def metrics_endpoint() -> Response:
        return Response(
            content=service.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )


def create_ops_app(service: Service) -> FastAPI:
    """The second listener's app: probes and metrics only (no verbs, no debug views)."""
    app = FastAPI(title="dra-extender ops", docs_url=None, redoc_url=None, openapi_url=None)
    add_probes(app, service)
    return app
