"""Watches read on the event loop (extender/cluster/watch_stream.py, AsyncKube.watch,
reflector.LoopWatches) against a server that writes exactly the bytes each case needs: every
line in order however the chunks and TCP writes cut it, an API error by its status, the
reader's own verdict (relist, stop), a connection that breaks or goes quiet; and a reflector's
thread, waiting while the loop reads, ending as its thread-read watch would."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
from kubernetes import client as k8s

from extender.cluster.api import ClusterAPIError
from extender.cluster.async_kube import AsyncKube
from extender.cluster.reflector import Expired, LoopWatches, Reflector

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
END = b"0\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(etype: str, name: str, rv: str, **extra: Any) -> bytes:
    obj = {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv}, **extra}
    return orjson.dumps({"type": etype, "object": obj}) + b"\n"


EVENTS = [event("ADDED", "a", "11"), event("MODIFIED", "a", "12"), event("DELETED", "b", "13")]
WHOLE = b"".join(EVENTS)

#: (case, the writes of the answer after its head): every case carries the same three events.
CUTS: dict[str, list[bytes]] = {
    "one chunk per event": [chunk(e) for e in EVENTS] + [END],
    "all events in one chunk": [chunk(WHOLE), END],
    "chunks cut mid-line": [chunk(WHOLE[:7]), chunk(WHOLE[7:50]), chunk(WHOLE[50:]), END],
    "TCP writes cut mid-chunk-header": [
        b"".join(chunk(e) for e in EVENTS)[:3],
        b"".join(chunk(e) for e in EVENTS)[3:] + END,
    ],
    "blank lines between events": [chunk(b"\n" + EVENTS[0] + b"\n\n"), chunk(EVENTS[1] + EVENTS[2]), END],
}


class Watched:
    """A server answering every request with ``writes`` (after ``head``), then closing if told."""

    def __init__(self, writes: list[bytes], head: bytes = HEAD, close: bool = True) -> None:
        self.writes, self.head, self.close = writes, head, close
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.requests.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(self.head)
        for data in self.writes:
            writer.write(data)
            await writer.drain()
            await asyncio.sleep(0.01)  # separate TCP segments
        if self.close:
            writer.close()
        else:
            await asyncio.sleep(30)


def kube(port: int, timeout: float = 5.0) -> AsyncKube:
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    return AsyncKube(config, timeout=timeout)


def watch(
    server: Watched, *, idle: float = 5.0, on_line: Callable[[bytes], None] | None = None
) -> tuple[list[dict[str, Any]], list[str], BaseException | None]:
    """Run one watch against ``server``: (events, what happened in order, the error raised)."""
    lines: list[dict[str, Any]] = []
    happened: list[str] = []

    def record(line: bytes) -> None:
        lines.append(orjson.loads(line))
        happened.append("line")

    async def run() -> BaseException | None:
        listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        try:
            client = kube(listening.sockets[0].getsockname()[1])
            try:
                await client.watch(
                    "/api/v1/pods",
                    {"resourceVersion": "10", "timeoutSeconds": 300},
                    idle,
                    lambda: happened.append("open"),
                    on_line or record,
                )
            except BaseException as exc:  # what the watch raised is the result
                return exc
            finally:
                await client.close()
            return None
        finally:
            listening.close()

    error = asyncio.run(run())
    return lines, happened, error


@pytest.mark.parametrize("writes", CUTS.values(), ids=CUTS.keys())
def test_every_event_arrives_whole_and_in_order_however_the_answer_is_cut(writes: list[bytes]) -> None:
    server = Watched(writes)
    lines, happened, error = watch(server)
    assert error is None
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in lines] == [
        ("ADDED", "11"),
        ("MODIFIED", "12"),
        ("DELETED", "13"),
    ]
    assert happened == ["open", "line", "line", "line"]
    request = server.requests[0].decode()
    assert request.startswith(
        "GET /api/v1/pods?resourceVersion=10&timeoutSeconds=300&watch=true HTTP/1.1\r\n"
    )


def test_a_refused_watch_raises_the_api_servers_error_and_never_opens() -> None:
    status = orjson.dumps(
        {"kind": "Status", "code": 403, "message": "pods is forbidden", "reason": "Forbidden"}
    )
    head = b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(
        status
    )
    lines, happened, error = watch(Watched([status], head=head))
    assert isinstance(error, ClusterAPIError) and error.code == 403 and "forbidden" in str(error)
    assert lines == [] and happened == []


def test_what_the_reader_raises_ends_the_watch_and_is_raised() -> None:
    def relist(line: bytes) -> None:
        raise Expired

    _, _, error = watch(Watched(CUTS["one chunk per event"]), on_line=relist)
    assert isinstance(error, Expired)


@pytest.mark.parametrize(
    ("case", "server", "idle"),
    [
        ("closed mid-answer", Watched([chunk(EVENTS[0]), b"5\r\nab"]), 5.0),
        ("nothing heard for too long", Watched([chunk(EVENTS[0])], close=False), 0.3),
        ("not HTTP", Watched([], head=b"SSH-2.0-OpenSSH\r\n\r\n"), 5.0),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_broken_or_quiet_watch_fails_as_an_api_error(case: str, server: Watched, idle: float) -> None:
    lines, _, error = watch(server, idle=idle)
    assert isinstance(error, ClusterAPIError), case
    assert len(lines) <= 1


class Sink:
    def __init__(self) -> None:
        self.got: list[tuple[str, str]] = []

    def __call__(self, etype: str, obj: dict[str, Any] | None, items: Any) -> None:
        self.got.append((etype, str(((obj or {}).get("metadata") or {}).get("resourceVersion"))))


class LoopThread:
    """An event loop running on a thread of its own, as the service's engine loop runs."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def reflector_on(port: int, loop: LoopThread | None, stop: threading.Event) -> tuple[Reflector, Sink]:
    sink = Sink()
    http = kube(port)
    watches = LoopWatches(http, lambda: loop.loop if loop else None, stop)
    r = Reflector(None, "/api/v1/pods", "Pod", sink, stop, api_version="v1", loop_watches=watches)  # type: ignore[arg-type]
    r.resource_version = "10"
    return r, sink


