"""The HTTP layer: kube-scheduler's verbs, health, metrics and debug endpoints.

Bodies are read raw and decoded with msgspec (no per-request pydantic models); answers are
JSON bytes with kube-scheduler's exact keys. Every well-formed request gets HTTP 200; malformed
ones get 400 with the reason, oversized ones 413, and nothing about the state changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from extender.defaults import DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES
from extender.model.core import Node, Pod
from extender.model.errors import ObjectError
from extender.scheduling.decide.extended import may_request
from extender.scheduling.engine import Engine
from extender.service import wire
from extender.service.bind_pressure import BindPressure
from extender.service.debug_http import add_debug_views
from extender.service.metrics import Metrics
from extender.service.responses import error_response, json_response
from extender.service.worker import EngineWorker

log = logging.getLogger("dra_extender.http")


def replica_name() -> str:
    """This replica's pod: ``$POD_NAME`` (the manifests set it from the downward API), else the
    hostname (a pod's, unless it runs on the host's network)."""
    return os.environ.get("POD_NAME") or socket.gethostname()


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
    #: With leader election: why this replica may not decide now (None: it may). The verbs
    #: then answer 503 and close the connection (see :class:`~extender.service.admission.Admission`).
    fence: Callable[[], str | None] | None = None


class BodyTooSlow(Exception):
    pass


#: A request body must arrive within this time (a slow client cannot hold a connection slot).
BODY_READ_SECONDS = 10.0


async def read_limited(
    chunks_in: AsyncIterator[bytes], declared: str | None, limit: int, seconds: float = BODY_READ_SECONDS
) -> bytes:
    """A request body of at most ``limit`` bytes (``declared``: its Content-Length), arriving
    within ``seconds``; raises :class:`BodyTooLarge` or :class:`BodyTooSlow`."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            async for chunk in chunks_in:
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTooSlow from None
    return b"".join(chunks)


def verb_prefix(prefix: str) -> str:
    """``--prefix`` as the verbs' routes use it: ``/scheduler``, or ``""`` for the root."""
    return "/" + prefix.strip("/") if prefix.strip("/") else ""


