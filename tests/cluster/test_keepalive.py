"""The bind path's kept-alive connections (extender/cluster/keepalive.py) against a server that
writes exactly the bytes each case needs: reuse, the server closing, framing, lost answers,
the connection limit. Whether a failure can have reached the server is what the claim writer
decides on, so every failure's class is checked."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.cluster.keepalive import Answer, AnswerLost, ConnectFailed, KeepAlivePool, PoolError

REQUEST = b"PUT /x HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}"


def answer(body: bytes = b'{"ok":true}', status: bytes = b"200 OK", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n%s" % (status, len(body), extra, body)


CHUNKED = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'

#: How the server answers one request: the bytes to write (None: write nothing), then close?
Reply = Callable[[int], Awaitable[tuple[bytes | None, bool]]]


@dataclass
class Server:
    """Counts connections and requests; each request's reply comes from ``reply(n)``."""

    reply: Reply
    connections: int = 0
    requests: int = 0
    open_now: int = 0
    most_open: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        self.writers.append(writer)
        try:
            while True:
                try:
                    await reader.readuntil(b"\r\n\r\n{}")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.requests += 1
                data, close = await self.reply(self.requests)
                if data is not None:
                    writer.write(data)
                    await writer.drain()
                if close:
                    return
        finally:
            self.open_now -= 1
            writer.close()


async def serving(reply: Reply) -> tuple[Server, asyncio.AbstractServer, int]:
    server = Server(reply)
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    return server, listening, listening.sockets[0].getsockname()[1]


def ok(extra: bytes = b"") -> Reply:
    async def reply(_n: int) -> tuple[bytes | None, bool]:
        return answer(extra=extra), False

    return reply


async def exchange(pool: KeepAlivePool, timeout: float = 2.0) -> Answer:
    return await pool.exchange(REQUEST, connect_timeout=1.0, timeout=timeout)


def run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(main())


def test_one_connection_serves_requests_one_after_another() -> None:
    async def main() -> None:
        server, listening, port = await serving(ok())
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=4)
        answers = [await exchange(pool) for _ in range(3)]
        assert [(a.status, a.reason, a.body) for a in answers] == [(200, "OK", b'{"ok":true}')] * 3
        assert (server.connections, server.requests) == (1, 3)
        pool.close()
        listening.close()

    run(main)


def test_a_connection_the_server_closed_while_idle_is_not_used_again() -> None:
    async def main() -> None:
        async def reply(_n: int) -> tuple[bytes | None, bool]:
            return answer(), True  # answers, then closes (as an idle timeout would)

        server, listening, port = await serving(reply)
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=4)
        await exchange(pool)
        await asyncio.sleep(0.05)  # the close arrives
        assert (await exchange(pool)).status == 200
        assert server.connections == 2
        pool.close()
        listening.close()

    run(main)


@pytest.mark.parametrize(
    ("extra", "reused"),
    [(b"Connection: close\r\n", False), (b"Connection: keep-alive\r\n", True), (b"", True)],
    ids=["connection-close", "keep-alive", "http-1.1-default"],
)
def test_an_answer_saying_connection_close_is_the_connections_last(extra: bytes, reused: bool) -> None:
    async def main() -> None:
        server, listening, port = await serving(ok(extra))
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=4)
        await exchange(pool)
        await exchange(pool)
        assert server.connections == (1 if reused else 2)
        pool.close()
        listening.close()

    run(main)


def test_a_chunked_answer_is_read_whole() -> None:
    async def main() -> None:
        async def reply(_n: int) -> tuple[bytes | None, bool]:
            return CHUNKED, False

        _, listening, port = await serving(reply)
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=1)
        assert (await exchange(pool)).body == b'{"a":1}'
        assert (await exchange(pool)).body == b'{"a":1}'
        pool.close()
        listening.close()

    run(main)


#: (case, what the server does with the request) -> AnswerLost: it may have been applied.
LOST_ANSWERS: list[tuple[str, bytes | None, bool]] = [
    ("closed-without-answer", None, True),
    ("malformed-status-line", b"HTTX/1.1 200 OK\r\n\r\n", False),
    ("half-an-answer-then-close", answer()[:-3], True),
]


@pytest.mark.parametrize(("data", "close"), [c[1:] for c in LOST_ANSWERS], ids=[c[0] for c in LOST_ANSWERS])
def test_an_answer_that_does_not_come_whole_is_lost_not_resent(data: bytes | None, close: bool) -> None:
    async def main() -> None:
        async def reply(n: int) -> tuple[bytes | None, bool]:
            return (data, close) if n == 1 else (answer(), False)

        server, listening, port = await serving(reply)
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=1)
        with pytest.raises(AnswerLost):
            await exchange(pool)
        assert server.requests == 1  # never sent again here
        assert (await exchange(pool)).status == 200  # on a fresh connection
        assert server.connections == 2
        pool.close()
        listening.close()

    run(main)