@contextlib.contextmanager
def engine_loop_and_server(server: Watched) -> Iterator[tuple[LoopThread, int]]:
    """The engine's loop, and ``server`` listening on a loop of its own: (loop, its port)."""
    server_loop = LoopThread()
    listening = asyncio.run_coroutine_threadsafe(
        asyncio.start_server(server.handle, "127.0.0.1", 0), server_loop.loop
    ).result(5)
    engine_loop = LoopThread()
    try:
        yield engine_loop, listening.sockets[0].getsockname()[1]
    finally:
        engine_loop.stop()
        server_loop.loop.call_soon_threadsafe(listening.close)
        server_loop.stop()


def test_a_reflectors_watch_read_on_the_loop_gives_its_sink_every_event_and_follows_them() -> None:
    with engine_loop_and_server(Watched(CUTS["chunks cut mid-line"])) as (engine_loop, port):
        r, sink = reflector_on(port, engine_loop, threading.Event())
        r._watch()  # returns when the API server ends the watch, as the thread's reading does
        assert sink.got == [("ADDED", "11"), ("MODIFIED", "12"), ("DELETED", "13")]
        assert r.resource_version == "13" and r.down_since is None


def test_a_stopped_reflector_stops_waiting_and_closes_its_watch() -> None:
    with engine_loop_and_server(Watched([chunk(EVENTS[0])], close=False)) as (engine_loop, port):
        stop = threading.Event()
        r, sink = reflector_on(port, engine_loop, stop)
        LoopWatches.POLL_SECONDS, poll = 0.05, LoopWatches.POLL_SECONDS
        try:
            threading.Timer(0.5, stop.set).start()  # one event, then silence: stopped meanwhile
            r._watch()
        finally:
            LoopWatches.POLL_SECONDS = poll
        assert sink.got == [("ADDED", "11")]
        pending = asyncio.run_coroutine_threadsafe(_pending_after_a_moment(), engine_loop.loop).result(5)
        assert pending == []  # the watch went with the stop


async def _pending_after_a_moment() -> list[asyncio.Task[Any]]:
    await asyncio.sleep(0.1)
    return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


def test_without_a_running_loop_the_thread_reads_the_watch_itself() -> None:
    class Raw:
        def watch_lines(
            self, path: str, query: dict[str, Any], timeout: float, on_open: Callable[[], None]
        ) -> Any:
            on_open()
            return iter([orjson.loads(e) for e in EVENTS])

    stop = threading.Event()
    sink = Sink()
    http = kube(1)  # never connected to
    r = Reflector(
        Raw(),  # type: ignore[arg-type]
        "/api/v1/pods",
        "Pod",
        sink,
        stop,
        api_version="v1",
        loop_watches=LoopWatches(http, lambda: None, stop),
    )
    r._watch()
    assert sink.got == [("ADDED", "11"), ("MODIFIED", "12"), ("DELETED", "13")]
