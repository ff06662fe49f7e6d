"""Victim choice on one node (DefaultPreemption's SelectVictimsOnNode with devices): a minimal
set, lower priorities first, claims shared with more important pods never freed, PodDisruption-
Budgets respected as far as possible; and the preempt verb's answer over candidate nodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.model.core import parse_pod
from extender.model.policy import parse_pod_disruption_budget
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.victims import (
    MAY_HELP as MAY_HELP_REASON,
)
from extender.scheduling.preempt.victims import (
    Candidate,
    _WhatIf,
    pdb_violating,
    potential_victims,
    preempt,
    select_victims,
    where_it_may_help,
)
from tests.builders import (
    allocated,
    claim,
    device,
    device_class,
    exact,
    node,
    pod,
    pod_disruption_budget,
    reserve,
    resource_slice,
)
from tests.virtual_time import Ticking

CEL = CelEnvironment()


@dataclass(frozen=True)
class Holder:
    """A running pod on node-1 and the GPUs its claim holds (``shared_with``: more pods reserving
    that claim, with their priorities and nodes)."""

    name: str
    priority: int
    gpus: tuple[int, ...]
    shared_with: dict[str, int] = field(default_factory=dict)
    started: str = "2026-11-01T00:00:00Z"
    labels: dict[str, str] = field(default_factory=dict)
    phase: str = "Running"
    sharer_node: str = "node-1"


def running(
    name: str,
    priority: int,
    claims: list[str],
    started: str,
    *,
    node_name: str = "node-1",
    labels: dict[str, str] | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    p = pod(name, claims, node_name=node_name, priority=priority, labels=labels)
    p["status"] = {"startTime": started, "phase": phase}
    return p


def cluster(
    holders: list[Holder],
    wanted: int,
    preemptor_priority: int = 100,
    extra: list[dict[str, Any]] | None = None,
) -> tuple[Snapshot, ClusterState]:
    objects: list[dict[str, Any]] = [
        device_class(),
        node("node-1"),
        node("node-2"),
        resource_slice("s", [device(f"gpu-{i}") for i in range(4)], pool="node-1", node="node-1"),
    ]
    for h in holders:
        c = claim(
            f"{h.name}-claim", allocation=allocated(*(("driver-a", "node-1", f"gpu-{i}") for i in h.gpus))
        )
        objects.append(reserve(c, h.name, *h.shared_with))
        objects.append(
            running(h.name, h.priority, [f"{h.name}-claim"], h.started, labels=h.labels, phase=h.phase)
        )
        for sharer, priority in h.shared_with.items():
            objects.append(running(sharer, priority, [f"{h.name}-claim"], h.started, node_name=h.sharer_node))
    objects.append(claim("wanted", requests=[exact(count=wanted)]))
    objects.append(pod("preemptor", ["wanted"], priority=preemptor_priority))
    objects.extend(extra or [])
    state = ClusterState.from_objects(objects)
    assert not state.problems, state.problems
    return Snapshot(state, Features(), CEL), state


@dataclass(frozen=True)
class Case:
    holders: list[Holder]
    wanted: int
    victims: list[str] | None  # None: the node is no candidate; otherwise most important first
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    violations: int = 0


APP_A = {"app": "a"}
APP_B = {"app": "b"}

CASES = {
    "one GPU short: the least important of equal pods goes (the later started)": Case(
        [
            Holder("a", 1, (0, 1), started="2026-11-01T00:00:00Z"),
            Holder("b", 1, (2, 3), started="2026-11-02T00:00:00Z"),
        ],
        wanted=2,
        victims=["b"],
    ),
    "a pod not started yet counts as the latest started": Case(
        [Holder("a", 1, (0, 1), started=""), Holder("b", 1, (2, 3), started="2026-11-02T00:00:00Z")],
        wanted=2,
        victims=["a"],
    ),
    "lower priority goes first": Case(
        [Holder("a", 1, (0, 1)), Holder("b", 5, (2, 3))], wanted=2, victims=["a"]
    ),
    "a minimal set: the pod whose GPUs are not needed stays": Case(
        [Holder("a", 1, (0,)), Holder("b", 1, (1, 2, 3))], wanted=3, victims=["b"]
    ),
    "both must go, listed most important first": Case(
        [Holder("a", 1, (0, 1)), Holder("b", 5, (2, 3))], wanted=4, victims=["b", "a"]
    ),
    "free devices first: nobody goes": Case([Holder("a", 1, (0,))], wanted=3, victims=[]),
    "an equally important pod is never a victim": Case(
        [Holder("a", 100, (0, 1, 2, 3))], wanted=1, victims=None
    ),
    "a more important pod is never a victim": Case([Holder("a", 101, (0, 1, 2, 3))], wanted=1, victims=None),
    "a claim shared with a more important pod is never freed": Case(
        [Holder("a", 1, (0, 1, 2, 3), shared_with={"vip": 200})], wanted=1, victims=None
    ),
    "a claim shared with a lower pod on another node is never freed (that pod is no victim here)": Case(
        [Holder("a", 1, (0, 1, 2, 3), shared_with={"elsewhere": 1}, sharer_node="node-2")],
        wanted=1,
        victims=None,
    ),
    "a claim shared by two lower pods on the node: both go": Case(
        [Holder("a", 1, (0, 1, 2, 3), shared_with={"a2": 2})], wanted=1, victims=["a2", "a"]
    ),
    "a finished pod is no victim (and its claim not freed by evicting it)": Case(
        [Holder("done", 1, (0, 1, 2, 3), phase="Succeeded")], wanted=1, victims=None
    ),
    "a PodDisruptionBudget spares a pod when another will do": Case(
        [Holder("a", 1, (0, 1), labels=APP_A), Holder("b", 1, (2, 3), labels=APP_B)],
        wanted=2,
        victims=["b"],
        pdbs=[pod_disruption_budget("protect-a", APP_A, allowed=0)],
    ),
    "a PodDisruptionBudget is violated only when nothing else will do": Case(
        [Holder("a", 1, (0, 1), labels=APP_A), Holder("b", 1, (2, 3), labels=APP_B)],
        wanted=4,
        victims=["a", "b"],
        pdbs=[pod_disruption_budget("protect-a", APP_A, allowed=0)],
        violations=1,
    ),
    "a budget with a disruption left is no violation": Case(
        [Holder("a", 1, (0, 1), labels=APP_A), Holder("b", 1, (2, 3), labels=APP_B)],
        wanted=4,
        victims=["a", "b"],
        pdbs=[pod_disruption_budget("protect-a", APP_A, allowed=1)],
        violations=0,
    ),
    "one disruption left: the more important of two protected pods uses it, the other violates": Case(
        [
            Holder("a1", 1, (0, 1), labels=APP_A, started="2026-11-01T00:00:00Z"),
            Holder("a2", 1, (2, 3), labels=APP_A, started="2026-11-02T00:00:00Z"),
        ],
        wanted=4,
        victims=["a1", "a2"],
        pdbs=[pod_disruption_budget("protect-a", APP_A, allowed=1)],
        violations=1,
    ),
    "protected pods are reprieved first: the violating one stays, the one with budget left goes": Case(
        [
            Holder("a1", 1, (0, 1), labels=APP_A, started="2026-11-01T00:00:00Z"),
            Holder("a2", 1, (2, 3), labels=APP_A, started="2026-11-02T00:00:00Z"),
        ],
        wanted=2,
        victims=["a1"],
        pdbs=[pod_disruption_budget("protect-a", APP_A, allowed=1)],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_victims_on_one_node(case: Case) -> None:
    snapshot, state = cluster(case.holders, case.wanted, extra=case.pdbs)
    found = select_victims(
        snapshot,
        state.pods[("default", "preemptor")],
        state.nodes["node-1"],
        pdbs=list(state.pdbs.values()),
    )
    if case.victims is None:
        assert found is None
        return
    assert found is not None
    assert [p.name for p in found.pods] == case.victims
    assert found.pdb_violations == case.violations


def budget(
    match: dict[str, str] | None, allowed: int, disrupted: tuple[str, ...] = (), ns: str = "default"
) -> Any:
    return parse_pod_disruption_budget(
        pod_disruption_budget("b", match, allowed=allowed, disrupted=disrupted, namespace=ns)
    )


def labelled(name: str, labels: dict[str, str] | None) -> Any:
    return parse_pod(pod(name, labels=labels))


PDB_CASES = {
    # name: (pods in order with labels, budgets, violating names)
    "no budget: nobody violates": ([("p1", APP_A)], [], set()),
    "zero allowed: every matching pod violates": (
        [("p1", APP_A), ("p2", APP_A)],
        [budget(APP_A, 0)],
        {"p1", "p2"},
    ),
    "one allowed: the first matching pod in order uses it": (
        [("p1", APP_A), ("p2", APP_A)],
        [budget(APP_A, 1)],
        {"p2"},
    ),
    "a pod already in disruptedPods is not counted again": (
        [("p1", APP_A), ("p2", APP_A)],
        [budget(APP_A, 1, disrupted=("p1",))],
        set(),
    ),
    "another namespace's budget does not protect": ([("p1", APP_A)], [budget(APP_A, 0, ns="other")], set()),
    "a pod without labels matches no budget": ([("p1", None)], [budget(APP_A, 0)], set()),
    "a budget without a selector matches nothing": ([("p1", APP_A)], [budget(None, 0)], set()),
    "a budget with an empty selector matches nothing": ([("p1", APP_A)], [budget({}, 0)], set()),
    "non-matching labels": ([("p1", APP_B)], [budget(APP_A, 0)], set()),
    "two budgets: each counts its own": (
        [("p1", {"app": "a", "tier": "x"}), ("p2", APP_A)],
        [budget(APP_A, 1), budget({"tier": "x"}, 0)],
        {"p1", "p2"},
    ),
}


@pytest.mark.parametrize("case", PDB_CASES.values(), ids=PDB_CASES.keys())
def test_pdb_violations_as_upstream_filterPodsWithPDBViolation(case: Any) -> None:
    pods, budgets, violating = case
    parsed = [labelled(name, labels) for name, labels in pods]
    assert {p.name for p in parsed if p.uid in pdb_violating(parsed, budgets)} == violating


def without_label(key: str) -> Any:
    raw = pod_disruption_budget("b", None, allowed=0)
    raw["spec"]["selector"] = {"matchExpressions": [{"key": key, "operator": "DoesNotExist"}]}
    return parse_pod_disruption_budget(raw)


#: kubernetes#141785 (kube-scheduler 1.38): an empty selector ``{}`` protects every pod of the
#: budget's namespace (1.37: none); a missing selector still protects none. name: (pods, budgets,
#: violating with the 1.37 rule, violating with the 1.38 rule)
EMPTY_SELECTOR_CASES: dict[
    str, tuple[list[tuple[str, dict[str, str] | None]], list[Any], set[str], set[str]]
] = {
    "empty selector": ([("p1", APP_A), ("p2", None)], [budget({}, 0)], set(), {"p1", "p2"}),
    "empty selector, one disruption allowed": (
        [("p1", APP_A), ("p2", APP_B)],
        [budget({}, 1)],
        set(),
        {"p2"},
    ),
    "empty selector of another namespace": ([("p1", APP_A)], [budget({}, 0, ns="other")], set(), set()),
    "no selector": ([("p1", APP_A)], [budget(None, 0)], set(), set()),
    "an unlabelled pod under a DoesNotExist selector": (
        [("p1", None)],
        [without_label("app")],
        set(),
        {"p1"},
    ),
}


@pytest.mark.parametrize("case", EMPTY_SELECTOR_CASES.values(), ids=EMPTY_SELECTOR_CASES.keys())
def test_an_empty_budget_selector_by_release(case: Any) -> None:
    pods, budgets, before, since = case
    parsed = [labelled(name, labels) for name, labels in pods]
    for as_policy_v1, violating in ((False, before), (True, since)):
        found = pdb_violating(parsed, budgets, as_policy_v1=as_policy_v1)
        assert {p.name for p in parsed if p.uid in found} == violating, as_policy_v1


def test_the_preempt_verb_reads_an_empty_budget_selector_as_the_release_does() -> None:
    """The victim an empty-selector budget protects counts as a PDB violation in the answer
    under 1.38 (kube-scheduler prefers nodes with fewer), and not under 1.37."""
    snapshot, state = cluster(
        [Holder("a", 1, (0, 1, 2, 3), labels=APP_A)],
        1,
        extra=[pod_disruption_budget("everyone", {}, allowed=0)],
    )
    preemptor = state.pods[("default", "preemptor")]
    as_1_37 = preempt(snapshot, preemptor, {"node-1": Candidate(())})
    as_1_38 = preempt(snapshot, preemptor, {"node-1": Candidate(())}, pdb_selectors_as_policy_v1=True)
    assert as_1_37 == {"node-1": Candidate(("uid-a",), 0)}
    assert as_1_38 == {"node-1": Candidate(("uid-a",), 1)}


def test_an_invalid_selector_protects_nothing() -> None:
    raw = pod_disruption_budget("b", APP_A, allowed=0)
    raw["spec"]["selector"] = {"matchExpressions": [{"key": "app", "operator": "Sometimes"}]}
    assert parse_pod_disruption_budget(raw).selector is None
    assert pdb_violating([labelled("p1", APP_A)], [parse_pod_disruption_budget(raw)]) == set()


def test_the_preemptor_fits_after_the_victims_claims_are_freed_and_the_snapshot_is_untouched() -> None:
    snapshot, state = cluster([Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))], wanted=2)
    preemptor, node_1 = state.pods[("default", "preemptor")], state.nodes["node-1"]
    in_use = (dict(snapshot.allocated.dedicated), dict(snapshot.allocated.shared_ids))
    assert not snapshot.decide(snapshot.claims_of(preemptor), node_1).fits
    found = select_victims(snapshot, preemptor, node_1)
    assert found is not None and len(found.pods) == 1
    assert not snapshot.decide(snapshot.claims_of(preemptor), node_1).fits
    assert (dict(snapshot.allocated.dedicated), dict(snapshot.allocated.shared_ids)) == in_use


def test_a_what_if_is_undone_when_the_allocator_raises() -> None:
    snapshot, state = cluster([Holder("a", 1, (0, 1, 2, 3))], wanted=1)
    before = dict(snapshot.allocated.dedicated)
    allocation = state.claims[("default", "a-claim")].allocation
    assert allocation is not None
    with pytest.raises(RuntimeError), snapshot.what_if(freed=[allocation]):
        assert not snapshot.allocated.dedicated
        raise RuntimeError("boom")
    assert snapshot.allocated.dedicated == before


MAY_HELP = {
    "lower-priority pods hold the devices": ([Holder("a", 1, (0, 1, 2, 3))], 2, True),
    "only equal-priority pods hold them": ([Holder("a", 100, (0, 1, 2, 3))], 2, False),
    "even with every lower pod gone there are too few devices": ([Holder("a", 1, (0,))], 5, False),
    "a higher pod shares the claim": ([Holder("a", 1, (0, 1, 2, 3), shared_with={"vip": 101})], 1, False),
    "no pods on the node": ([], 5, False),
}


def helps_on_node_1(snapshot: Snapshot, preemptor: Any) -> bool:
    """Filter's question for node-1: would evicting every lower-priority pod there make room?"""
    node_1 = {"node-1": snapshot.state.nodes["node-1"]}
    found = where_it_may_help(snapshot, preemptor, snapshot.claims_of(preemptor), node_1)
    assert found in ({}, {"node-1": MAY_HELP_REASON})
    return bool(found)