class Verbs:
    """kube-scheduler's verbs: a request body in, (HTTP status, JSON answer) out.

    Every well-formed request gets 200; a malformed one 400 with the reason (counted, logged with
    the caller's address), and nothing about the state changes.
    """

    NAMES = ("filter", "prioritize", "bind", "preempt")
    #: ExtenderBindingArgs is four short strings: a bind body is a few hundred bytes.
    BIND_BODY_BYTES = 64 * 1024

    def __init__(
        self, service: Service, max_body_bytes: int, bind_pressure: BindPressure | None = None
    ) -> None:
        self.engine = service.engine
        #: Binds counted, filters held while binds queue (None: never held).
        self.pressure = bind_pressure
        if bind_pressure is not None:
            service.metrics.watch_held_filters(lambda: bind_pressure.holding)
        self.metrics = service.metrics
        self.worker = service.worker
        self.max_body_bytes = max_body_bytes
        self.service = service
        #: The pods of recent requests, parsed: a filter's pod comes again in its prioritize.
        #: A version of a pod the cache holds is the cache's record.
        self.pods = wire.PodMemo(cached=lambda key: self.engine.state.pods.get(key))
        #: Node-name arrays of recent requests and filter answers: prioritize sends filter's back.
        self.names = wire.NamesMemo()

    def body_limit(self, verb: str) -> int:
        return min(self.max_body_bytes, self.BIND_BODY_BYTES) if verb == "bind" else self.max_body_bytes

    def refuse(self, verb: str, reason: str, peer: str | None, status: int = 400) -> tuple[int, bytes]:
        self.metrics.bad_requests.labels(verb).inc()
        log.warning(
            "bad %s request", verb, extra={"fields": {"status": status, "error": reason, "peer": peer}}
        )
        return status, wire.encode({"Error": reason})

    def body_refused(self, verb: str, exc: Exception, peer: str | None) -> tuple[int, bytes]:
        if isinstance(exc, BodyTooLarge):
            return self.refuse(verb, f"request body larger than {self.body_limit(verb)} bytes", peer, 413)
        return self.refuse(verb, f"request body not received within {BODY_READ_SECONDS:g} s", peer, 408)

    async def handle(self, verb: str, body: bytes, peer: str | None) -> tuple[int, bytes]:
        started = time.perf_counter()
        if verb == "bind":
            answer = await self._bind(body, peer)
        elif verb == "preempt":
            answer = await self._preempt(body, peer)
        else:
            answer = await self._decide(verb, body, peer)
        if answer[0] == 200:
            self.metrics.answered(verb, time.perf_counter() - started)
        return answer

    def _request_nodes(self, args: wire.DecodedArgs) -> dict[str, Node] | None:
        if args.raw_node_labels is None:
            return None
        return self.engine.nodes_as_sent(args.raw_node_labels)

    async def _decide(self, verb: str, body: bytes, peer: str | None) -> tuple[int, bytes]:
        engine = self.engine
        try:
            args = wire.decode_args(body, self.pods, self.names)
            pod = args.pod
        except (wire.WireError, ObjectError) as exc:
            reason = str(exc) if isinstance(exc, wire.WireError) else f"malformed request: Pod: {exc}"
            return self.refuse(verb, reason, peer)
        if verb == "prioritize":
            scores = await self.worker.call(
                lambda: engine.prioritize(pod, args.node_names, self._request_nodes(args))
            )
            return 200, wire.encode_priorities(scores.names, scores.scores)
        if (why := self.not_ready(pod)) is not None:
            # One reason for every node, not "node X is not known" from a cache still empty.
            # Unresolvable, as that answer was: Unschedulable would send kube-scheduler's
            # preemption after victims it cannot find (1.34-1.37) or to a preempt verb that
            # answers from the same unready cache (1.38).
            reason = f"the DRA extender is not ready: {why}"
            self.metrics.filter_cut_short("not_ready")
            return 200, wire.encode_filter_result(args, [], {}, dict.fromkeys(args.node_names, reason), "")
        if self.pressure is not None and (held := await self.pressure.room()):
            self.metrics.filter_held.observe(held)
        result = await self.worker.run(engine.filter_request(pod, args.node_names, args.raw_node_labels))
        return 200, wire.encode_filter_result(
            args, result.passed, result.failed, result.unresolvable, result.error, self.names
        )

    def not_ready(self, pod: Pod) -> str | None:
        """Why the extender cannot judge ``pod`` now (None: it can). Pods it would pass anyway
        (no claims, no DRA extended resources, no PodGroup claims) are never held up."""
        if self.service.ready():
            return None
        features = self.engine.config.features
        if not (
            pod.claims
            or (features.extended_resource and may_request(pod))
            or (features.workload_resource_claims and pod.pod_group)
        ):
            return None
        return (self.service.not_ready() if self.service.not_ready else None) or "the cache has not synced"

    async def _bind(self, body: bytes, peer: str | None) -> tuple[int, bytes]:
        try:
            args = wire.decode_binding(body)
        except wire.WireError as exc:
            return self.refuse("bind", str(exc), peer)
        token = self.pressure.started(args.PodUID) if self.pressure is not None else 0
        try:
            error = await self.worker.run(
                self.engine.bind(args.PodNamespace, args.PodName, args.PodUID, args.Node)
            )
        finally:
            if self.pressure is not None:
                self.pressure.ended(token)
        return 200, wire.encode_binding_result(error)

    async def _preempt(self, body: bytes, peer: str | None) -> tuple[int, bytes]:
        try:
            args = wire.decode_preemption(body, self.pods)
            pod = args.pod
        except (wire.WireError, ObjectError) as exc:
            reason = str(exc) if isinstance(exc, wire.WireError) else f"malformed request: Pod: {exc}"
            return self.refuse("preempt", reason, peer)
        if self.not_ready(pod) is not None:
            self.metrics.preempts.labels("not_ready").inc()
            return 200, wire.encode_preemption_result({})  # no eviction chosen from an unready cache
        answer = await self.worker.run(self.engine.preempt_request(pod, args.candidates))
        self.metrics.preempts.labels("kept" if answer else "none").inc()
        return 200, wire.encode_preemption_result(answer)


def create_app(
    service: Service,
    *,
    prefix: str = "/scheduler",
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    bind_pressure: BindPressure | None = None,
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
    prefix = verb_prefix(prefix)

    verbs = Verbs(service, max_body_bytes, bind_pressure)

    async def answer(request: Request, verb: str) -> Response:
        peer = request.client.host if request.client else None
        try:
            body = await read_limited(
                request.stream(), request.headers.get("content-length"), verbs.body_limit(verb)
            )
        except (BodyTooLarge, BodyTooSlow) as exc:
            status, payload = verbs.body_refused(verb, exc, peer)
        else:
            status, payload = await verbs.handle(verb, body, peer)
        return json_response(payload, status)

    def route(verb: str) -> Callable[[Request], Awaitable[Response]]:
        async def verb_route(request: Request) -> Response:
            return await answer(request, verb)

        return verb_route

    for name in Verbs.NAMES:
        app.add_api_route(f"{prefix}/{name}", route(name), methods=["POST"], name=f"{name}_verb")

    #: The listener serves the verbs through :class:`FastVerbs` (the same handlers, without
    #: the framework's per-request layers); the routes above answer in-process callers.
    app.state.verbs = verbs
    app.state.verb_prefix = prefix
    app.state.fence = service.fence

    add_probes(app, service)
    add_debug_views(app, service.engine, service.worker, replica=replica_name())

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
        return error_response(message, exc.status_code)

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


def create_ops_app(service: Service, *, debug_views: bool = False) -> FastAPI:
    """The second listener's app: probes and metrics; with ``debug_views`` (``--ops-debug``)
    also the read-only debug views and the capacity page, one at a time (a second one asked
    while the first is computed gets 429): that listener is reachable through the API server's
    service proxy, by anyone its NetworkPolicy admits."""
    app = FastAPI(title="dra-extender ops", docs_url=None, redoc_url=None, openapi_url=None)
    add_probes(app, service)
    if debug_views:
        add_debug_views(app, service.engine, service.worker, replica=replica_name(), one_at_a_time=True)
    return app
