"""The watch's echo of this process's own claim write is stored as the write's answer was
parsed (:meth:`ClusterState.answered`), not read a second time; anything else is read."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from extender.cluster import state as state_module
from extender.cluster.state import ClusterState
from extender.model.dra import ResourceClaim, parse_resource_claim
from tests.builders import allocated, claim

KEY = ("default", "c")


def at(rv: str, *, uid: str = "uid-c", allocation: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = claim("c", uid=uid, allocation=allocation)
    raw["metadata"]["resourceVersion"] = rv
    return raw


def answered_at(state: ClusterState, rv: str) -> ResourceClaim:
    answer = parse_resource_claim(at(rv, allocation=allocated(("driver-a", "pool-1", "d0"))))
    state.answered(answer)
    return answer


# (name, the event's claim) -> the answer is what the cache stores
EVENTS = [
    (
        "the echo: same resourceVersion and UID",
        at("12", allocation=allocated(("driver-a", "pool-1", "d0"))),
        True,
    ),
    ("a later change", at("13"), False),
    ("an earlier event arriving late", at("11"), False),
    ("the claim deleted and made again under its name", at("12", uid="uid-other"), False),
]


@pytest.mark.parametrize(("event", "reused"), [e[1:] for e in EVENTS], ids=[e[0] for e in EVENTS])
def test_only_the_echo_of_the_answer_is_stored_unread(event: dict[str, Any], reused: bool) -> None:
    state = ClusterState.from_objects([at("10")])
    answer = answered_at(state, "12")
    state.apply(event)
    stored = state.claims[KEY]
    assert (stored is answer) is reused
    assert stored.resource_version == event["metadata"]["resourceVersion"]
    assert stored.uid == event["metadata"]["uid"]
    assert KEY not in state.answers  # any event of the claim ends the wait for its echo
    assert KEY in state.changed_claims and state.claims_seen_rv == event["metadata"]["resourceVersion"]


def test_an_echo_after_a_later_event_is_read() -> None:
    state = ClusterState.from_objects([at("10")])
    answered_at(state, "12")
    state.apply(at("11"))
    state.apply(at("12", allocation=allocated(("driver-a", "pool-1", "d1"))))
    allocation = state.claims[KEY].allocation
    assert allocation is not None and [str(d.id) for d in allocation.devices] == ["driver-a/pool-1/d1"]


def test_a_deleted_claim_forgets_its_answer() -> None:
    state = ClusterState.from_objects([at("10")])
    answered_at(state, "12")
    state.remove(at("12"))
    assert state.answers == {}


def test_answers_waiting_for_their_echo_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "ANSWERS_KEPT", 3)
    state = ClusterState()
    for i in range(5):
        raw = claim(f"c{i}")
        raw["metadata"]["resourceVersion"] = str(10 + i)
        state.answered(parse_resource_claim(raw))
    assert list(state.answers) == [("default", "c2"), ("default", "c3"), ("default", "c4")]


def echo_of(answer: ResourceClaim) -> dict[str, Any]:
    return copy.deepcopy(answer.raw)


# (name, what follows the late earlier event) -> the answer is what the cache stores
AFTER_A_LATE_EVENT = [
    ("the echo, exactly the answered object", lambda a: echo_of(a), True),
    (
        "the echo's resourceVersion with other content",
        lambda a: at("12", allocation=allocated(("driver-a", "pool-1", "d1"))),
        False,
    ),
    ("a later change", lambda a: at("13"), False),
    (
        "the answered object under another UID",
        lambda a: {**echo_of(a), "metadata": {**a.raw["metadata"], "uid": "uid-other"}},
        False,
    ),
]


@pytest.mark.parametrize(
    ("then", "reused"), [e[1:] for e in AFTER_A_LATE_EVENT], ids=[e[0] for e in AFTER_A_LATE_EVENT]
)
def test_an_answer_overtaken_by_an_earlier_event_is_stored_only_for_its_very_object(
    then: Callable[[ResourceClaim], dict[str, Any]], reused: bool
) -> None:
    state = ClusterState.from_objects([at("10")])
    answer = answered_at(state, "12")
    state.apply(at("11"))  # the finalizer update's event, after the status write was answered
    event = then(answer)
    state.apply(event)
    stored = state.claims[KEY]
    assert (stored is answer) is reused
    assert stored == parse_resource_claim(copy.deepcopy(event))
    assert state.overtaken == {} and state.answers == {}
    assert state.claims_seen_rv == event["metadata"]["resourceVersion"]


def test_an_overtaken_answer_is_forgotten_with_its_claim() -> None:
    state = ClusterState.from_objects([at("10")])
    answer = answered_at(state, "12")
    state.apply(at("11"))
    state.remove(at("11"))
    assert state.overtaken == {}
    state.apply(echo_of(answer))  # made again, as it happens, as the very object: read
    assert state.claims[KEY] is not answer and state.claims[KEY] == answer


def test_a_relist_after_a_late_event_holds_what_it_lists() -> None:
    state = ClusterState.from_objects([at("10")])
    answer = answered_at(state, "12")
    state.apply(at("11"))
    state.replace_kind("ResourceClaim", [at("14")], "14")
    assert state.claims[KEY].resource_version == "14" and state.claims[KEY] is not answer
    assert state.overtaken == {}
