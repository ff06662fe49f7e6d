"""Back-pressure from binds to filter (extender/service/bind_pressure.py), on a clock the test
moves: when filters are held, for how long, and what lets them go."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from extender.service.bind_pressure import MIN_IN_FLIGHT, RATE_WINDOW, UNKNOWN_RATE_IN_FLIGHT, BindPressure
from tests.virtual_time import VirtualTime

TIMEOUT = 10.0  # kube-scheduler's httpTimeout as shipped: binds are held above 3 s expected


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


def pressure() -> tuple[BindPressure, Clock]:
    clock = Clock()
    return BindPressure(TIMEOUT, clock=clock), clock


def completed(p: BindPressure, clock: Clock, count: int, over: float) -> None:
    """``count`` binds that each took ``over`` seconds, ending evenly over the last ``over``."""
    tokens = [p.started() for _ in range(count)]
    for token in tokens:
        clock.now += over / count
        p.ended(token)


#: name -> (binds completed in the last 2 s, binds in flight, age of the oldest in flight (s),
#: held?)
CASES: dict[str, tuple[int, int, float, bool]] = {
    "idle": (0, 0, 0.0, False),
    "a few slow binds are not a queue": (0, MIN_IN_FLIGHT - 1, 9.0, False),
    "a burst just begun": (0, UNKNOWN_RATE_IN_FLIGHT - 1, 0.1, False),
    "a burst with no completion yet, as many as the unknown rate allows": (
        0,
        UNKNOWN_RATE_IN_FLIGHT,
        0.1,
        True,
    ),
    "nothing completes and the oldest is past the limit": (0, MIN_IN_FLIGHT, 3.5, True),
    "fast completions: 200 in flight at 200/s is 1 s": (400, 200, 0.0, False),
    "slow completions: 100 in flight at 20/s is 5 s": (40, 100, 0.0, True),
    "just under: 50 in flight at 20/s is 2.5 s": (40, 50, 0.0, False),
    "fast completions, but the oldest is past the limit": (400, 200, 3.5, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_filters_are_held_when_a_new_bind_would_take_too_long(case: str) -> None:
    done, in_flight, oldest, held = CASES[case]
    p, clock = pressure()
    if done:
        completed(p, clock, done, RATE_WINDOW)
    first = clock.now
    for _ in range(in_flight):
        p.started()
    clock.now = first + oldest
    assert p.pressed() is held, p.expected()


def test_completions_older_than_the_window_are_forgotten() -> None:
    p, clock = pressure()
    completed(p, clock, 10, RATE_WINDOW)  # 5/s
    for _ in range(UNKNOWN_RATE_IN_FLIGHT - 2):
        p.started()
    assert p.pressed()  # 30 in flight at 5/s: 6 s
    clock.now += RATE_WINDOW + 0.1  # no completion for a while: the oldest's age decides
    assert p.expected() == pytest.approx(RATE_WINDOW + 0.1)
    assert not p.pressed()


def test_an_unknown_token_ends_nothing() -> None:
    p, _ = pressure()
    token = p.started()
    p.ended(token)
    p.ended(token)
    p.ended(12345)
    assert p.in_flight == 0


def held_past_the_limit(timeout: float, clock: VirtualTime) -> tuple[BindPressure, list[int]]:
    """:data:`MIN_IN_FLIGHT` binds in flight for 5 s: past the limit of ``timeout``."""
    p = BindPressure(timeout, clock=clock)
    tokens = [p.started() for _ in range(MIN_IN_FLIGHT)]
    clock.now += 5.0
    assert p.pressed()
    return p, tokens


def test_a_held_filter_goes_on_when_a_bind_ends() -> None:
    clock = VirtualTime()
    p, tokens = held_past_the_limit(TIMEOUT, clock)

    async def scenario() -> float:
        async def finish() -> None:
            await asyncio.sleep(0.12)  # between two rechecks (every 0.05 s): the end wakes it
            p.ended(tokens[0])  # below MIN_IN_FLIGHT: room again

        ending = asyncio.create_task(finish())
        held = await p.room()
        await ending
        return held

    assert clock.run(scenario()) == pytest.approx(0.12)  # not a recheck later, not the hold limit
    assert not p.pressed()


def test_a_filter_is_held_at_most_the_hold_limit() -> None:
    clock = VirtualTime()
    p, _ = held_past_the_limit(1.0, clock)  # a 1 s httpTimeout: limit 0.3 s, hold at most 0.2 s
    assert clock.run(p.room()) == pytest.approx(p.hold_limit) == pytest.approx(0.2)
    assert p.pressed()  # let go although nothing changed


def test_nothing_is_held_without_pressure() -> None:
    p, _ = pressure()
    assert asyncio.run(p.room()) == 0.0


#: name -> (binds in flight, of which parked: waiting now (None) or for how many seconds before,
#: held?). The first bind started 9 s ago, the others 1 s ago; none completed.
PARKED: dict[str, tuple[int, list[float | None], bool]] = {
    "binds parked now leave too few to count": (MIN_IN_FLIGHT + 2, [None] * 3, False),
    "a bind parked now is not the oldest that counts": (MIN_IN_FLIGHT + 4, [None], False),
    "the same binds, none parked: the oldest is past the limit": (MIN_IN_FLIGHT + 4, [], True),
    "parked 8 of its 9 s: its age counts 1 s": (MIN_IN_FLIGHT + 4, [8.0], False),
    "parked 2 of its 9 s: 7 s still count": (MIN_IN_FLIGHT + 4, [2.0], True),
    "the rest is still a queue": (UNKNOWN_RATE_IN_FLIGHT + 5, [None] * 5, True),
}


@pytest.mark.parametrize("case", list(PARKED))
def test_waits_on_the_cluster_are_not_api_slowness(case: str) -> None:
    in_flight, parked, held = PARKED[case]
    clock = Clock()
    waits = {f"uid-{i}": seconds for i, seconds in enumerate(parked)}
    p = BindPressure(TIMEOUT, clock=clock, parked=lambda: waits)
    first = clock.now
    for i in range(in_flight):
        clock.now = first if i == 0 or i < len(parked) else first + 8.0
        p.started(f"uid-{i}")
    clock.now = first + 9.0
    assert p.pressed() is held, p.expected()