@pytest.mark.parametrize("case", MAY_HELP.values(), ids=MAY_HELP.keys())
def test_may_help_is_filters_question(case: Any) -> None:
    holders, wanted, expected = case
    snapshot, state = cluster(holders, wanted)
    assert helps_on_node_1(snapshot, state.pods[("default", "preemptor")]) is expected


def test_potential_victims_are_the_running_lower_pods_most_important_first() -> None:
    _, state = cluster(
        [
            Holder("low", 1, (0,)),
            Holder("mid", 50, (1,)),
            Holder("same", 100, (2,)),
            Holder("gone", 1, (3,), phase="Failed"),
        ],
        wanted=1,
    )
    names = [p.name for p in potential_victims(state, state.pods[("default", "preemptor")], "node-1")]
    assert names == ["mid", "low"]


def preempt_on(
    holders: list[Holder], wanted: int, candidates: dict[str, Candidate], **kw: Any
) -> dict[str, Candidate]:
    snapshot, state = cluster(holders, wanted)
    return preempt(snapshot, state.pods[("default", "preemptor")], candidates, **kw)


def test_the_schedulers_victims_are_kept_and_the_devices_victims_join_them_most_important_first() -> None:
    # kube-scheduler chose b (for CPU, say); the preemptor's claim still needs a's GPUs too.
    answer = preempt_on(
        [Holder("a", 2, (0, 1)), Holder("b", 1, (2, 3))], 4, {"node-1": Candidate(("uid-b",), 1)}
    )
    assert answer == {"node-1": Candidate(("uid-a", "uid-b"), 1)}


