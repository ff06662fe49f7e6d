"""The tracker's record of binds waiting on the cluster rather than on the API server
(inflight/tracker.py ``parked``): back-pressure leaves those waits out of a bind's time."""

from __future__ import annotations

import asyncio

import pytest

from extender.scheduling.inflight.tracker import BindInFlight, Tracker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def tracker_binding(uid: str) -> tuple[Tracker, Clock]:
    clock = Clock()
    tracker = Tracker(clock, preemption_memory_seconds=60)
    loop = asyncio.new_event_loop()
    try:
        tracker.binds[uid] = BindInFlight(uid, ("default", "p"), "node-1", clock(), loop.create_future())
    finally:
        loop.close()
    return tracker, clock


def test_a_bind_is_parked_while_it_waits_and_its_wait_is_remembered() -> None:
    tracker, clock = tracker_binding("uid-p")
    assert tracker.parked_binds() == {}
    with tracker.parked("uid-p"):
        clock.now += 3.0
        assert tracker.parked_binds() == {"uid-p": None}
    assert tracker.parked_binds() == {"uid-p": 3.0}
    with tracker.parked("uid-p"):  # a second wait adds up
        clock.now += 1.5
    assert tracker.parked_binds() == {"uid-p": 4.5}


def test_a_wait_that_fails_is_counted_too() -> None:
    tracker, clock = tracker_binding("uid-p")
    with pytest.raises(RuntimeError), tracker.parked("uid-p"):
        clock.now += 2.0
        raise RuntimeError
    assert tracker.parked_binds() == {"uid-p": 2.0}


def test_a_pod_with_no_bind_in_flight_parks_nothing() -> None:
    tracker, _ = tracker_binding("uid-p")
    with tracker.parked("uid-other"):
        assert tracker.parked_binds() == {}


def test_an_ended_bind_leaves_no_parked_record_and_a_new_one_starts_unparked() -> None:
    tracker, clock = tracker_binding("uid-p")
    with tracker.parked("uid-p"):
        clock.now += 1.0
    assert tracker.entries()["binds_ever_parked"] == 1
    tracker.bind_ended("uid-p", failed=False)
    assert tracker.parked_binds() == {} and tracker.entries()["binds_ever_parked"] == 0
    again, _ = tracker_binding("uid-p")
    assert again.parked_binds() == {}