def test_a_late_answer_is_never_read_as_the_next_requests() -> None:
    async def main() -> None:
        async def reply(n: int) -> tuple[bytes | None, bool]:
            if n == 1:
                await asyncio.sleep(0.3)
                return answer(b'{"late":1}'), False
            return answer(b'{"second":2}'), False

        server, listening, port = await serving(reply)
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=1)
        with pytest.raises(AnswerLost, match=r"no answer within 0\.1 s"):
            await exchange(pool, timeout=0.1)
        assert (await exchange(pool)).body == b'{"second":2}'
        assert server.connections == 2
        pool.close()
        listening.close()

    run(main)


def test_data_no_request_asked_for_drops_the_connection() -> None:
    async def main() -> None:
        server, listening, port = await serving(ok())
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=1)
        await exchange(pool)
        server.writers[0].write(answer(b'{"unasked":1}'))
        await asyncio.sleep(0.05)
        assert (await exchange(pool)).body == b'{"ok":true}'
        assert server.connections == 2
        pool.close()
        listening.close()

    run(main)


def test_no_more_connections_than_the_limit_and_the_wait_for_one_is_bounded() -> None:
    async def main() -> None:
        async def slow(_n: int) -> tuple[bytes | None, bool]:
            await asyncio.sleep(0.2)
            return answer(), False

        server, listening, port = await serving(slow)
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=2)
        answers = await asyncio.gather(*(exchange(pool) for _ in range(6)))
        assert [a.status for a in answers] == [200] * 6 and server.most_open == 2
        busy = [asyncio.ensure_future(exchange(pool)) for _ in range(2)]
        await asyncio.sleep(0.01)
        with pytest.raises(ConnectFailed, match="no free connection"):
            await pool.exchange(REQUEST, connect_timeout=0.05, timeout=2.0)
        await asyncio.gather(*busy)
        assert server.requests == 8  # the one that waited too long was never sent
        pool.close()
        listening.close()

    run(main)


def test_a_refused_connection_fails_as_not_sent() -> None:
    async def main() -> None:
        _, listening, port = await serving(ok())
        listening.close()
        await listening.wait_closed()
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=1)
        with pytest.raises(ConnectFailed):
            await exchange(pool)

    run(main)


def test_closing_the_pool_fails_what_is_in_flight_and_refuses_new_requests() -> None:
    async def main() -> None:
        async def never(_n: int) -> tuple[bytes | None, bool]:
            await asyncio.sleep(5)
            return None, False

        _, listening, port = await serving(never)
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=1)
        flying = asyncio.ensure_future(exchange(pool, timeout=5))
        await asyncio.sleep(0.05)
        pool.close()
        with pytest.raises(AnswerLost):
            await flying
        with pytest.raises(ConnectFailed):
            await exchange(pool)
        assert issubclass(AnswerLost, PoolError) and issubclass(ConnectFailed, PoolError)
        listening.close()

    run(main)


def test_a_request_cancelled_while_it_waits_for_a_connection_loses_no_slot() -> None:
    async def main() -> None:
        async def slow(_n: int) -> tuple[bytes | None, bool]:
            await asyncio.sleep(0.1)
            return answer(), False

        server, listening, port = await serving(slow)
        pool = KeepAlivePool("127.0.0.1", port, None, None, limit=1)
        first = asyncio.ensure_future(exchange(pool))  # holds the only slot for 0.1 s
        waiting = [asyncio.ensure_future(exchange(pool)) for _ in range(2)]
        await asyncio.sleep(0.01)
        waiting[0].cancel()
        assert (await first).status == 200
        waiting[1].cancel()  # the slot may have been handed to it already: it is passed on
        await asyncio.gather(*waiting, return_exceptions=True)
        # A lost slot would leave these waiting for a connection until they fail (1 s).
        answers = await asyncio.gather(*(exchange(pool, timeout=1.0) for _ in range(3)))
        assert [a.status for a in answers] == [200] * 3 and server.requests >= 4
        pool.close()
        listening.close()

    run(main)


def test_a_slot_handed_to_a_request_cancelled_in_the_same_step_is_passed_on() -> None:
    """The race the test above cannot time: the slot is handed over (the waiter has its
    result) and the waiting task is cancelled before it runs again."""

    async def main() -> None:
        pool = KeepAlivePool("127.0.0.1", 9, None, None, limit=1)
        pool._free = 0  # one request in flight holds the only slot
        loop = asyncio.get_running_loop()
        waiting = asyncio.ensure_future(pool._wait_for_slot(loop, loop.time() + 5, 5))
        await asyncio.sleep(0)  # it waits now
        pool._release_slot()  # the request in flight ends: the slot goes to the waiter...
        waiting.cancel()  # ...which is cancelled before it runs again
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert pool._free == 1  # passed on, not lost

    run(main)