def test_victims_the_cache_does_not_know_stay_in_front() -> None:
    answer = preempt_on([Holder("a", 1, (0, 1, 2, 3))], 1, {"node-1": Candidate(("uid-unknown",))})
    assert answer == {"node-1": Candidate(("uid-unknown", "uid-a"))}


def test_the_schedulers_victims_can_be_enough() -> None:
    answer = preempt_on(
        [Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))], 2, {"node-1": Candidate(("uid-b",))}
    )
    assert answer == {"node-1": Candidate(("uid-b",))}


def test_a_1_38_placeholder_gets_the_victims_the_devices_need() -> None:
    answer = preempt_on([Holder("a", 1, (0, 1)), Holder("b", 5, (2, 3))], 2, {"node-1": Candidate(())})
    assert answer == {"node-1": Candidate(("uid-a",))}


def test_the_caches_budgets_count_in_the_answer() -> None:
    snapshot, state = cluster(
        [Holder("a", 1, (0, 1, 2, 3), labels=APP_A)], 1, extra=[pod_disruption_budget("p", APP_A, allowed=0)]
    )
    answer = preempt(snapshot, state.pods[("default", "preemptor")], {"node-1": Candidate(())})
    assert answer == {"node-1": Candidate(("uid-a",), 1)}


def test_nodes_where_no_eviction_helps_and_unknown_nodes_are_dropped() -> None:
    answer = preempt_on(
        [Holder("a", 100, (0, 1, 2, 3))],
        1,
        {"node-1": Candidate(()), "node-elsewhere": Candidate(("uid-x",))},
    )
    assert answer == {}


