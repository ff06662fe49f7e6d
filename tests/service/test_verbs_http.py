"""The verbs' listener's own HTTP (extender/service/verbs_http.py), under a real uvicorn server,
spoken to in raw bytes: what a verb's request gets, what is handed over to the ASGI app, and
every way a client can send too much, too slowly, or out of turn."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
import uvicorn

from extender.service import verbs_http
from extender.service.admission import Admission
from extender.service.app import BodyTooLarge
from extender.service.verbs_http import verbs_protocol

LIMIT = 1024


@dataclass
class Routes:
    """Verbs under /v: ``echo`` answers the body back, ``slow`` after ``delay``, ``boom`` fails."""

    delay: float = 0.3
    answered: list[tuple[str, bytes]] = field(default_factory=list)

    def verb_of(self, path: str) -> str | None:
        verb = path.removeprefix("/v/")
        return verb if verb in ("echo", "slow", "boom", "bind", "big") else None

    def body_limit(self, verb: str) -> int:
        return LIMIT

    def body_refused(self, verb: str, exc: Exception, peer: str | None) -> tuple[int, bytes]:
        return (
            (413, b'{"Error":"too large"}') if isinstance(exc, BodyTooLarge) else (408, b'{"Error":"slow"}')
        )

    def answer(self, verb: str, body: bytes, peer: str | None) -> Awaitable[tuple[int, bytes]]:
        return self._answer(verb, body)

    async def _answer(self, verb: str, body: bytes) -> tuple[int, bytes]:
        if verb == "slow":
            await asyncio.sleep(self.delay)
        if verb == "boom":
            raise RuntimeError("boom")
        self.answered.append((verb, body))
        if verb == "big":
            return 200, b'{"got":"%s"}' % (b"x" * 1_000_000)
        return 200, b'{"got":"%s"}' % body


async def asgi_app(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    """Everything that is not a verb: answered by ASGI, saying what it saw."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    text = f"asgi {scope['method']} {scope['path']} {body.decode()}".encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(text))]}
    )
    await send({"type": "http.response.body", "body": text})


@contextlib.asynccontextmanager
async def listening(
    routes: Routes, *, fence: str | None = None, max_binds: int = 8, keep_alive: int = 5
) -> AsyncIterator[tuple[int, uvicorn.Server]]:
    admission = Admission(
        asgi_app,
        bind_path="/v/bind",
        max_binds=max_binds,
        max_requests=8,
        verbs=frozenset({"/v/echo", "/v/slow", "/v/boom", "/v/bind", "/v/big"}),
        fence=(lambda: fence) if fence is not None else None,
    )
    config = uvicorn.Config(
        admission,
        host="127.0.0.1",
        port=0,
        http=verbs_protocol(routes, admission, max_header_bytes=2048),
        log_config=None,
        timeout_keep_alive=keep_alive,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1], server
    finally:
        server.should_exit = True
        await task


def post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n%s" % (
        path.encode(),
        len(body),
        extra,
        body,
    )


