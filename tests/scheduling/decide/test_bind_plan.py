"""The plan a bind carries out (decide/bind_plan.py): which claims are written, how, and in what
order, decided before the first write. What the writes then do to a store is tested in
tests/scheduling/write/ and tests/service/test_bind.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.scheduling.decide import bind_plan, what_if
from extender.scheduling.decide.bind_plan import BindPlan
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt import nominated
from tests.builders import allocated, claim, device, device_class, exact, node, pod, reserve, resource_slice

CEL = CelEnvironment()
BASE = [
    device_class(),
    node("node-1"),
    resource_slice("s", [device(f"gpu-{i}") for i in range(4)], pool="node-1", node="node-1"),
]


def on(*gpus: int) -> dict[str, Any]:
    return allocated(*(("driver-a", "node-1", f"gpu-{i}") for i in gpus))


def plan_for(objects: list[dict[str, Any]], target: str = "p", node_name: str = "node-1") -> BindPlan:
    state = ClusterState.from_objects([*BASE, *objects])
    assert not state.problems, state.problems
    snapshot = Snapshot(state, Features(), CEL)
    p = state.pods[("default", target)]
    claims = snapshot.claims_of(p)
    adjustment = nominated.adjustments(
        snapshot, p, claims, [node_name], nominated.Nominations(), nominated.no_victims
    ).get(node_name, what_if.UNCHANGED)
    return bind_plan.plan(
        snapshot,
        p,
        claims,
        node_name,
        state.nodes.get(node_name),
        adjustment,
        timeout=None,
        now=0.0,
        binding_timeout=600.0,
    )


@dataclass(frozen=True)
class Case:
    objects: list[dict[str, Any]]
    fits: bool
    #: Per claim written, in order: (name, allocated by this bind).
    writes: list[tuple[str, bool]]


def twice(name: str) -> dict[str, Any]:
    """Pod ``p`` listing claim ``name`` under two entries."""
    p = pod("p")
    p["spec"]["resourceClaims"] = [
        {"name": "one", "resourceClaimName": name},
        {"name": "two", "resourceClaimName": name},
    ]
    return p


CASES = {
    "a claim to allocate is allocated and reserved": Case(
        [claim("a", [exact(count=2)]), pod("p", ["a"])], True, [("a", True)]
    ),
    "an allocated claim is only reserved": Case(
        [claim("b", allocation=on(0)), pod("p", ["b"])], True, [("b", False)]
    ),
    "a claim reserved for the pod already is not written again": Case(
        [reserve(claim("b", allocation=on(0)), "p"), pod("p", ["b"])], True, []
    ),
    "claims are written in the pod's order": Case(
        [claim("b", allocation=on(0)), claim("a"), pod("p", ["b", "a"])], True, [("b", False), ("a", True)]
    ),
    "a claim the pod lists twice is written once": Case([claim("a"), twice("a")], True, [("a", True)]),
    "a pod that does not fit writes nothing": Case(
        [reserve(claim("b", allocation=on(0, 1, 2)), "other"), claim("a", [exact(count=2)]), pod("p", ["a"])],
        False,
        [],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_plan_writes_each_claim_once_in_the_pods_order(case: Case) -> None:
    plan = plan_for(case.objects)
    assert plan.fits is case.fits, plan.decision.reason
    assert [(w.claim.name, w.allocation is not None) for w in plan.writes] == case.writes
    assert plan.releasing == () and plan.extended is None and not plan.awaits_binding


def test_a_bound_pod_whose_node_is_gone_gets_its_reservations_repaired_only() -> None:
    plan = plan_for([claim("b", allocation=on(0)), pod("p", ["b"], node_name="node-9")], node_name="node-9")
    assert plan.fits and [w.claim.name for w in plan.writes] == ["b"]
    assert plan.writes[0].allocation is None


def preemption(nominated_to: str | None) -> list[dict[str, Any]]:
    """node-1: ``other`` (bound) holds gpu-0 and gpu-1; ``victim`` (priority 1, terminating)
    gpu-2 and gpu-3. ``p`` (priority 100) wants two GPUs."""
    victim = pod("victim", ["victim-claim"], node_name="node-1", priority=1)
    victim["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    p = pod("p", ["a"], priority=100)
    if nominated_to:
        p["status"] = {"nominatedNodeName": nominated_to}
    return [
        reserve(claim("other-claim", allocation=on(0, 1)), "other"),
        pod("other", ["other-claim"], node_name="node-1", priority=1000),
        reserve(claim("victim-claim", allocation=on(2, 3)), "victim"),
        victim,
        claim("a", [exact(count=2)]),
        p,
    ]


def test_a_preemptor_on_its_nominated_node_uses_its_victims_claims_once_they_are_released() -> None:
    plan = plan_for(preemption("node-1"))
    assert plan.fits, plan.decision.reason
    assert [c.name for c in plan.releasing] == ["victim-claim"]
    devices = [r["device"] for r in plan.writes[0].allocation["devices"]["results"]]  # type: ignore[index]
    assert sorted(devices) == ["gpu-2", "gpu-3"]


def test_a_pod_not_nominated_there_does_not_use_what_is_being_released() -> None:
    plan = plan_for(preemption(None))
    assert not plan.fits and plan.releasing == () and plan.writes == ()


def test_the_release_is_a_fallback_a_pod_that_fits_without_it_does_not_wait_for_it() -> None:
    objects = preemption("node-1")
    objects[0] = reserve(claim("other-claim", allocation=on(0)), "other")  # gpu-1 free now
    objects[4] = claim("a", [exact(count=1)])
    plan = plan_for(objects)
    assert plan.fits and plan.releasing == ()


def test_deciding_the_release_leaves_the_snapshot_as_it_was() -> None:
    state = ClusterState.from_objects([*BASE, *preemption("node-1")])
    snapshot = Snapshot(state, Features(), CEL)
    before = dict(snapshot.allocated.dedicated)
    p = state.pods[("default", "p")]
    claims = snapshot.claims_of(p)
    adjustment = nominated.adjustments(snapshot, p, claims, ["node-1"], None, nominated.no_victims)["node-1"]
    decision, releasing = what_if.decide_with_release(snapshot, claims, state.nodes["node-1"], adjustment)
    assert decision.fits and releasing
    assert snapshot.allocated.dedicated == before