def test_nodes_left_when_the_budget_is_spent_are_dropped() -> None:
    holders = [Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))]
    candidates = {"node-1": Candidate(())}
    assert list(preempt_on(holders, 2, candidates, budget=10.0, clock=Ticking(0.1))) == ["node-1"]
    assert preempt_on(holders, 2, candidates, budget=1.0, clock=Ticking(2.0)) == {}


def test_a_node_whose_reprieves_outlast_the_budget_is_dropped_not_over_evicted() -> None:
    # Two readings fit the budget (the start and the node's first check), the third does not:
    # the reprieve loop stops, and rather than naming both pods the node is left out.
    holders = [Holder("a", 1, (0, 1)), Holder("b", 1, (2, 3))]
    assert preempt_on(holders, 2, {"node-1": Candidate(())}, budget=2.5, clock=Ticking(1.0)) == {}


def test_a_what_if_that_runs_out_of_time_drops_the_node() -> None:
    gpus = [device(f"gpu-{i}") for i in range(20)]
    held = claim("low-claim", allocation=allocated(*(("driver-a", "node-1", f"gpu-{i}") for i in range(20))))
    reserve(held, "low")
    state = ClusterState.from_objects(
        [
            device_class(),
            node("node-1"),
            resource_slice("s", gpus, pool="node-1", node="node-1"),
            held,
            running("low", 1, ["low-claim"], "2026-11-01T00:00:00Z"),
            claim("wanted", requests=[exact(count=17)]),  # 17 picks: past the allocator's 16-step check
            pod("preemptor", ["wanted"], priority=100),
        ]
    )
    snapshot = Snapshot(state, Features(), CEL, clock=Ticking(10.0))  # every allocation overruns 1 s
    preemptor = state.pods[("default", "preemptor")]
    what_if = _WhatIf(snapshot, preemptor, snapshot.claims_of(preemptor), state.nodes["node-1"], None, 1.0)
    assert what_if.fits({"uid-low"}) is None  # "cannot tell", not "does not fit" (never reprieved for it)
    assert select_victims(snapshot, preemptor, state.nodes["node-1"]) is None
    assert select_victims(Snapshot(state, Features(), CEL), preemptor, state.nodes["node-1"]) is not None


