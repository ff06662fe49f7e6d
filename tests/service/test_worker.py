"""The engine's loop: work runs there, one piece at a time; nothing is queued after stop."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Generator

from extender.service.worker import Batches, EngineWorker


def test_work_runs_inline_on_the_engine_loop_in_order() -> None:
    worker = EngineWorker()
    seen: list[tuple[str, int]] = []

    async def work(i: int) -> int:
        await asyncio.sleep(0)
        seen.append((threading.current_thread().name, i))
        return i

    def note(i: int) -> int:
        seen.append((threading.current_thread().name, i))
        return i

    async def main() -> list[int]:
        worker.attach(asyncio.get_running_loop())
        out = [await worker.call(note, i) for i in range(2)]
        return [*out, await worker.run(work(2))]

    assert asyncio.run(main()) == [0, 1, 2]
    assert seen == [("MainThread", 0), ("MainThread", 1), ("MainThread", 2)]


def test_work_from_another_loop_runs_on_the_engine_loop() -> None:
    worker = EngineWorker()
    engine_loop = asyncio.new_event_loop()
    thread = threading.Thread(target=engine_loop.run_forever, name="engine")
    thread.start()
    try:
        worker.attach(engine_loop)

        async def ask() -> str:
            return await worker.call(lambda: threading.current_thread().name)

        assert asyncio.run(ask()) == "engine"
    finally:
        engine_loop.call_soon_threadsafe(engine_loop.stop)
        thread.join()
        engine_loop.close()


def test_a_closed_loop_is_replaced_by_the_next_one_that_asks() -> None:
    worker = EngineWorker()

    async def which() -> asyncio.AbstractEventLoop | None:
        await worker.call(lambda: None)
        return worker.loop

    first = asyncio.run(which())
    second = asyncio.run(which())
    assert first is not None and second is not None and first is not second and first.is_closed()


def test_informer_events_before_the_loop_wait_and_after_stop_are_dropped() -> None:
    worker = EngineWorker()
    seen: list[str] = []
    worker.call_soon(seen.append, "early")  # a reflector delivering before the server's loop runs

    async def main() -> None:
        worker.attach(asyncio.get_running_loop())
        await asyncio.sleep(0.01)
        worker.stop()
        worker.call_soon(seen.append, "late")  # a reflector thread still delivering at shutdown
        await asyncio.sleep(0.01)

    asyncio.run(main())
    assert seen == ["early"]


def test_batches_run_in_arrival_order_on_the_engine_loop_and_survive_a_failing_call() -> None:
    worker = EngineWorker()
    batches = Batches(worker)
    seen: list[tuple[int, str]] = []

    def record(i: int) -> None:
        seen.append((i, threading.current_thread().name))

    def fail() -> None:
        raise RuntimeError("a broken event")

    def produce(start: int) -> None:
        for i in range(start, start + 100):
            batches.put(record, i)
            if i == 50:
                batches.put(fail)

    async def main() -> None:
        worker.attach(asyncio.get_running_loop())
        first = threading.Thread(target=produce, args=(0,))
        first.start()
        await asyncio.to_thread(first.join)
        await asyncio.to_thread(produce, 100)
        for _ in range(100):
            if len(seen) == 200:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert [i for i, _ in seen] == list(range(200))
    assert {name for _, name in seen} == {"MainThread"}


def test_stepwise_work_gives_the_loop_back_between_slices() -> None:
    """200 steps of 2 ms each on the worker's clock, in slices of 10 ms: other work on the loop
    runs after every 5 steps, never waits for the whole computation (the clock is the test's:
    each step moves it; ``bench.debug_views_bench`` measures the real holds)."""
    worker = EngineWorker()
    clock = [0.0]
    turns: list[str] = []

    def steps() -> Generator[None, None, int]:
        for _ in range(200):
            clock[0] += 2.0  # milliseconds, so that the sums are exact
            turns.append("step")
            yield
        return 200

    async def main() -> int:
        running = True

        async def other_work() -> None:
            while running:
                await asyncio.sleep(0)
                turns.append("other")

        ticker = asyncio.create_task(other_work())
        await asyncio.sleep(0)
        result = await worker.steps(steps, slice_seconds=10.0, clock=lambda: clock[0])
        running = False
        await ticker
        return result

    assert asyncio.run(main()) == 200
    runs = [len(list(run)) for turn, run in itertools.groupby(turns) if turn == "step"]
    assert runs == [5] * 40  # a slice of steps, then the loop's other work, 40 times


def test_stepwise_work_from_another_loop_runs_on_the_engine_loop() -> None:
    worker = EngineWorker()
    seen: list[int] = []

    def steps() -> Generator[None, None, str]:
        seen.append(threading.get_ident())
        yield
        return "done"

    async def engine_side() -> str:
        worker.attach(asyncio.get_running_loop())
        other: list[str] = []
        thread = threading.Thread(target=lambda: other.append(asyncio.run(worker.steps(steps))))
        thread.start()
        while thread.is_alive():
            await asyncio.sleep(0.01)
        return other[0]

    assert asyncio.run(engine_side()) == "done"
    assert seen == [threading.get_ident()]  # this thread's loop was the engine's