async def talk(port: int, *sends: bytes, pause: float = 0.0, wait: float = 1.0) -> tuple[bytes, bool]:
    """Send each piece (``pause`` apart), read until the server closes or ``wait`` passes;
    (everything read, whether the server closed)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for piece in sends:
        writer.write(piece)
        await writer.drain()
        if pause:
            await asyncio.sleep(pause)
    got = b""
    closed = False
    try:
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), wait)
            if not chunk:
                closed = True
                break
            got += chunk
    except TimeoutError:
        pass
    writer.close()
    return got, closed


def run(scenario: Any) -> None:
    asyncio.run(scenario())


def test_verbs_are_answered_in_one_piece_on_one_kept_alive_connection() -> None:
    async def scenario() -> None:
        routes = Routes()
        async with listening(routes) as (port, _):
            got, closed = await talk(port, post("/v/echo", b"1"), post("/v/echo", b"2"), pause=0.1)
        assert got.count(b"HTTP/1.1 200 OK\r\n") == 2 and not closed
        assert b"content-type: application/json\r\ncontent-length: 11\r\n\r\n" in got
        assert got.endswith(b'{"got":"2"}') and routes.answered == [("echo", b"1"), ("echo", b"2")]

    run(scenario)


def test_everything_else_goes_to_the_asgi_app_even_after_a_verb() -> None:
    async def scenario() -> None:
        async with listening(Routes()) as (port, _):
            got, _ = await talk(
                port,
                post("/v/echo", b"1"),
                b"GET /debug/x HTTP/1.1\r\nHost: x\r\n\r\n",
                post("/v/echo", b"after"),  # that connection is the ASGI server's now
                pause=0.1,
            )
            other, _ = await talk(port, b"PUT /v/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz")
        assert b'{"got":"1"}' in got and b"asgi GET /debug/x " in got and b"asgi POST /v/echo after" in got
        assert b"asgi PUT /v/echo z" in other  # only POST is a verb

    run(scenario)


def test_a_chunked_body_and_a_body_in_pieces_are_read_whole() -> None:
    async def scenario() -> None:
        async with listening(Routes()) as (port, _):
            chunked, _ = await talk(
                port,
                b"POST /v/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n",
            )
            pieces, _ = await talk(port, post("/v/echo", b"abcdef")[:-4], b"cdef", pause=0.05)
        assert chunked.endswith(b'{"got":"abc"}') and pieces.endswith(b'{"got":"abcdef"}')

    run(scenario)


#: (case, bytes sent, status expected, the connection is closed after it)
REFUSED: list[tuple[str, bytes, bytes, bool]] = [
    (
        "declared-too-large",
        b"POST /v/echo HTTP/1.1\r\nContent-Length: %d\r\n\r\nxx" % (LIMIT + 1),
        b"413",
        True,
    ),
    (
        "chunked-too-large",
        b"POST /v/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n"
        % (LIMIT + 1, b"y" * (LIMIT + 1)),
        b"413",
        True,
    ),
    ("malformed", b"POST /v/echo HTTP/9\x00\r\n\r\n", b"400", True),
    ("head-too-large", b"POST /v/echo HTTP/1.1\r\nX-Big: " + b"h" * 4096 + b"\r\n", b"431", True),
    ("handler-fails", post("/v/boom", b"1"), b"500", False),
    ("connection-close", post("/v/echo", b"1", b"Connection: close\r\n"), b"200", True),
    ("http-1.0", b"POST /v/echo HTTP/1.0\r\nContent-Length: 1\r\n\r\n1", b"200", True),
]


@pytest.mark.parametrize(("sent", "status", "closes"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_what_a_request_gets_and_whether_its_connection_stays(
    sent: bytes, status: bytes, closes: bool
) -> None:
    async def scenario() -> None:
        async with listening(Routes()) as (port, _):
            got, closed = await talk(port, sent, wait=0.5)
        assert got.startswith(b"HTTP/1.1 " + status), got
        assert closed == closes

    run(scenario)


def test_a_body_that_does_not_come_in_time_is_answered_408(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verbs_http, "BODY_READ_SECONDS", 0.2)

    async def scenario() -> None:
        routes = Routes()
        async with listening(routes) as (port, _):
            got, closed = await talk(port, post("/v/echo", b"12345")[:-2], wait=1.0)
        assert got.startswith(b"HTTP/1.1 408 ") and closed and routes.answered == []

    run(scenario)


def test_expect_100_continue_gets_its_interim_answer() -> None:
    async def scenario() -> None:
        async with listening(Routes()) as (port, _):
            got, _ = await talk(port, post("/v/echo", b"", b"Expect: 100-continue\r\n"), wait=0.3)
        assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK")

    run(scenario)


def test_a_pipelined_request_closes_the_connection_after_the_first_answer() -> None:
    async def scenario() -> None:
        routes = Routes()
        async with listening(routes) as (port, _):
            got, closed = await talk(port, post("/v/slow", b"1") + post("/v/echo", b"2"))
        assert got.count(b"HTTP/1.1 ") == 1 and got.endswith(b'{"got":"1"}') and closed
        assert routes.answered == [("slow", b"1")]  # the client sends the second one again

    run(scenario)


def test_admission_refuses_as_the_asgi_middleware_does() -> None:
    async def scenario() -> None:
        async with listening(Routes(), fence="a lapsed lease") as (port, _):
            fenced, fenced_closed = await talk(port, post("/v/echo", b"1"))
        routes = Routes(delay=0.5)
        async with listening(routes, max_binds=0) as (port, _):
            busy, busy_closed = await talk(port, post("/v/bind", b"1"), wait=0.3)
        assert fenced.startswith(b"HTTP/1.1 503 ") and b"connection: close\r\n" in fenced and fenced_closed
        assert b"does not decide now: a lapsed lease" in fenced
        assert busy.startswith(b"HTTP/1.1 503 ") and b"retry-after: 1\r\n" in busy and not busy_closed
        assert b"too many binds in flight (limit 0)" in busy

    run(scenario)


def test_shutdown_lets_an_answer_being_made_finish_then_closes() -> None:
    async def scenario() -> None:
        routes = Routes(delay=0.4)
        async with listening(routes) as (port, server):
            talking = asyncio.create_task(talk(port, post("/v/slow", b"1"), wait=2.0))
            await asyncio.sleep(0.1)
            server.should_exit = True
            got, closed = await talking
        assert got.endswith(b'{"got":"1"}') and closed

    run(scenario)


def test_an_idle_connection_is_closed_after_the_keep_alive_time() -> None:
    async def scenario() -> None:
        async with listening(Routes(), keep_alive=1) as (port, _):
            got, closed = await talk(port, post("/v/echo", b"1"), wait=2.0)
        assert got.endswith(b'{"got":"1"}') and closed

    run(scenario)


def test_a_request_head_that_stops_coming_is_closed_after_the_keep_alive_time() -> None:
    async def scenario() -> None:
        async with listening(Routes(), keep_alive=1) as (port, _):
            got, closed = await talk(port, b"POST /v/echo HTTP/1.1\r\nHost: x\r\n", wait=2.5)
        assert got == b"" and closed

    run(scenario)


def test_a_connection_in_use_is_not_closed_as_idle() -> None:
    async def scenario() -> None:
        async with listening(Routes(), keep_alive=1) as (port, _):
            got, _ = await talk(port, *(post("/v/echo", b"%d" % i) for i in range(4)), pause=0.4, wait=0.5)
        assert got.count(b"HTTP/1.1 200 OK") == 4

    run(scenario)


#: (case, bytes sent) -> answered, then closed, and the answer says so (Go's client would
#: otherwise send its next request on a connection being closed: a POST it does not retry).
CLOSING: list[tuple[str, bytes]] = [
    ("connection-close-asked", post("/v/echo", b"1", b"Connection: close\r\n")),
    ("body-too-large", b"POST /v/echo HTTP/1.1\r\nContent-Length: %d\r\n\r\nxx" % (LIMIT + 1)),
    ("malformed", b"POST /v/echo HTTP/9\x00\r\n\r\n"),
    (
        "head-too-large-in-one-piece",
        b"POST /v/echo HTTP/1.1\r\nX-Big: " + b"h" * 4096 + b"\r\nContent-Length: 1\r\n\r\n1",
    ),
]


@pytest.mark.parametrize("sent", [c[1] for c in CLOSING], ids=[c[0] for c in CLOSING])
def test_an_answer_before_a_close_says_connection_close(sent: bytes) -> None:
    async def scenario() -> None:
        async with listening(Routes()) as (port, _):
            got, closed = await talk(port, sent, wait=0.5)
        head = got.split(b"\r\n\r\n", 1)[0]
        assert closed and head.count(b"connection: close") == 1, got

    run(scenario)


def test_an_answer_made_during_shutdown_says_connection_close() -> None:
    async def scenario() -> None:
        async with listening(Routes(delay=0.4), fence=None) as (port, server):
            talking = asyncio.create_task(talk(port, post("/v/slow", b"1"), wait=2.0))
            await asyncio.sleep(0.1)
            server.should_exit = True
            got, closed = await talking
        assert closed and b"connection: close\r\n" in got and got.endswith(b'{"got":"1"}')

    run(scenario)


def test_a_head_still_arriving_at_shutdown_is_closed_at_once() -> None:
    async def scenario() -> None:
        async with listening(Routes()) as (port, server):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /debug/x HTTP/1.1\r\nHo")
            await writer.drain()
            await asyncio.sleep(0.05)
            server.should_exit = True
            assert await asyncio.wait_for(reader.read(), 2.0) == b""  # closed, nothing answered
            writer.close()

    run(scenario)


def test_a_client_that_does_not_read_its_answers_stops_being_read() -> None:
    async def scenario() -> None:
        routes = Routes()
        async with listening(routes) as (port, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            # A small window fills the server's buffers sooner; 4 KB made reading the stalled
            # answers afterwards take 35 s, 64 KB 0.5 s (the server stalls either way).
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            transport = cast(asyncio.Transport, writer.transport)
            transport.pause_reading()  # this client reads nothing
            for _ in range(30):  # one request at a time, as a client that does not pipeline
                writer.write(post("/v/big", b"1"))
                await writer.drain()
                await asyncio.sleep(0.01)
            stalled = len(routes.answered)
            transport.resume_reading()
            with contextlib.suppress(ConnectionResetError):  # closed with requests unread: a reset
                while await asyncio.wait_for(reader.read(2**20), 5.0):
                    pass
            writer.close()
        # 1 MB answers: the server stopped reading once its write buffer filled; what it read
        # afterwards came as pipelined requests (one answered, the connection then closed).
        assert stalled < 30
        assert len(routes.answered) <= stalled + 1

    run(scenario)
