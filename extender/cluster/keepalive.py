"""Kept-alive HTTP/1.1 connections to the API server, for the bind path's requests.

A bind makes three requests (the claim's finalizer update, its status, the pod's Binding), so
what one request costs the extender's CPU is a large share of a bound pod's. aiohttp's client
spends most of a request's 0.35-0.45 ms (measured under the real control plane, issue 54) on
generality this path never uses: cookies, redirects, proxies, compression, tracing, its stream
and payload layers. Here a request is one pre-built block of bytes written to a kept-alive
connection and its answer is parsed by httptools (the C parser uvicorn serves with); TLS is the
event loop's (uvloop's). What HTTP itself needs (framing, chunked bodies, keep-alive, errors)
is httptools'; this module only pools connections and maps their failures.

Failures say whether the request can have reached the server: :class:`ConnectFailed` (no
connection was made, nothing was sent) or :class:`AnswerLost` (it may have been applied: the
caller decides, a write is never sent again here).
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from typing import cast

import httptools


class PoolError(Exception):
    """A request through :class:`KeepAlivePool` got no answer."""


class ConnectFailed(PoolError):
    """No connection could be made in time: nothing of the request was sent."""


class AnswerLost(PoolError):
    """The request was (maybe partly) sent and no complete answer came: it may have been applied."""


class Answer:
    """A complete answer: status code, reason phrase and body."""

    __slots__ = ("body", "reason", "status")

    def __init__(self, status: int, reason: str, body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.body = body


class _Connection(asyncio.Protocol):
    """One connection: at most one request in flight; httptools parses each answer in turn."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Answer] | None = None
        self._reason = bytearray()
        self._body: list[bytes] = []
        self._close_after = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport's subclasses, but have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # nothing was asked: the server is not speaking our protocol
            self._fail(AnswerLost("the API server sent data no request asked for"))
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(AnswerLost(f"malformed answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._waiter is not None and not self._waiter.done():
            why = f": {exc}" if exc is not None else ""
            self._waiter.set_exception(AnswerLost(f"the connection closed before the answer{why}"))
        self._waiter = None

    # httptools' callbacks
    def on_message_begin(self) -> None:
        if self._waiter is None:  # an answer after the last one's end, in the same chunk
            raise AnswerLost("the API server sent an answer no request asked for")

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 10 and name.lower() == b"connection" and value.lower() == b"close":
            self._close_after = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        waiter, self._waiter = self._waiter, None
        answer = Answer(self._parser.get_status_code(), self._reason.decode("latin-1"), b"".join(self._body))
        self._reason.clear()
        self._body = []
        if self._close_after or not self._parser.should_keep_alive():
            self.close()
        if waiter is not None and not waiter.done():
            waiter.set_result(answer)

    # ours
    @property
    def usable(self) -> bool:
        return not self.lost and self.transport is not None and not self.transport.is_closing()

    def send(self, request: bytes) -> asyncio.Future[Answer]:
        assert self.transport is not None and self._waiter is None
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._waiter

    @property
    def idle(self) -> bool:
        return self._waiter is None

    def expire(self, timeout: float) -> None:
        """The answer did not come in time: fail the request and drop the connection."""
        self._fail(AnswerLost(f"no answer within {timeout:g} s"))

    def _fail(self, error: PoolError) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self._waiter = None
        self.close()

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()


class KeepAlivePool:
    """At most ``limit`` connections to one server, kept alive between requests; made on the
    running loop (a pool serves that event loop only)."""

    def __init__(
        self,
        host: str,
        port: int,
        context: ssl.SSLContext | None,
        server_hostname: str | None,
        limit: int,
    ) -> None:
        self.host, self.port = host, port
        self._ssl = context
        self._server_hostname = server_hostname if context is not None else None
        self._idle: deque[_Connection] = deque()
        #: Requests that may be in flight now beyond those that are; waiters for a slot, in
        #: order (a slot is handed straight to the first: no semaphore, no timeout context,
        #: which cost as much as the rest of a request's bookkeeping when binds queue here).
        self._free = limit
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._all: set[_Connection] = set()
        self._loop = asyncio.get_running_loop()
        self.closed = False

    async def exchange(self, request: bytes, *, connect_timeout: float, timeout: float) -> Answer:
        """Send ``request`` (a whole HTTP/1.1 request) and return its answer.

        ``connect_timeout`` bounds the wait for a free connection or a new one; ``timeout``
        the whole exchange. Raises :class:`ConnectFailed` (nothing sent) or :class:`AnswerLost`.
        """
        loop = asyncio.get_running_loop()
        now = loop.time()
        deadline = now + timeout
        connected_by = min(deadline, now + connect_timeout)
        if self._free > 0 and not self._waiting:
            self._free -= 1
        else:
            await self._wait_for_slot(loop, connected_by, connect_timeout)
        try:
            connection = await self._connection(connected_by)
            if not connection.usable:  # closed by the server as it was made (a limit, a reset)
                self._forget(connection)
                raise ConnectFailed(f"{self.host}:{self.port} closed the connection before the request")
            try:
                answered = connection.send(request)
            except Exception as exc:  # the transport refused the bytes: none left
                self._forget(connection)
                raise ConnectFailed(f"sending to {self.host}:{self.port}: {exc}") from None
            expiry = loop.call_at(deadline, connection.expire, timeout)
            try:
                answer = await answered
            except BaseException:
                self._forget(connection)  # a late answer must not be read as the next request's
                raise
            finally:
                expiry.cancel()
            if connection.usable and not self.closed:
                self._idle.append(connection)
            else:
                self._forget(connection)
            return answer
        finally:
            self._release_slot()

    async def _wait_for_slot(
        self, loop: asyncio.AbstractEventLoop, by: float, connect_timeout: float
    ) -> None:
        """Wait until a request in flight hands its slot over; :class:`ConnectFailed` at ``by``."""
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)

        def expire() -> None:
            if not waiter.done():
                waiter.set_exception(ConnectFailed(f"no free connection within {connect_timeout:g} s"))

        timer = loop.call_at(by, expire)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release_slot()  # handed over as we were cancelled: pass it on
            raise
        finally:
            timer.cancel()

    def _release_slot(self) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    async def _connection(self, connected_by: float) -> _Connection:
        while self._idle:
            connection = self._idle.pop()  # the most recently used: the least likely timed out
            if connection.usable and connection.idle:
                return connection
            self._forget(connection)
        if self.closed:
            raise ConnectFailed("the connection pool is closed")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(connected_by):
                _, protocol = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self._server_hostname,
                )
        except TimeoutError:
            raise ConnectFailed(f"connecting to {self.host}:{self.port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise ConnectFailed(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        self._all.add(protocol)
        return protocol

    def _forget(self, connection: _Connection) -> None:
        connection.close()
        self._all.discard(connection)

    def close(self) -> None:
        """Close every connection; requests in flight get :class:`AnswerLost`. A pool whose
        loop is gone (or another one's) only forgets its connections: they went with it."""
        self.closed = True
        if not self._loop.is_closed():
            for connection in list(self._all):
                connection.close()
        self._all.clear()
        self._idle.clear()
