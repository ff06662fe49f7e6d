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


def test_batches_run_in_arrival_order_on_the_worker_and_survive_a_failing_call() -> None:
    import threading
    import time

    from extender.service.worker import Batches

    worker = EngineWorker()
    batches = Batches(worker)
    seen: list[tuple[int, str]] = []
    done = threading.Event()

    def record(i: int) -> None:
        seen.append((i, threading.current_thread().name))
        if i == 199:
            done.set()

    def fail() -> None:
        raise RuntimeError("a broken event")

    def produce(start: int) -> None:
        for i in range(start, start + 100):
            batches.put(record, i)
            if i == 50:
                batches.put(fail)

    first = threading.Thread(target=produce, args=(0,))
    first.start()
    first.join()
    produce(100)
    assert done.wait(5)
    time.sleep(0.05)
    assert [i for i, _ in seen] == list(range(200))
    assert {name for _, name in seen} == {"engine"}
    worker.stop()
