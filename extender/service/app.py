"""The HTTP layer: kube-scheduler's verbs, health, metrics and debug endpoints.

Bodies are read raw and decoded with msgspec (no per-request pydantic models); answers are
JSON bytes with kube-scheduler's exact keys. Every well-formed request gets HTTP 200; malformed
ones get 400 with the reason, oversized ones 413, and nothing about the state changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from extender.cluster.state import as_list_json
from extender.defaults import DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES
from extender.defaults import LAST_DECISION_HEADER, REPLICA_HEADER
from extender.model.core import Node, Pod, parse_pod
from extender.model.errors import ObjectError
from extender.scheduling.decide.capacity import Capacity, capacity_steps
from extender.scheduling.decide.extended import may_request
from extender.scheduling.engine import Engine
from extender.service import capacity_page, debug, wire
from extender.service.bind_pressure import BindPressure
from extender.service.metrics import Metrics
from extender.service.worker import EngineWorker

log = logging.getLogger("dra_extender.http")

#: A 500-node NodeList (nodeCacheCapable: false) is about 1 MiB; names only are far less.
JSON = "application/json"
#: ``?format=`` of the debug views.
VIEW_FORMATS = ("json", "text", "yaml")


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


def _json(payload: bytes, status: int = 200) -> Response:
    return Response(content=payload, status_code=status, media_type=JSON)


def _bad_request(message: str, status: int = 400) -> Response:
    return _json(wire.encode({"Error": message}), status)


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
        self.metrics = service.metrics
        self.worker = service.worker
        self.max_body_bytes = max_body_bytes
        self.service = service

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
            args = wire.decode_args(body)
            pod = parse_pod(args.pod)
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
            args, result.passed, result.failed, result.unresolvable, result.error
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
            args = wire.decode_preemption(body)
            pod = parse_pod(args.pod)
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
        return _json(payload, status)

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
    add_debug_views(app, service)

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


def create_ops_app(service: Service, *, debug_views: bool = False) -> FastAPI:
    """The second listener's app: probes and metrics; with ``debug_views`` (``--ops-debug``)
    also the read-only debug views and the capacity page, one at a time (a second one asked
    while the first is computed gets 429): that listener is reachable through the API server's
    service proxy, by anyone its NetworkPolicy admits."""
    app = FastAPI(title="dra-extender ops", docs_url=None, redoc_url=None, openapi_url=None)
    add_probes(app, service)
    if debug_views:
        add_debug_views(app, service, one_at_a_time=True)
    return app


class OneAtATime:
    """Handlers served one at a time on one event loop; one asked while another runs is
    answered 429 at once (debug views reachable by more than kube-scheduler must not queue up
    engine work)."""

    def __init__(self) -> None:
        self.busy = False

    def wrap(self, handler: Callable[..., Awaitable[Response]]) -> Callable[..., Awaitable[Response]]:
        @functools.wraps(handler)
        async def one_at_a_time(*args: Any, **kwargs: Any) -> Response:
            if self.busy:  # one event loop serves the listener: no lock needed
                return _bad_request("another debug view is being computed; try again shortly", 429)
            self.busy = True
            try:
                return await handler(*args, **kwargs)
            finally:
                self.busy = False

        return one_at_a_time


#: How long one encoded snapshot is shared (seconds).
SNAPSHOT_SECONDS = 2.0
#: A large body goes out this many bytes at a time, each when the client has taken the last.
CHUNK_BYTES = 64 * 1024


class EncodedSnapshot:
    """/debug/snapshot's body, encoded off the engine's loop and shared for ``seconds``: every
    request within that time gets the same bytes, sent in chunks as the client reads them, so
    clients that ask and never read hold one copy between them, not one each (28 MB at 5,000
    nodes x 8 devices)."""

    def __init__(
        self,
        held: Callable[[], Awaitable[list[dict[str, Any] | bytes]]],
        seconds: float = SNAPSHOT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.held = held
        self.seconds = seconds
        self.clock = clock
        self._body: bytes | None = None
        self._at = 0.0
        self._lock: asyncio.Lock | None = None

    async def get(self) -> bytes:
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:  # one encoding at a time; the others wait and share it
            if self._body is None or self.clock() - self._at >= self.seconds:
                held = await self.held()  # references only, on the engine's loop
                # Encoded on a thread: the loop serving this listener (the engine's, on the
                # verbs listener) gets its turns between objects.
                self._body = await asyncio.to_thread(as_list_json, held)
                self._at = self.clock()
            return self._body


#: Snapshots sent at once (each may hold its body, 28 MB at 5,000 nodes x 8 devices, for as long
#: as its client takes); more are answered 429. And how long one may take to be read.
SNAPSHOT_STREAMS = 2
SNAPSHOT_SEND_SECONDS = 120.0


class StreamSlots:
    """How many large answers are being sent (one event loop: no lock)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    def take(self) -> bool:
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def give_back(self) -> None:
        self.open -= 1


class SentInTime(Response):
    """A large body sent a chunk at a time, each when the client has taken the last (uvicorn
    waits for the socket to drain); cut off when it is not all taken within ``seconds``
    (uvicorn has no write timeout, and the API server none for a proxied request); ``done``
    once it is sent or given up."""

    def __init__(
        self,
        body: bytes,
        headers: dict[str, str],
        done: Callable[[], None],
        seconds: float = SNAPSHOT_SEND_SECONDS,
    ) -> None:
        super().__init__(media_type=JSON, headers={**headers, "Content-Length": str(len(body))})
        self.whole = body
        self.done = done
        self.seconds = seconds

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            async with asyncio.timeout(self.seconds):
                await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
                view = memoryview(self.whole)
                for start in range(0, len(self.whole), CHUNK_BYTES):
                    chunk = bytes(view[start : start + CHUNK_BYTES])
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            log.warning("a client took longer than %.0f s to read a snapshot: cut off", self.seconds)
        finally:
            self.done()


