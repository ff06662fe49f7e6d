"""The watch's echo of this process's own claim write is stored as the write's answer was
parsed (:meth:`ClusterState.answered`), not read a second time; anything else is read."""

from __future__ import annotations

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