def test_a_pod_without_claims_gets_the_candidates_back_and_a_pod_with_a_missing_claim_none() -> None:
    snapshot, state = cluster([Holder("a", 1, (0, 1))], 1)
    candidates = {"node-1": Candidate(("uid-a",))}
    state.apply(pod("plain", priority=100))
    assert preempt(snapshot, state.pods[("default", "plain")], candidates) == candidates
    missing = ClusterState.from_objects([device_class(), node("node-1"), pod("lost", ["nowhere"])])
    lost = missing.pods[("default", "lost")]
    assert preempt(Snapshot(missing, Features(), CEL), lost, candidates) == {}


def sharing(
    victims: list[tuple[str, tuple[int, ...]]], preemptor_claims: list[str]
) -> tuple[Snapshot, ClusterState]:
    """node-1 with 4 GPUs; each (name, gpus) is a priority-1 pod whose claim ``<name>-claim``
    holds those GPUs (started in list order); the preemptor uses ``preemptor_claims`` (an
    allocated claim of a victim, and ``more``: one more GPU)."""
    objects: list[dict[str, Any]] = [
        device_class(),
        node("node-1"),
        resource_slice("s", [device(f"gpu-{i}") for i in range(4)], pool="node-1", node="node-1"),
        claim("more", requests=[exact(count=1)]),
        pod("preemptor", preemptor_claims, priority=100),
    ]
    for day, (name, gpus) in enumerate(victims, start=1):
        held = claim(
            f"{name}-claim", allocation=allocated(*(("driver-a", "node-1", f"gpu-{i}") for i in gpus))
        )
        reserve(held, name)
        objects += [held, running(name, 1, [f"{name}-claim"], f"2026-11-{day:02d}T00:00:00Z")]
    state = ClusterState.from_objects(objects)
    assert not state.problems, state.problems
    return Snapshot(state, Features(), CEL), state