#: Nodes per page of the capacity page.
PAGE_NODES = 100


def add_debug_views(app: FastAPI, service: Service, *, one_at_a_time: bool = False) -> None:
    """/debug/*: what the extender believes, read-only. Each view is computed on the engine's
    loop (the capacity in slices, so the verbs run in between) and encoded off it."""
    engine, worker = service.engine, service.worker
    replica = replica_name()

    def headers() -> dict[str, str]:
        """VIEW_HEADERS, and which replica answered and how long ago it last decided (behind
        the API server's service proxy, requests go to any of the Service's replicas: a
        standby's views have no binds in flight and no decisions; ``kubectl dra`` prefers the
        replica that decided last)."""
        entries = engine.log.entries
        last = entries[-1]["time"] if entries else None
        ago = "never" if last is None else f"{max(0.0, engine.log.wall_clock() - last):.1f}"
        return {**VIEW_HEADERS, REPLICA_HEADER: replica, LAST_DECISION_HEADER: ago}

    def view(name: str, data: dict[str, Any], fmt: str | None) -> Response:
        if fmt == "text":
            return PlainTextResponse(debug.render_text(name, data), headers=headers())
        if fmt == "yaml":
            text = yaml.safe_dump(data, sort_keys=False)
            return Response(text, media_type="application/yaml", headers=headers())
        return Response(wire.encode(data), media_type=JSON, headers=headers())

    def bad_format(fmt: str | None) -> Response | None:
        if fmt is None or fmt in VIEW_FORMATS:
            return None
        return _bad_request(f"format must be one of {', '.join(VIEW_FORMATS)}, not {fmt!r}")

    def positive(name: str, text: str | None) -> int | Response | None:
        if text is None:
            return None
        if not text.isdigit() or int(text) < 1:
            return _bad_request(f"{name} must be a positive integer, not {text!r}")
        return int(text)

    gate = OneAtATime() if one_at_a_time else None

    def debug_route(path: str) -> Callable[[Callable[..., Awaitable[Response]]], Any]:
        """``app.get(path)``, through the gate when there is one."""

        def register(handler: Callable[..., Awaitable[Response]]) -> Any:
            return app.get(path)(handler if gate is None else gate.wrap(handler))

        return register

    async def computed_capacity() -> Capacity:
        return await worker.steps(lambda: capacity_steps(engine.snapshot()))

    @debug_route("/debug/inventory")
    async def debug_inventory(format: str | None = None) -> Response:
        return bad_format(format) or view("inventory", await worker.call(debug.inventory, engine), format)

    @debug_route("/debug/claims")
    async def debug_claims(format: str | None = None) -> Response:
        return bad_format(format) or view("claims", await worker.call(debug.claims, engine), format)

    @debug_route("/debug/inflight")
    async def debug_in_flight(format: str | None = None) -> Response:
        return bad_format(format) or view("inflight", await worker.call(debug.in_flight, engine), format)

    @debug_route("/debug/capacity")
    async def debug_capacity(
        request: Request, format: str | None = None, count: str | None = None
    ) -> Response:
        if (refused := bad_format(format)) is not None:
            return refused
        wanted = positive("count", count)
        if isinstance(wanted, Response):
            return wanted
        found = await computed_capacity()
        device_class = request.query_params.get("class")
        data = await worker.call(debug.capacity_view, engine, device_class, wanted, found)
        return view("capacity", data, format)

    @debug_route("/debug/decisions")
    async def debug_decisions(format: str | None = None, limit: str = "50") -> Response:
        if (refused := bad_format(format)) is not None:
            return refused
        wanted = positive("limit", limit)
        if isinstance(wanted, Response):
            return wanted
        return view("decisions", await worker.call(debug.decisions, engine, wanted), format)

    @debug_route("/debug/pods/{namespace}/{name}")
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

    snapshots = EncodedSnapshot(lambda: worker.call(engine.state.held))

    streams = StreamSlots(SNAPSHOT_STREAMS)

    @debug_route("/debug/snapshot")
    async def debug_snapshot() -> Response:
        """The objects the extender decides from, as its cache holds them: a ``kind: List`` that
        ``dra-extender simulate``, ``explain --state`` and ``serve --state`` read (``kubectl dra
        snapshot``). Binds in flight and devices held after prioritize are not objects."""
        if not streams.take():
            return _bad_request(f"{SNAPSHOT_STREAMS} snapshots are being sent; try again shortly", 429)
        try:
            body = await snapshots.get()
        except BaseException:
            streams.give_back()
            raise
        return SentInTime(body, headers(), streams.give_back)

    @debug_route("/debug/ui")
    async def debug_ui(request: Request, page: str | None = None) -> Response:
        """The capacity page (HTML and SVG, nothing loaded from elsewhere)."""
        wanted = positive("page", page)
        if isinstance(wanted, Response):
            return wanted
        device_class = request.query_params.get("class") or None
        found = await computed_capacity()
        data = await worker.call(debug.page_view, engine, found, wanted or 1, PAGE_NODES, device_class)
        return HTMLResponse(capacity_page.render(data, time.time()), headers={**headers(), **PAGE_HEADERS})


#: Every debug view: never sniffed as another type (text views echo cluster strings), never
#: cached on the way (through ``kubectl proxy`` they share the API server's origin).
VIEW_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
#: The page loads nothing and runs no script: a policy that says so, whatever it is embedded in.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    **VIEW_HEADERS,
}
