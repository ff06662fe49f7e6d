"""The verbs' listener's HTTP: kube-scheduler's POSTs answered straight from the parser.

kube-scheduler sends three or four small POSTs per pod on kept-alive connections. Through
uvicorn's protocol and ASGI each cost about 0.25 ms of the extender's CPU (under the real
control plane, issue 54: the scope and cycle objects, a task and a flow-control object per
request, two writes per answer, the body through ``receive`` messages and a timeout context),
about as much as deciding a filter. Here a verb's request is parsed by httptools (the C parser
uvicorn itself uses), admitted (:class:`~extender.service.admission.Admission`), answered by
the verbs' own handler and written in one piece.

Everything else that reaches this listener (the debug views, other methods or paths, upgrades)
is handed over, with its connection and the bytes read so far, to uvicorn's own protocol,
which serves the ASGI app as before. uvicorn still owns the listener: the socket, TLS, the
lifespan, signals, graceful shutdown (it tells every connection, this one too, to finish) and
the ``Date`` header.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from http import HTTPStatus
from typing import Any, Protocol, cast

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from extender.service.admission import Admission
from extender.service.app import BODY_READ_SECONDS, BodyTooLarge, BodyTooSlow

log = logging.getLogger("dra_extender.http")


class VerbRoutes(Protocol):
    """What this listener answers itself: POSTs to the verbs' paths."""

    def verb_of(self, path: str) -> str | None: ...

    def body_limit(self, verb: str) -> int: ...

    def body_refused(self, verb: str, exc: Exception, peer: str | None) -> tuple[int, bytes]: ...

    def answer(self, verb: str, body: bytes, peer: str | None) -> Awaitable[tuple[int, bytes]]: ...


