"""Devices kept for pods nominated to a node by a preemption (upstream's nominated pods, for
devices): who keeps what, for whom, and that nothing is kept with nominations ignored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.model.core import Pod
from extender.scheduling.decide import what_if
from extender.scheduling.decide.decision import NodeDecision
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt import nominated
from tests.builders import allocated, claim, device, device_class, exact, node, pod, reserve, resource_slice

CEL = CelEnvironment()


def gpus_claim(name: str, gpus: tuple[int, ...], reserved_for: str) -> dict[str, Any]:
    c = claim(name, allocation=allocated(*(("driver-a", "node-1", f"gpu-{i}") for i in gpus)))
    reserve(c, reserved_for)
    return c


def victim(terminating: bool) -> list[dict[str, Any]]:
    """Pod ``victim`` (priority 1) on node-1 holding gpu-2 and gpu-3."""
    p = pod("victim", ["victim-claim"], node_name="node-1", priority=1)
    if terminating:
        p["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    return [gpus_claim("victim-claim", (2, 3), "victim"), p]


def waiting(
    name: str, priority: int, wanted: int, nominated_to: str | None = "node-1"
) -> list[dict[str, Any]]:
    p = pod(name, [f"{name}-claim"], priority=priority)
    if nominated_to:
        p["status"] = {"nominatedNodeName": nominated_to}
    return [claim(f"{name}-claim", requests=[exact(count=wanted)]), p]


@dataclass(frozen=True)
class Case:
    objects: list[dict[str, Any]]
    #: The pod filtered (priority, GPUs wanted).
    priority: int
    wanted: int
    fits: bool
    remembered: dict[str, frozenset[str]] = field(default_factory=dict)


BASE = [
    device_class(),
    node("node-1"),
    resource_slice("s", [device(f"gpu-{i}") for i in range(4)], pool="node-1", node="node-1"),
]

CASES = {
    "a lower pod cannot take what a nominated pod needs once its victim is gone": Case(
        [*victim(terminating=True), *waiting("q", 100, 4)], priority=50, wanted=1, fits=False
    ),
    "an equal-priority pod cannot either (upstream: priority >= the filtered pod's)": Case(
        [*victim(terminating=True), *waiting("q", 100, 4)], priority=100, wanted=1, fits=False
    ),
    "a more important pod is not held back": Case(
        [*victim(terminating=True), *waiting("q", 100, 4)], priority=101, wanted=1, fits=True
    ),
    "what the nominated pod does not need stays free": Case(
        [*victim(terminating=True), *waiting("q", 100, 1)], priority=50, wanted=1, fits=True
    ),
    "as upstream counts a terminating pod and the nominated one both, the rest must fit beside them": Case(
        [*victim(terminating=True), *waiting("q", 100, 2)], priority=50, wanted=2, fits=False
    ),
    "victims the preempt verb named, not yet terminating, count as gone for the nominated pod": Case(
        [*victim(terminating=False), *waiting("q", 100, 4)],
        priority=50,
        wanted=1,
        fits=False,
        remembered={"node-1": frozenset({"uid-victim"})},
    ),
    "without a remembered answer or a terminating victim the nominated pod does not fit: nothing kept": Case(
        [*victim(terminating=False), *waiting("q", 100, 4)], priority=50, wanted=1, fits=True
    ),
    "a pod nominated to another node keeps nothing here": Case(
        [*victim(terminating=True), *waiting("q", 100, 4, nominated_to="node-2")],
        priority=50,
        wanted=1,
        fits=True,
    ),
    "a pod not nominated keeps nothing": Case(
        [*victim(terminating=True), *waiting("q", 100, 4, nominated_to=None)],
        priority=50,
        wanted=1,
        fits=True,
    ),
}


def snapshot_with(case: Case) -> tuple[Snapshot, ClusterState]:
    objects = [*BASE, *case.objects, *waiting("p", case.priority, case.wanted, nominated_to=None)]
    state = ClusterState.from_objects(objects)
    assert not state.problems, state.problems
    return Snapshot(state, Features(), CEL), state


def decide(snapshot: Snapshot, target: Pod, nominations: nominated.Nominations | None) -> NodeDecision:
    """``target`` judged on node-1 with the devices of the pods nominated there ahead of it taken."""
    claims = snapshot.claims_of(target)
    adjustments = nominated.adjustments(
        snapshot, target, claims, ["node-1"], nominations, nominated.no_victims, releasing=False
    )
    return what_if.decide(
        snapshot, claims, snapshot.state.nodes["node-1"], adjustments.get("node-1", what_if.UNCHANGED)
    )


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_devices_kept_for_nominated_pods(case: Case) -> None:
    snapshot, state = snapshot_with(case)
    p = state.pods[("default", "p")]

    def remembered(uid: str, node_name: str) -> frozenset[str]:
        return case.remembered.get(node_name, frozenset()) if uid == "uid-q" else frozenset()

    decision = decide(
        snapshot,
        p,
        nominated.Nominations(victims_of=remembered),
    )
    assert decision.fits is case.fits, decision.reason
    if not case.fits:
        assert "kept for default/q, nominated to this node by a preemption" in (decision.reason or "")


def test_nominations_ignored_keep_nothing_as_the_in_tree_plugin() -> None:
    snapshot, state = snapshot_with(Case([*victim(terminating=True), *waiting("q", 100, 4)], 50, 1, False))
    p = state.pods[("default", "p")]
    assert decide(snapshot, p, None).fits


def test_the_nominated_pod_itself_is_not_held_back_by_its_own_nomination() -> None:
    objects = [*BASE, *victim(terminating=True), *waiting("q", 100, 2)]
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(), CEL)
    q = state.pods[("default", "q")]
    decision = decide(snapshot, q, nominated.Nominations())
    assert decision.fits  # gpu-0 and gpu-1 are free; its own nomination keeps nothing from it


def test_the_devices_in_use_are_unchanged_afterwards() -> None:
    snapshot, state = snapshot_with(Case([*victim(terminating=True), *waiting("q", 100, 4)], 50, 1, False))
    before = dict(snapshot.allocated.dedicated)
    p = state.pods[("default", "p")]
    decide(snapshot, p, nominated.Nominations())
    assert snapshot.allocated.dedicated == before


def test_pods_of_other_schedulers_keep_nothing() -> None:
    # Upstream keeps room only for pods in its own queue: a default-scheduler pod nominated
    # after a CPU preemption is not this scheduler's to keep devices for.
    objects = [
        *BASE,
        *victim(terminating=True),
        *waiting("q", 100, 4),
        *waiting("p", 50, 1, nominated_to=None),
    ]
    objects[-3]["spec"]["schedulerName"] = "default-scheduler"  # q
    state = ClusterState.from_objects(objects)
    assert state.pods[("default", "q")].scheduler_name == "default-scheduler"
    snapshot = Snapshot(state, Features(), CEL)
    p = state.pods[("default", "p")]
    ours = nominated.Nominations(scheduler_names=frozenset({"dra-extender-scheduler"}))
    assert decide(snapshot, p, ours).fits
    anyone = nominated.Nominations()
    assert not decide(snapshot, p, anyone).fits


def test_a_nominated_pod_being_bound_keeps_nothing_more() -> None:
    # Its bind's writes hold its devices already; keeping them again would refuse others twice.
    snapshot, state = snapshot_with(Case([*victim(terminating=True), *waiting("q", 100, 4)], 50, 1, False))
    p = state.pods[("default", "p")]
    binding = nominated.Nominations(binding=frozenset({"uid-q"}))
    assert decide(snapshot, p, binding).fits
