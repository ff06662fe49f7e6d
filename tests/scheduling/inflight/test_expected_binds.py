"""A filter waits for the binds kube-scheduler has decided and not yet sent, and no longer.

Every wait runs on a clock the test owns (tests/virtual_time.py): how long a filter waited is
read off that clock exactly, and what woke it is told by when."""

from __future__ import annotations

import asyncio

import pytest

from extender.scheduling.inflight.expected_binds import ExpectedBinds
from tests.virtual_time import VirtualTime


def test_no_other_bind_expected_returns_at_once() -> None:
    clock = VirtualTime()
    expected = ExpectedBinds(clock)
    expected.expect("a")
    started = clock()
    clock.run(expected.settle("a"))  # its own bind is not waited for
    assert clock() == started
    assert expected.waits == 0


def test_a_filter_waits_until_the_expected_bind_arrives() -> None:
    clock = VirtualTime()
    expected = ExpectedBinds(clock, wait_seconds=5.0)
    order: list[tuple[str, float]] = []
    started = clock()

    async def filter_b() -> None:
        await expected.settle("b")
        order.append(("filter b", clock() - started))

    async def bind_a() -> None:
        await asyncio.sleep(0.05)
        order.append(("bind a took its devices", clock() - started))
        expected.arrived("a")

    async def main() -> None:
        expected.expect("a")
        await asyncio.gather(filter_b(), bind_a())

    clock.run(main())
    assert [what for what, _ in order] == ["bind a took its devices", "filter b"]
    assert [when for _, when in order] == pytest.approx([0.05, 0.05])  # woken by the bind, at once
    assert expected.waits == 1 and expected.timeouts == 0
    assert len(expected) == 0


def test_a_bind_that_never_comes_is_waited_for_once_at_most() -> None:
    clock = VirtualTime()
    expected = ExpectedBinds(clock, wait_seconds=0.05)

    async def main() -> None:
        expected.expect("lost")
        clock.now += 0.05  # its expectation has expired by the time the filters come
        await expected.settle("b")
        await expected.settle("c")

    started = clock()
    clock.run(main())
    assert clock() - started == pytest.approx(0.05)  # neither filter waited
    assert expected.waits == 0 and expected.timeouts == 0  # expired: dropped, not waited for
    assert len(expected) == 0


def test_a_wait_runs_out_at_its_deadline() -> None:
    clock = VirtualTime()
    expected = ExpectedBinds(clock, wait_seconds=0.1)
    expected.expect("lost")
    started = clock()
    clock.run(expected.settle("b"))
    assert clock() - started == pytest.approx(0.1)
    assert expected.timeouts == 1 and expected.waits == 1


def test_several_waiters_all_wake() -> None:
    clock = VirtualTime()
    expected = ExpectedBinds(clock, wait_seconds=5.0)
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
        await asyncio.gather(*tasks)

    started = clock()
    clock.run(main())
    assert sorted(done) == ["b", "c", "d"]
    assert clock() - started == pytest.approx(0.02)  # woken by the arrival, not by their deadline


def test_renewed_expectations_do_not_hold_a_filter_past_its_own_cap() -> None:
    clock = VirtualTime()
    expected = ExpectedBinds(clock, wait_seconds=0.1)
    renewals: list[float] = []

    async def renew() -> None:
        for _ in range(50):  # a pod prioritized again and again, its bind never sent
            expected.expect("chatty")
            renewals.append(clock())
            await asyncio.sleep(0.01)

    async def main() -> tuple[float, int]:
        expected.expect("chatty")
        task = asyncio.create_task(renew())
        started = clock()
        await expected.settle("b")
        waited, renewed = clock() - started, len(renewals)
        task.cancel()
        return waited, renewed

    waited, renewed = clock.run(main())
    assert waited == pytest.approx(0.1)
    assert renewed < 50  # the renewals went on: the filter stopped at its own cap
    assert expected.timeouts == 1
