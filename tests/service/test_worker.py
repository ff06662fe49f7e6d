"""The engine's thread: work runs there, one piece at a time; nothing is queued after stop."""

from __future__ import annotations

import asyncio
import threading

from extender.service.worker import EngineWorker


def test_work_runs_on_the_worker_thread_in_order() -> None:
    worker = EngineWorker()
    seen: list[tuple[str, int]] = []

    async def main() -> None:
        for i in range(3):
            await worker.call(lambda i=i: seen.append((threading.current_thread().name, i)))

    asyncio.run(main())
    worker.stop()
    assert seen == [("engine", 0), ("engine", 1), ("engine", 2)]


def test_informer_events_after_stop_are_dropped() -> None:
    worker = EngineWorker()
    worker.call_soon(lambda: None)
    worker.stop()
    worker.call_soon(lambda: None)  # a reflector thread still delivering at shutdown
    assert worker._loop is None and worker._thread is None  # no new thread was started
