"""Back-pressure from binds to filter (extender/service/bind_pressure.py), on a clock the test
moves: when filters are held, for how long, and what lets them go."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final, Literal

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

    holding: list[int] = []

    async def scenario() -> float:
        async def finish() -> None:
            await asyncio.sleep(0.12)  # between two rechecks (every 0.05 s): the end wakes it
            holding.append(p.holding)
            p.ended(tokens[0])  # below MIN_IN_FLIGHT: room again

        ending = asyncio.create_task(finish())
        held = await p.room()
        await ending
        return held

    assert clock.run(scenario()) == pytest.approx(0.12)  # not a recheck later, not the hold limit
    assert not p.pressed()
    assert holding == [1] and p.holding == 0  # dra_extender_filters_held


def test_a_filter_is_held_at_most_the_hold_limit() -> None:
    clock = VirtualTime()
    p, _ = held_past_the_limit(1.0, clock)  # a 1 s httpTimeout: limit 0.3 s, hold at most 0.2 s
    assert clock.run(p.room()) == pytest.approx(p.hold_limit) == pytest.approx(0.2)
    assert p.pressed()  # let go although nothing changed


def test_nothing_is_held_without_pressure() -> None:
    p, _ = pressure()
    assert asyncio.run(p.room()) == 0.0


NOW: Final = "now"


@dataclass(frozen=True)
class Binds:
    """``count`` binds in flight, started ``age`` seconds ago. ``parked``: never (None), waiting
    on the cluster now (:data:`NOW`), or the seconds they waited so before."""

    count: int
    age: float
    parked: float | Literal["now"] | None = None


def pressure_on(binds: list[Binds], completions: int = 0) -> BindPressure:
    """The binds in flight, started oldest first, after ``completions`` binds ended over the
    last :data:`RATE_WINDOW` seconds; parked ones as the tracker reports them."""
    clock = Clock()
    waits: dict[str, float | None] = {}
    p = BindPressure(TIMEOUT, clock=clock, parked=lambda: waits)
    if completions:
        completed(p, clock, completions, RATE_WINDOW)
    now = clock.now
    for i, group in enumerate(sorted(binds, key=lambda b: -b.age)):
        clock.now = now - group.age
        for j in range(group.count):
            uid = f"uid-{i}-{j}"
            p.started(uid)
            if group.parked is not None:
                waits[uid] = None if isinstance(group.parked, str) else group.parked  # NOW: None
    clock.now = now
    return p


#: name -> (binds in flight, binds completed in the last 2 s, held?). The limit is 3 s
#: (:data:`TIMEOUT`). Each rule of how parked binds count has a row that fails when that rule
#: alone is broken in BindPressure.
PARKED: dict[str, tuple[list[Binds], int, bool]] = {
    "none parked: the oldest is past the limit": ([Binds(1, 9.0), Binds(MIN_IN_FLIGHT + 3, 1.0)], 0, True),
    # Binds parked now are left out of the count: of MIN_IN_FLIGHT, of the unknown rate, of
    # Little's law.
    "parked now: too few left to count, the oldest unparked past the limit": (
        [Binds(1, 9.0), Binds(MIN_IN_FLIGHT - 2, 1.0), Binds(3, 1.0, NOW)],
        0,
        False,
    ),
    "parked now: exactly MIN_IN_FLIGHT left, the oldest past the limit": (
        [Binds(1, 9.0), Binds(MIN_IN_FLIGHT - 1, 1.0), Binds(3, 1.0, NOW)],
        0,
        True,
    ),
    "parked now: one short of the unknown rate's count": (
        [Binds(UNKNOWN_RATE_IN_FLIGHT - 1, 0.5), Binds(1, 0.5, NOW)],
        0,
        False,
    ),
    "parked now: the unparked rest is still a queue": (
        [Binds(UNKNOWN_RATE_IN_FLIGHT, 0.5), Binds(5, 0.5, NOW)],
        0,
        True,
    ),
    "parked now: 50 unparked at 20/s is 2.5 s, not 70": ([Binds(50, 0.0), Binds(20, 0.0, NOW)], 40, False),
    # A bind parked now is not the oldest.
    "a bind parked now is not the oldest that counts": (
        [Binds(1, 9.0, NOW), Binds(MIN_IN_FLIGHT + 3, 1.0)],
        0,
        False,
    ),
    # A bind parked for part of its life counts the rest of it.
    "parked 8 of its 9 s: its age counts 1 s": (
        [Binds(1, 9.0, 8.0), Binds(MIN_IN_FLIGHT + 3, 1.0)],
        0,
        False,
    ),
    "parked 2 of its 9 s: 7 s still count": ([Binds(1, 9.0, 2.0), Binds(MIN_IN_FLIGHT + 3, 1.0)], 0, True),
    "parked 6 of its 9 s: 3 s count, exactly the limit": (
        [Binds(1, 9.0, 6.0), Binds(MIN_IN_FLIGHT + 3, 1.0)],
        0,
        False,
    ),
    "parked 5.5 of its 9 s: 3.5 s count, past the limit": (
        [Binds(1, 9.0, 5.5), Binds(MIN_IN_FLIGHT + 3, 1.0)],
        0,
        True,
    ),
    # Several parked binds: each counts its own unparked time, the longest decides.
    "parked 8 of 9 s and 2 of 6 s: 4 s count": (
        [Binds(1, 9.0, 8.0), Binds(1, 6.0, 2.0), Binds(MIN_IN_FLIGHT + 2, 1.0)],
        0,
        True,
    ),
    "parked 8 of 9 s, 4 of 6 s and one now: 2 s count": (
        [Binds(1, 9.0, 8.0), Binds(1, 6.0, 4.0), Binds(1, 5.0, NOW), Binds(MIN_IN_FLIGHT, 1.0)],
        0,
        False,
    ),
}


@pytest.mark.parametrize("case", list(PARKED))
def test_waits_on_the_cluster_are_not_api_slowness(case: str) -> None:
    binds, completions, held = PARKED[case]
    p = pressure_on(binds, completions)
    assert p.pressed() is held, p.expected()
