"""Claims allocated for unbound pods: which count, and how their age is measured."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster.state import ClusterState, Key
from extender.scheduling.decide import held_claims as module
from extender.scheduling.decide.held_claims import HeldClaims, held_claim_steps
from extender.scheduling.decide.stepwise import to_the_end
from tests.builders import allocated, claim, pod, reserve

SCHEDULERS = frozenset({"dra-extender-scheduler"})


def allocation() -> dict[str, Any]:
    return allocated(("driver-a", "pool-1", "d0"))


def held(
    *objects: dict[str, Any], now: float = 1000.0, first_seen: dict[Key, float] | None = None
) -> HeldClaims:
    state = ClusterState.from_objects(objects)
    return to_the_end(held_claim_steps(state, SCHEDULERS, now, {} if first_seen is None else first_seen))


def stamped(obj: dict[str, Any], when: str) -> dict[str, Any]:
    obj["status"]["allocation"]["allocationTimestamp"] = when
    return obj


def for_group(obj: dict[str, Any]) -> dict[str, Any]:
    obj["status"]["reservedFor"] = [
        {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g", "uid": "uid-g"},
        {"resource": "pods", "name": "b", "uid": "uid-b"},
    ]
    return obj


CASES: dict[str, tuple[list[dict[str, Any]], int]] = {
    "reserved for an unbound pod": ([reserve(claim("c", allocation=allocation()), "p"), pod("p")], 1),
    "the pod is bound": ([reserve(claim("c", allocation=allocation()), "p"), pod("p", node_name="n")], 0),
    "reserved for nobody": ([claim("c", allocation=allocation()), pod("p")], 0),
    "not allocated": ([claim("c"), pod("p")], 0),
    "the pod is gone": ([reserve(claim("c", allocation=allocation()), "p")], 0),
    "another pod of that name": (
        [reserve(claim("c", allocation=allocation()), "p"), pod("p", uid="other")],
        0,
    ),
    "another scheduler's pod": (
        [reserve(claim("c", allocation=allocation()), "p"), pod("p", scheduler="x")],
        0,
    ),
    "shared, one user running: in use": (
        [reserve(claim("c", allocation=allocation()), "a", "b"), pod("a", node_name="n"), pod("b")],
        0,
    ),
    "shared, no user bound yet": (
        [reserve(claim("c", allocation=allocation()), "a", "b"), pod("a"), pod("b")],
        1,
    ),
    "a PodGroup's claim: its pods come and go": (
        [for_group(claim("c", allocation=allocation())), pod("b")],
        0,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_which_claims_count(case: str) -> None:
    objects, count = CASES[case]
    assert held(*objects).count == count


def test_age_from_the_allocation_timestamp_else_from_first_seen() -> None:
    first_seen: dict[Key, float] = {}
    objects = [reserve(claim("c", allocation=allocation()), "p"), pod("p")]
    assert held(*objects, now=1000.0, first_seen=first_seen) == HeldClaims(1, 0.0)
    assert held(*objects, now=1090.0, first_seen=first_seen) == HeldClaims(1, 90.0)
    # 1970-01-01T00:10:00Z is 600 s after the epoch: 400 s before "now".
    objects = [stamped(reserve(claim("c", allocation=allocation()), "p"), "1970-01-01T00:10:00Z"), pod("p")]
    assert held(*objects, now=1000.0) == HeldClaims(1, 400.0)


def test_a_claim_no_longer_held_is_forgotten() -> None:
    first_seen: dict[Key, float] = {}
    unbound = [reserve(claim("c", allocation=allocation()), "p"), pod("p")]
    held(*unbound, now=1000.0, first_seen=first_seen)
    assert held(
        reserve(claim("c", allocation=allocation()), "p"),
        pod("p", node_name="n"),
        now=1010.0,
        first_seen=first_seen,
    ) == HeldClaims(0, 0.0)
    assert first_seen == {}
    # Held again later: its age starts over.
    assert held(*unbound, now=2000.0, first_seen=first_seen) == HeldClaims(1, 0.0)


def test_the_computation_yields_between_steps_and_counts_every_claim() -> None:
    """On the engine's loop it runs in slices of STEP claims (the verbs run in between)."""

    objects = []
    for i in range(module.STEP * 2 + 1):
        objects += [reserve(claim(f"c{i}", allocation=allocation()), f"p{i}"), pod(f"p{i}")]
    steps = held_claim_steps(ClusterState.from_objects(objects), SCHEDULERS, 1000.0, {})
    assert sum(1 for _ in steps) == 2