def test_a_claim_the_preemptor_shares_with_a_victim_is_never_counted_as_freed() -> None:
    # Evicting the only pod reserving "low-claim" would deallocate the claim the preemptor
    # itself uses: that helps nobody. (The preemptor is not in its reservedFor before its bind.)
    snapshot, state = sharing([("low", (0, 1, 2, 3))], ["low-claim", "more"])
    vip = state.pods[("default", "preemptor")]
    assert not helps_on_node_1(snapshot, vip)
    assert preempt(snapshot, vip, {"node-1": Candidate(())}) == {}


def test_the_victim_is_the_one_whose_devices_help_not_the_one_sharing_the_preemptors_claim() -> None:
    # low-w (started first) holds gpu-2,3; low-v holds gpu-0,1 through the claim the preemptor
    # shares. Only evicting low-w frees a device for "more".
    snapshot, state = sharing([("low-w", (2, 3)), ("low-v", (0, 1))], ["low-v-claim", "more"])
    answer = preempt(snapshot, state.pods[("default", "preemptor")], {"node-1": Candidate(())})
    assert answer == {"node-1": Candidate(("uid-low-w",))}


def test_the_schedulers_victims_use_up_a_budget_before_the_extenders() -> None:
    # One disruption allowed for app=a: kube-scheduler's victim a1 takes it, so a2, which the
    # devices need too, violates the budget.
    snapshot, state = cluster(
        [
            Holder("a1", 1, (0, 1), labels=APP_A),
            Holder("a2", 1, (2, 3), labels=APP_A, started="2026-11-02T00:00:00Z"),
        ],
        4,
        extra=[pod_disruption_budget("protect-a", APP_A, allowed=1)],
    )
    answer = preempt(snapshot, state.pods[("default", "preemptor")], {"node-1": Candidate(("uid-a1",))})
    assert answer == {"node-1": Candidate(("uid-a1", "uid-a2"), 1)}


def test_freeing_an_allocation_that_is_not_counted_is_refused() -> None:
    snapshot, state = cluster([Holder("a", 1, (0, 1))], 1)
    allocation = state.claims[("default", "a-claim")].allocation
    assert allocation is not None
    with snapshot.what_if(freed=[allocation]):
        with pytest.raises(AssertionError, match="not in use"), snapshot.what_if(freed=[allocation]):
            pass  # never entered: freeing it twice would corrupt the devices in use
        assert not snapshot.allocated.dedicated
    assert len(snapshot.allocated.dedicated) == 2
