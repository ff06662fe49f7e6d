"""The engine's own thread: every decision and every cache change runs there, one at a time.

The HTTP server's event loop only decodes, forwards and encodes, and answers /healthz, /readyz
and /metrics itself, so a CPU-heavy allocation never delays them. Informer events are applied on
this thread too, so decisions see the cache change only between two pieces of engine work.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger("dra_extender.worker")

T = TypeVar("T")


class EngineWorker:
    def __init__(self, name: str = "engine") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The worker's event loop (started on first use)."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name=self.name, daemon=True)
                self._thread.start()
                started.wait()
                self._loop = loop
            return self._loop

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` on the worker's loop, from another loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self.loop))

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn(*args)`` on the worker's thread, from another loop."""

        async def invoke() -> T:
            return fn(*args)

        return await self.run(invoke())

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        """Schedule ``fn(*args)`` on the worker's thread, from any thread (informer events).

        After :meth:`stop` (shutdown) there is nothing left to update: the call is dropped.
        """
        if self._stopped:
            return
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout: float = 10.0) -> None:
        """Let queued work finish, then end the thread."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            self._stopped = True
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()


class Batches:
    """Calls queued from any thread (informer events), run on the worker's thread in arrival
    order: one wake-up of the worker per burst, not one per event."""

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
