"""The debug views over HTTP: /debug/inventory, claims, inflight, capacity, decisions, pods,
make-room, snapshot and the capacity page (ui), on the verbs' listener, and with ``--ops-debug``
on the ops listener, one at a time. What each view holds is :mod:`extender.service.debug`'s; the page's
HTML is :mod:`extender.service.capacity_page`'s."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from extender.cluster.state import as_list_json
from extender.defaults import LAST_DECISION_HEADER, REPLICA_HEADER
from extender.model.core import Pod
from extender.scheduling.decide.capacity import Capacity, capacity_steps
from extender.scheduling.engine import Engine
from extender.scheduling.preempt.make_room import Shape
from extender.service import capacity_page, debug, wire
from extender.service.responses import JSON, error_response
from extender.service.worker import EngineWorker

log = logging.getLogger("dra_extender.http")

#: ``?format=`` of the debug views.
VIEW_FORMATS = ("json", "text", "yaml")


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
                return error_response("another debug view is being computed; try again shortly", 429)
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
    request within that time gets the same bytes (28 MB at 5,000 nodes x 8 devices) instead of
    an encoding of its own."""

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


def add_debug_views(
    app: FastAPI, engine: Engine, worker: EngineWorker, *, replica: str, one_at_a_time: bool = False
) -> None:
    """/debug/*: what the extender believes, read-only. Each view is computed on the engine's
    loop (the capacity in slices, so the verbs run in between) and encoded off it; ``replica``:
    this replica's name, in every answer's headers."""

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
        return error_response(f"format must be one of {', '.join(VIEW_FORMATS)}, not {fmt!r}")

    def positive(name: str, text: str | None) -> int | Response | None:
        if text is None:
            return None
        if not text.isdigit() or int(text) < 1:
            return error_response(f"{name} must be a positive integer, not {text!r}")
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

        return await about_pod(namespace, name, "pod", lambda pod: debug.pod(engine, pod), format)

    async def about_pod(
        namespace: str, name: str, view_name: str, answer: Callable[[Pod], dict[str, Any]], fmt: str | None
    ) -> Response:
        """``answer`` for the cached pod, on the worker; 404 when the cache has no such pod."""

        def found() -> dict[str, Any] | None:
            pod = engine.state.pods.get((namespace, name))
            return None if pod is None else answer(pod)

        data = await worker.call(found)
        if data is None:
            return error_response(f"pod {namespace}/{name} not found", 404)
        return view(view_name, data, fmt)

    @debug_route("/debug/make-room")
    async def debug_make_room(
        request: Request, format: str | None = None, pod: str | None = None, count: str | None = None
    ) -> Response:
        """Which pods to move so that a pending pod (``pod=NAMESPACE/NAME``) or a shape
        (``class=CLASS&count=N``) fits on one node, with the operator's rules (read-only)."""
        if (refused := bad_format(format)) is not None:
            return refused
        device_class = request.query_params.get("class")
        if (pod is None) == (device_class is None):
            both = ", not both" if pod is not None else ""
            return error_response(f"give pod=NAMESPACE/NAME or class=CLASS (with count=N){both}")
        if count is not None and device_class is None:
            return error_response("count goes with class, not with pod")
        wanted = positive("count", count)
        if isinstance(wanted, Response):
            return wanted
        if device_class is not None:
            if not device_class:
                return error_response("class must name a DeviceClass")
            shape = Shape(device_class, wanted or 1)
            return view("make-room", await worker.call(debug.make_room_view, engine, shape), format)
        namespace, slash, name = (pod or "").partition("/")
        if not slash or not namespace or not name or "/" in name:
            return error_response(f"pod must be NAMESPACE/NAME, not {pod!r}")

        return await about_pod(
            namespace, name, "make-room", lambda found: debug.make_room_view(engine, found), format
        )

    snapshots = EncodedSnapshot(lambda: worker.call(engine.state.held))

    streams = StreamSlots(SNAPSHOT_STREAMS)

    @debug_route("/debug/snapshot")
    async def debug_snapshot() -> Response:
        """The objects the extender decides from, as its cache holds them: a ``kind: List`` that
        ``dra-extender simulate``, ``explain --state`` and ``serve --state`` read (``kubectl dra
        snapshot``). Binds in flight and devices held after prioritize are not objects."""
        if not streams.take():
            return error_response(f"{SNAPSHOT_STREAMS} snapshots are being sent; try again shortly", 429)
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
