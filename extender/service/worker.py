"""The engine's loop: every decision and every cache change runs there, one at a time.

That loop is the verbs' HTTP server loop: a filter is decoded, decided and answered without a
thread hop (hopping to a thread of its own cost each call a round trip through two event
loops and a GIL hand-off: filter p50 1.8 ms against an empty endpoint's 0.9 ms, 0.8 ms
without). Informer events, delivered by reflector threads, are queued onto the same loop, so
decisions see the cache change only between two pieces of engine work. Probes and metrics
stay answered while the engine works: the ops listener runs on a thread and loop of its own
(:func:`extender.service.listeners.serve`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

log = logging.getLogger("dra_extender.worker")

T = TypeVar("T")


class EngineWorker:
    """Runs engine work on one event loop: the first loop that asks (the server's, at startup)."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        #: Calls queued from other threads before the loop was known.
        self._pending: list[tuple[Callable[..., object], tuple[Any, ...]]] = []
        self._stopped = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Make ``loop`` the engine's loop (unless one is already running work); calls queued
        before then run on it now. A closed loop is replaced (in-process tests run one service
        under several ``asyncio.run`` calls)."""
        with self._lock:
            if self._loop is not None and not self._loop.is_closed():
                return
            self._loop = loop
            self._stopped = False
            pending, self._pending = self._pending, []
        for fn, args in pending:
            loop.call_soon_threadsafe(fn, *args)

    def _engine_loop(self) -> asyncio.AbstractEventLoop:
        running = asyncio.get_running_loop()
        if self._loop is None or self._loop.is_closed():
            self.attach(running)
        assert self._loop is not None
        return self._loop

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` on the engine's loop (directly when already there)."""
        loop = self._engine_loop()
        if loop is asyncio.get_running_loop():
            return await work
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, loop))

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn(*args)`` on the engine's loop (directly when already there)."""
        loop = self._engine_loop()
        if loop is asyncio.get_running_loop():
            return fn(*args)

        async def invoke() -> T:
            return fn(*args)

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(invoke(), loop))

    async def steps(
        self,
        start: Callable[[], Generator[None, None, T]],
        slice_seconds: float = 0.01,
        clock: Callable[[], float] = time.perf_counter,
    ) -> T:
        """Run a stepwise computation (``start()``, on the engine's loop) to its end, giving the
        loop back after every ``slice_seconds`` of steps (on ``clock``): the verbs are served in
        between, so a debug view over 5,000 nodes never holds a filter up for longer than a
        slice (``python -m bench.debug_views_bench`` measures the longest hold)."""

        async def sliced() -> T:
            running = start()
            until = clock() + slice_seconds
            while True:
                try:
                    next(running)
                except StopIteration as done:
                    result: T = done.value
                    return result
                if clock() >= until:
                    await asyncio.sleep(0)
                    until = clock() + slice_seconds

        return await self.run(sliced())

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Schedule ``fn(*args)`` on the engine's loop, from any thread (informer events).

        After :meth:`stop` (shutdown) there is nothing left to update: the call is dropped.
        """
        with self._lock:
            if self._stopped:
                return
            loop = self._loop
            if loop is None or loop.is_closed():  # kept for the next loop (in-process tests)
                self._pending.append((fn, args))
                return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (shutdown)
            loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        """No more calls from other threads: shutdown has begun."""
        with self._lock:
            self._stopped = True
            self._pending = []


class Batches:
    """Calls queued from any thread (informer events), run on the engine's loop in arrival
    order: one wake-up of the loop per burst, not one per event."""

    def __init__(self, worker: EngineWorker) -> None:
        self.worker = worker
        self._queue: deque[tuple[Callable[..., object], tuple[Any, ...]]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def put(self, fn: Callable[..., object], *args: Any) -> None:
        with self._lock:
            self._queue.append((fn, args))
            if self._scheduled:
                return
            self._scheduled = True
        self.worker.call_soon(self._drain)

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._scheduled = False
                    return
                batch = list(self._queue)
                self._queue.clear()
            for fn, args in batch:
                try:
                    fn(*args)
                except Exception:  # one bad event must not stop the ones after it
                    log.exception("applying a cache change failed")
