"""Victim choice on one node (DefaultPreemption's SelectVictimsOnNode with devices): a minimal
set, lower priorities first, claims shared with more important pods never freed, PodDisruption-
Budgets respected as far as possible."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.scheduling.decision import Snapshot
from extender.scheduling.preemption import Candidate, preempt, select_victims
from tests.builders import allocated, claim, device, device_class, exact, node, pod, resource_slice

CEL = CelEnvironment()


@dataclass(frozen=True)
class Holder:
    """A running pod on node-1 and the GPUs its claim holds (``shared_with``: more pods reserving
    that claim, with their priorities)."""

    name: str
    priority: int
    gpus: tuple[int, ...]
    shared_with: dict[str, int] = field(default_factory=dict)
    started: str = "2026-11-01T00:00:00Z"


def running(name: str, priority: int, claims: list[str], started: str) -> dict[str, Any]:
    p = pod(name, claims, node_name="node-1")
    p["spec"]["priority"] = priority
    p["status"] = {"startTime": started}
    return p


def cluster(holders: list[Holder], wanted: int, preemptor_priority: int = 100) -> tuple[Snapshot, Any]:
    objects: list[dict[str, Any]] = [
        device_class(),
        node("node-1"),
        resource_slice("s", [device(f"gpu-{i}") for i in range(4)], pool="node-1", node="node-1"),
    ]
    for h in holders:
        reserved = [{"resource": "pods", "name": h.name, "uid": f"uid-{h.name}"}]
        reserved += [{"resource": "pods", "name": n, "uid": f"uid-{n}"} for n in h.shared_with]
        c = claim(
            f"{h.name}-claim", allocation=allocated(*(("driver-a", "node-1", f"gpu-{i}") for i in h.gpus))
        )
        c["status"]["reservedFor"] = reserved
        objects.append(c)
        objects.append(running(h.name, h.priority, [f"{h.name}-claim"], h.started))
        for sharer, priority in h.shared_with.items():
            objects.append(running(sharer, priority, [f"{h.name}-claim"], h.started))
    objects.append(claim("wanted", requests=[exact(count=wanted)]))
    preemptor = pod("preemptor", ["wanted"])
    preemptor["spec"]["priority"] = preemptor_priority
    objects.append(preemptor)
    state = ClusterState.from_objects(objects)
    assert not state.problems, state.problems
    return Snapshot(state, Features(), CEL), state


@dataclass(frozen=True)
class Case:
    holders: list[Holder]
    wanted: int
    victims: list[str] | None  # None: the node is no candidate
    pdb: frozenset[str] = frozenset()
    violations: int = 0


CASES = {
    "one GPU short: the least important of equal pods goes": Case(
        [
            Holder("a", 1, (0, 1), started="2026-11-01T00:00:00Z"),
            Holder("b", 1, (2, 3), started="2026-11-02T00:00:00Z"),
        ],
        wanted=2,
        victims=["b"],
    ),
    "lower priority goes first": Case(
        [Holder("a", 1, (0, 1)), Holder("b", 5, (2, 3))], wanted=2, victims=["a"]
    ),
    "a minimal set: the pod whose GPUs are not needed stays": Case(
        [Holder("a", 1, (0,)), Holder("b", 1, (1, 2, 3))], wanted=3, victims=["b"]
    ),
    "both must go": Case([Holder("a", 1, (0, 1)), Holder("b", 5, (2, 3))], wanted=4, victims=["b", "a"]),
    "free devices first: nobody goes": Case([Holder("a", 1, (0,))], wanted=3, victims=[]),
    "an equally important pod is never a victim": Case(
        [Holder("a", 100, (0, 1, 2, 3))], wanted=1, victims=None
    ),
    "a claim shared with a more important pod is never freed": Case(
        [Holder("a", 1, (0, 1, 2, 3), shared_with={"vip": 200})], wanted=1, victims=None
    ),
    "a claim shared by two lower pods: both go": Case(
        [Holder("a", 1, (0, 1, 2, 3), shared_with={"a2": 2})], wanted=1, victims=["a2", "a"]
    ),
    "a PodDisruptionBudget spares a pod when another will do": Case(
        [Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))], wanted=2, victims=["b"], pdb=frozenset({"a"})
    ),
    "a PodDisruptionBudget is violated only when nothing else will do": Case(
        [Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))],
        wanted=4,
        victims=["a", "b"],
        pdb=frozenset({"a"}),
        violations=1,
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_victims_on_one_node(case: Case) -> None:
    snapshot, state = cluster(case.holders, case.wanted)
    violates: Callable[[Any], bool] = lambda p: p.name in case.pdb  # noqa: E731
    found = select_victims(
        snapshot, state.pods[("default", "preemptor")], state.nodes["node-1"], violates_pdb=violates
    )
    if case.victims is None:
        assert found is None
        return
    assert found is not None
    assert [p.name for p in found.pods] == case.victims
    assert found.pdb_violations == case.violations


def test_the_preemptor_fits_after_the_victims_claims_are_freed_and_not_before() -> None:
    snapshot, state = cluster([Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))], wanted=2)
    preemptor, node_1 = state.pods[("default", "preemptor")], state.nodes["node-1"]
    assert not snapshot.decide(snapshot.claims_of(preemptor), node_1).fits
    found = select_victims(snapshot, preemptor, node_1)
    assert found is not None and len(found.pods) == 1
    assert not snapshot.decide(snapshot.claims_of(preemptor), node_1).fits  # the snapshot is untouched


def preempt_on(
    holders: list[Holder], wanted: int, candidates: dict[str, Candidate], **kw: Any
) -> dict[str, Candidate]:
    snapshot, state = cluster(holders, wanted)
    return preempt(snapshot, state.pods[("default", "preemptor")], candidates, **kw)


def test_the_schedulers_victims_are_kept_and_the_devices_victims_follow() -> None:
    # kube-scheduler chose b (for CPU, say); the preemptor's claim still needs a's GPUs.
    answer = preempt_on(
        [Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))], 4, {"node-1": Candidate(("uid-b",), 1)}
    )
    assert answer == {"node-1": Candidate(("uid-b", "uid-a"), 1)}


def test_the_schedulers_victims_can_be_enough() -> None:
    answer = preempt_on(
        [Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))], 2, {"node-1": Candidate(("uid-b",))}
    )
    assert answer == {"node-1": Candidate(("uid-b",))}


def test_a_1_38_placeholder_gets_the_victims_the_devices_need() -> None:
    answer = preempt_on([Holder("a", 1, (0, 1)), Holder("b", 5, (2, 3))], 2, {"node-1": Candidate(())})
    assert answer == {"node-1": Candidate(("uid-a",))}


def test_nodes_where_no_eviction_helps_and_unknown_nodes_are_dropped() -> None:
    answer = preempt_on(
        [Holder("a", 100, (0, 1, 2, 3))],
        1,
        {"node-1": Candidate(()), "node-elsewhere": Candidate(("uid-x",))},
    )
    assert answer == {}


def test_nodes_left_when_the_budget_is_spent_are_dropped() -> None:
    holders, candidates = [Holder("a", 1, (0, 1, 2, 3))], {"node-1": Candidate(())}
    in_time = iter([0.0, 0.5])
    assert list(preempt_on(holders, 1, candidates, budget=1.0, clock=lambda: next(in_time))) == ["node-1"]
    too_late = iter([0.0, 1.5])
    assert preempt_on(holders, 1, candidates, budget=1.0, clock=lambda: next(too_late)) == {}


def test_a_pod_without_claims_gets_the_candidates_back_and_a_pod_with_a_missing_claim_none() -> None:
    snapshot, state = cluster([Holder("a", 1, (0, 1))], 1)
    candidates = {"node-1": Candidate(("uid-a",))}
    plain = pod_without_claims(state)
    assert preempt(snapshot, plain, candidates) == candidates
    missing = ClusterState.from_objects([device_class(), node("node-1"), pod("lost", ["nowhere"])])
    lost = missing.pods[("default", "lost")]
    assert preempt(Snapshot(missing, Features(), CEL), lost, candidates) == {}


def pod_without_claims(state: ClusterState) -> Any:
    raw = pod("plain")
    raw["spec"]["priority"] = 100
    state.apply(raw)
    return state.pods[("default", "plain")]