def certificate_names(cert: dict[str, Any] | None) -> set[str]:
    """Common names and DNS names of a peer certificate as ``ssl`` reports it."""
    if not cert:
        return set()
    names = {value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names |= {value for kind, value in cert.get("subjectAltName", ()) if kind == "DNS"}
    return names


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n".encode("latin-1")


_STATUS_LINES = {status: _status_line(status) for status in (200, 400, 408, 413, 431, 500, 503)}
_JSON = b"content-type: application/json\r\n"


class VerbsHttp(asyncio.Protocol):
    """One connection of the verbs' listener (uvicorn's ``http`` protocol class: its
    constructor, its ``shutdown``, its connection and task sets). Made per listener by
    :func:`verbs_protocol`, which sets the class attributes."""

    routes: VerbRoutes
    admission: Admission | None = None
    #: Largest request head (request line and headers), bytes.
    max_header_bytes: int = 16 * 1024
    #: Accepted client certificate names (empty: any the CA signed).
    client_names: frozenset[str] = frozenset()

    def __init__(
        self,
        config: Any,
        server_state: Any,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.config = config
        self.server_state = server_state
        self.app_state = app_state
        self.loop = _loop or asyncio.get_event_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.peer: str | None = None
        #: The raw bytes of the request being read, until it is known to be a verb's.
        self._raw: list[bytes] = []
        self._head_bytes = 0
        self._raw_bytes = 0
        self._headers_done = False
        self._url = b""
        self._verb: str | None = None
        self._declared: int | None = None
        self._body: list[bytes] = []
        self._size = 0
        self._path = ""
        self._continue = False
        self._in_message = False
        #: A request was completed in the chunk being parsed (another one after it is pipelined).
        self._completed_here = False
        #: What the client sends is no longer read (a pipelined request, a body refused).
        self._dropping = False
        self._hand_over = False
        #: A verb is being answered (reading is paused meanwhile: one request at a time).
        self._busy = False
        self._closing = False
        #: The transport's buffer is full (the client does not read): reading waits for it.
        self._write_paused = False
        self._idle_timer: asyncio.TimerHandle | None = None
        #: When the client last sent something or got an answer (the keep-alive time runs from it).
        self._active_at = self.loop.time()
        self._body_timer: asyncio.TimerHandle | None = None

    # --- the connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport's subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)
        self.server_state.connections.add(self)
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple | list) and peer else None
        if self.client_names:
            names = certificate_names(transport.get_extra_info("peercert"))
            if not names & self.client_names:
                log.warning(
                    "refused a client certificate named %s (allowed: %s)",
                    ", ".join(sorted(names)) or "nothing",
                    ", ".join(sorted(self.client_names)),
                )
                self._close()
                return
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self.server_state.connections.discard(self)
        self._cancel_timers()
        self.transport = None

    def eof_received(self) -> bool | None:
        return None  # close our side too; an answer being made is dropped when it is ready

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: close now unless a verb's request is being read (its
        body within :data:`BODY_READ_SECONDS`) or answered; then once its answer is written, with
        ``connection: close``. A head still arriving is closed at once, as uvicorn does."""
        self._closing = True
        if not self._busy and not (self._in_message and self._headers_done):
            self._close()

    # The transport's flow control (a client that sends requests but never reads the answers).
    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if not self._busy and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self._active_at = self.loop.time()
        if self._dropping:
            return
        if not self._in_message:  # a request starts with this chunk (nobody pipelines here)
            self._raw = [data]
            self._raw_bytes = len(data)
        elif not self._headers_done:
            self._raw.append(data)
            self._raw_bytes += len(data)
        self._completed_here = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._hand_over = True
        except httptools.HttpParserError as exc:
            if not (self._hand_over or self._dropping):
                self._write(400, b'{"Error":"malformed HTTP request: %s"}' % _ascii(exc), close=True)
                self._close()
                return
        if self._hand_over:
            self._give_to_uvicorn()
        elif self._dropping:
            self._closing = True  # after the answer being made, if any
            if not self._busy:
                self._close()
        elif self._in_message and not self._headers_done:
            if self._raw_bytes > self.max_header_bytes:  # all head: httptools buffers a header whole
                self._head_too_large()
        elif self._in_message and self._body_timer is None and self._verb is not None:
            # A body still to come (most arrive with their head): it has that long.
            self._body_timer = self.loop.call_later(BODY_READ_SECONDS, self._body_too_slow)

    # --- httptools' callbacks -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._completed_here or self._busy:
            # A pipelined request: none of this listener's clients sends one. The connection
            # is closed after the answer being made; the client sends the request again.
            self._dropping = True
            raise _Stop
        self._in_message = True
        self._headers_done = False
        self._head_bytes = 0
        self._url = b""
        self._verb = None
        self._declared = None
        self._body = []
        self._size = 0
        self._continue = False

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._head_bytes += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4
        lowered = name.lower()
        if lowered == b"content-length":
            self._declared = int(value) if value.isdigit() else None
        elif lowered == b"expect" and value.lower() == b"100-continue":
            self._continue = True

    def on_headers_complete(self) -> None:
        self._headers_done = True
        if self._head_bytes > self.max_header_bytes:  # whichever request: uvicorn has no limit
            self._head_too_large()
            raise _Stop
        self._path = _path_of(self._url)
        verb = self.routes.verb_of(self._path) if self.parser.get_method() == b"POST" else None
        if verb is None or self.parser.should_upgrade():
            self._hand_over = True
            raise _Stop
        self._verb = verb
        self._raw = []
        if self._declared is not None and self._declared > self.routes.body_limit(verb):
            self._write(*self.routes.body_refused(verb, BodyTooLarge(), self.peer), close=True)
            self._close()  # the body is not read
            raise _Stop
        if self._continue:
            self._send(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        assert self._verb is not None
        self._size += len(body)
        if self._size > self.routes.body_limit(self._verb):
            self._write(*self.routes.body_refused(self._verb, BodyTooLarge(), self.peer), close=True)
            self._close()
            raise _Stop
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._in_message = False
        self._completed_here = True
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        verb, self._verb = self._verb, None
        assert verb is not None and self.transport is not None
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body = []
        keep_alive = self.parser.should_keep_alive()
        limit = getattr(self.config, "limit_concurrency", None)
        if limit is not None and (
            len(self.server_state.connections) >= limit or len(self.server_state.tasks) >= limit
        ):  # as uvicorn answers when its limit is reached
            log.warning("Exceeded concurrency limit.")
            close = not keep_alive or self._closing
            self._write(503, b'{"Error":"Exceeded concurrency limit."}', close=close)
            if close:
                self._close()
            return
        self._busy = True
        self.transport.pause_reading()  # one request at a time, as kube-scheduler sends them
        task = self.loop.create_task(self._answer(verb, self._path, body, keep_alive))
        self.server_state.tasks.add(task)
        task.add_done_callback(self.server_state.tasks.discard)

    # --- answering -----------------------------------------------------------------------------

    async def _answer(self, verb: str, path: str, body: bytes, keep_alive: bool) -> None:
        close = not keep_alive
        try:
            status, payload, extra, refused_close = await self._admitted_answer(verb, path, body)
            close = close or refused_close or self._closing
            self._write(status, payload, extra, close=close)
            self.server_state.total_requests += 1
        finally:
            self._busy = False
            if close or self._closing:
                self._close()
            elif self.transport is not None and not self.transport.is_closing():
                if not self._write_paused:  # else once the client reads (resume_writing)
                    self.transport.resume_reading()
                self._active_at = self.loop.time()

    async def _admitted_answer(self, verb: str, path: str, body: bytes) -> tuple[int, bytes, bytes, bool]:
        """(status, payload, extra header lines, close after it): admission's refusal, or the
        verb's answer; any failure a 500, as uvicorn answers an app's (the detail in the log)."""
        try:
            admission = self.admission
            refusal = admission.refusal(path) if admission is not None else None
            if refusal is not None:
                headers = [h for h in refusal.headers if h[0] != b"connection"]
                return 503, refusal.body, b"".join(b"%s: %s\r\n" % h for h in headers), refusal.close
            counter = admission.counter(path) if admission is not None else None
            if counter is not None:
                counter.in_flight += 1
            try:
                status, payload = await self.routes.answer(verb, body, self.peer)
            finally:
                if counter is not None:
                    counter.in_flight -= 1
            return status, payload, b"", False
        except Exception:
            log.exception("%s request failed", verb)
            return 500, b'{"Error":"internal error (see the extender\'s log)"}', b"", False

    def _body_too_slow(self) -> None:
        self._body_timer = None
        if self._verb is not None and self._in_message:
            self._write(*self.routes.body_refused(self._verb, BodyTooSlow(), self.peer), close=True)
            self._close()

    def _head_too_large(self) -> None:
        self._write(431, b'{"Error":"request head larger than %d bytes"}' % self.max_header_bytes, close=True)
        self._close()

    def _write(self, status: int, payload: bytes, extra: bytes = b"", *, close: bool = False) -> None:
        """One answer; ``close``: the connection is closed after it, and the answer says so (Go's
        client then never sends another request on it)."""
        head = _STATUS_LINES.get(status) or _status_line(status)
        default = b"".join(b"%s: %s\r\n" % header for header in self.server_state.default_headers)
        if close:
            extra += b"connection: close\r\n"
        self._send(
            b"%s%s%s%scontent-length: %d\r\n\r\n%s" % (head, default, _JSON, extra, len(payload), payload)
        )

    def _send(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def _close(self) -> None:
        self._dropping = True  # nothing more is read (asyncio's TLS may still hand data over)
        self._cancel_timers()
        if self.transport is not None:
            self.transport.close()

    def _arm_idle(self, seconds: float | None = None) -> None:
        """One timer per connection, moved on when it fires early (not one per answer)."""
        if seconds is None:
            seconds = float(getattr(self.config, "timeout_keep_alive", 5))
        self._idle_timer = self.loop.call_later(seconds, self._idle_expired)

    def _idle_expired(self) -> None:
        self._idle_timer = None
        if self.transport is None:
            return
        keep_alive = float(getattr(self.config, "timeout_keep_alive", 5))
        idle = self.loop.time() - self._active_at
        if self._busy or idle < keep_alive:  # nothing heard for that long: even mid-request
            self._arm_idle(keep_alive if self._busy else max(keep_alive - idle, 0.05))
            return
        self._close()

    def _cancel_timers(self) -> None:
        for timer in (self._idle_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._idle_timer = self._body_timer = None

    # --- everything else: uvicorn's --------------------------------------------------------------

    def _give_to_uvicorn(self) -> None:
        """This connection is uvicorn's from now on, from the start of the request being read."""
        transport, raw = self.transport, b"".join(self._raw)
        self._cancel_timers()
        self.server_state.connections.discard(self)
        self.transport = None
        if transport is None or transport.is_closing():
            return
        successor = HttpToolsProtocol(
            config=self.config, server_state=self.server_state, app_state=self.app_state, _loop=self.loop
        )
        transport.set_protocol(successor)
        successor.connection_made(transport)
        successor.data_received(raw)  # never during shutdown: it closes a connection mid-head


class _Stop(Exception):
    """Raised from a parser callback to stop parsing (httptools reports it as a parser error)."""


def _path_of(url: bytes) -> str:
    return url.split(b"?", 1)[0].decode("latin-1")


def _ascii(exc: Exception) -> bytes:
    return str(exc).replace('"', "'").encode("ascii", "replace")


def verbs_protocol(
    routes: VerbRoutes,
    admission: Admission | None,
    *,
    max_header_bytes: int,
    client_names: frozenset[str] = frozenset(),
) -> type[VerbsHttp]:
    """The protocol class of one verbs' listener (uvicorn's ``http`` setting)."""
    return type(
        "VerbsHttpOfListener",
        (VerbsHttp,),
        {
            "routes": routes,
            "admission": admission,
            "max_header_bytes": max_header_bytes,
            "client_names": client_names,
        },
    )
