"""A filter waits for the binds kube-scheduler has decided and not yet sent, and no longer."""

from __future__ import annotations

import asyncio

from extender.scheduling.inflight.expected_binds import ExpectedBinds


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_no_other_bind_expected_returns_at_once() -> None:
    expected = ExpectedBinds(Clock())
    expected.expect("a")

    async def main() -> None:
        await asyncio.wait_for(expected.settle("a"), 0.5)  # its own bind is not waited for

    asyncio.run(main())
    assert expected.waits == 0


def test_a_filter_waits_until_the_expected_bind_arrives() -> None:
    expected = ExpectedBinds(Clock(), wait_seconds=5.0)
    order: list[str] = []

    async def filter_b() -> None:
        await expected.settle("b")
        order.append("filter b")

    async def bind_a() -> None:
        await asyncio.sleep(0.05)
        order.append("bind a took its devices")
        expected.arrived("a")

    async def main() -> None:
        expected.expect("a")
        await asyncio.wait_for(asyncio.gather(filter_b(), bind_a()), 2)

    asyncio.run(main())
    assert order == ["bind a took its devices", "filter b"]
    assert expected.waits == 1 and expected.timeouts == 0
    assert len(expected) == 0


def test_a_bind_that_never_comes_is_waited_for_once_at_most() -> None:
    clock = Clock()
    expected = ExpectedBinds(clock, wait_seconds=0.05)

    async def main() -> None:
        expected.expect("lost")
        # The injected clock does not move: the wait ends on the loop's timer, then the
        # expectation has expired by the clock too.
        clock.now += 0.05
        await asyncio.wait_for(expected.settle("b"), 1)
        await asyncio.wait_for(expected.settle("c"), 1)

    asyncio.run(main())
    assert expected.waits == 0 and expected.timeouts == 0  # expired: dropped, not waited for
    assert len(expected) == 0


def test_a_real_wait_runs_out_after_its_deadline() -> None:
    import time

    expected = ExpectedBinds(time.monotonic, wait_seconds=0.1)

    async def main() -> float:
        expected.expect("lost")
        started = time.monotonic()
        await asyncio.wait_for(expected.settle("b"), 2)
        return time.monotonic() - started

    waited = asyncio.run(main())
    assert 0.05 <= waited < 1.0
    assert expected.timeouts == 1 and expected.waits == 1


def test_several_waiters_all_wake() -> None:
    expected = ExpectedBinds(Clock(), wait_seconds=5.0)
    done: list[str] = []

    async def filter_of(uid: str) -> None:
        await expected.settle(uid)
        done.append(uid)

    async def main() -> None:
        expected.expect("a")
        tasks = [asyncio.create_task(filter_of(u)) for u in ("b", "c", "d")]
        await asyncio.sleep(0.02)
        assert done == []
        expected.arrived("a")
        await asyncio.wait_for(asyncio.gather(*tasks), 1)

    asyncio.run(main())
    assert sorted(done) == ["b", "c", "d"]


def test_renewed_expectations_do_not_hold_a_filter_past_its_own_cap() -> None:
    import time

    expected = ExpectedBinds(time.monotonic, wait_seconds=0.1)

    async def renew() -> None:
        for _ in range(50):  # a pod prioritized again and again, its bind never sent
            expected.expect("chatty")
            await asyncio.sleep(0.01)

    async def main() -> float:
        expected.expect("chatty")
        task = asyncio.create_task(renew())
        started = time.monotonic()
        await asyncio.wait_for(expected.settle("b"), 2)
        waited = time.monotonic() - started
        task.cancel()
        return waited

    waited = asyncio.run(main())
    assert 0.05 <= waited < 0.4
    assert expected.timeouts == 1
