"""The engine with device preemption: which rejections are Unschedulable (preemption may help)
rather than Unresolvable, devices kept for nominated pods in filter, prioritize and bind, and the
preempt verb's answers remembered for the pod kube-scheduler then nominates."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.model.core import parse_pod
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.decision import Assessment
from extender.scheduling.engine import Engine
from extender.scheduling.preempt.victims import MAY_HELP, NOT_CHECKED, Candidate
from tests.builders import allocated, claim, device, device_class, exact, node, pod, reserve, resource_slice

NODES = ["node-1", "node-2"]


def holder(name: str, node_name: str, priority: int, gpus: tuple[int, ...]) -> list[dict[str, Any]]:
    c = claim(f"{name}-claim", allocation=allocated(*(("driver-a", node_name, f"gpu-{i}") for i in gpus)))
    reserve(c, name)
    p = pod(name, [f"{name}-claim"], node_name=node_name, priority=priority)
    p["status"] = {"startTime": "2026-11-01T00:00:00Z", "phase": "Running"}
    return [c, p]


def pending(name: str, priority: int, wanted: int, **status: str) -> list[dict[str, Any]]:
    p = pod(name, [f"{name}-claim"], priority=priority)
    if status:
        p["status"] = dict(status)
    return [claim(f"{name}-claim", requests=[exact(count=wanted)]), p]


def engine(
    *objects: dict[str, Any],
    preemption: bool = True,
    clock: Callable[[], float] = time.monotonic,
    **config: Any,
) -> Engine:
    base: list[dict[str, Any]] = [device_class()]
    for n in NODES:
        base += [node(n), resource_slice(f"{n}-gpus", [device(f"gpu-{i}") for i in range(4)], pool=n, node=n)]
    store = MemoryStore()
    store.load([*base, *objects])
    state = ClusterState.from_objects([*base, *objects])
    assert not state.problems, state.problems
    configured = EngineConfig(device_preemption=preemption, **config)
    return assemble(state, MemoryAPI(store), CelEnvironment(), configured, clock=clock)


def terminating(e: Engine, name: str) -> None:
    raw = e.state.pods[("default", name)].raw
    e.state.apply({**raw, "metadata": {**raw["metadata"], "deletionTimestamp": "2026-11-24T00:00:00Z"}})


def filtered(e: Engine, name: str) -> Any:
    return e.filter(e.state.pods[("default", name)], NODES)


def never(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    objects[-1]["spec"]["preemptionPolicy"] = "Never"
    return objects


FULL_OF_LOW = [*holder("low-1", "node-1", 1, (0, 1, 2, 3)), *holder("same-2", "node-2", 100, (0, 1, 2, 3))]


def test_without_device_preemption_every_rejection_is_unresolvable_as_in_tree() -> None:
    result = filtered(engine(*FULL_OF_LOW, *pending("vip", 100, 2), preemption=False), "vip")
    assert result.failed == {} and sorted(result.unresolvable) == NODES


def test_a_node_full_of_lower_priority_pods_is_unschedulable_and_says_why() -> None:
    result = filtered(engine(*FULL_OF_LOW, *pending("vip", 100, 2)), "vip")
    assert list(result.failed) == ["node-1"] and result.failed["node-1"].endswith(MAY_HELP)
    # node-2's holder is as important as the pod: no preemption there.
    assert list(result.unresolvable) == ["node-2"] and MAY_HELP not in result.unresolvable["node-2"]


@pytest.mark.parametrize(
    ("why", "objects"),
    [
        ("a pod that may not preempt (preemptionPolicy: Never)", never(pending("vip", 100, 2))),
        ("more devices than the node has", pending("vip", 100, 5)),
        ("no running pod of lower priority anywhere", pending("vip", 1, 2)),
    ],
)
def test_unresolvable_where_preemption_cannot_help(why: str, objects: list[dict[str, Any]]) -> None:
    result = filtered(engine(*FULL_OF_LOW, *objects), "vip")
    assert result.failed == {}, why


def test_nodes_not_checked_in_time_are_left_to_the_preempt_verb() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # every reading a second later: the budget is spent at once
        return now[0]

    e = engine(*FULL_OF_LOW, *pending("vip", 100, 2), clock=clock, filter_budget=2.5)
    result = filtered(e, "vip")
    assert any(reason.endswith(NOT_CHECKED) for reason in result.failed.values()), result


NOMINATED = [
    *holder("victim", "node-1", 1, (2, 3)),
    *pending("vip", 100, 4, nominatedNodeName="node-1"),
    *pending("other", 50, 1),
]


def test_devices_a_nominated_pod_needs_are_kept_in_filter_prioritize_and_bind() -> None:
    e = engine(*NOMINATED)
    e.state.apply(
        {
            **e.state.pods[("default", "victim")].raw,
            "metadata": {
                **e.state.pods[("default", "victim")].raw["metadata"],
                "deletionTimestamp": "2026-11-24T00:00:00Z",
            },
        }
    )
    result = filtered(e, "other")
    # node-1 and node-2 look alike to the grouping but only node-1 keeps devices for vip.
    assert result.passed == ["node-2"]
    assert "kept for default/vip" in result.unresolvable["node-1"]
    scores = dict(e.prioritize(e.state.pods[("default", "other")], NODES))
    assert scores["node-1"] == 0
    error = asyncio.run(e.bind("default", "other", "uid-other", "node-1"))
    assert "kept for default/vip" in error
    # The nominated pod itself is not held back by its own nomination, and its terminating
    # victim's devices count as free for it there (tests/scheduling/test_preemptor_window.py).
    assert filtered(e, "vip").passed == NODES


def test_without_device_preemption_nominations_keep_nothing() -> None:
    e = engine(*NOMINATED, preemption=False)
    assert filtered(e, "other").passed == NODES


def test_the_preempt_verbs_victims_are_remembered_for_the_nominated_pod() -> None:
    e = engine(
        *holder("victim", "node-1", 1, (2, 3)),
        *holder("low-2", "node-2", 1, (0, 1, 2, 3)),
        *pending("vip", 100, 4),
        *pending("other", 50, 1),
    )
    vip = e.state.pods[("default", "vip")]
    answer = e.preempt(vip, {"node-1": Candidate(()), "node-2": Candidate(())})
    assert answer == {"node-1": Candidate(("uid-victim",)), "node-2": Candidate(("uid-low-2",))}
    # kube-scheduler nominates node-1; the victim's deletion has not reached the cache yet. The
    # free gpu-0 and gpu-1 are vip's already: "other" (priority 50) may not take one.
    e.state.apply({**vip.raw, "status": {"nominatedNodeName": "node-1"}})
    result = filtered(e, "other")
    assert "node-1" not in result.passed
    assert "kept for default/vip" in result.unresolvable["node-1"]


def test_without_a_remembered_answer_a_running_victim_keeps_nothing_for_the_nominated_pod() -> None:
    # Another replica answered the preemption (or this one restarted): until the victim is
    # terminating, the nominated pod does not fit there, so nothing is kept for it.
    e = engine(*holder("victim", "node-1", 1, (2, 3)), *pending("vip", 100, 4, nominatedNodeName="node-1"))
    e.state.apply(pending("other", 50, 1)[0])
    e.state.apply(pending("other", 50, 1)[1])
    assert filtered(e, "other").passed == NODES
    terminating(e, "victim")
    assert filtered(e, "other").passed == ["node-2"]


def test_a_preempt_request_for_a_pod_the_cache_does_not_know_as_sent_is_not_remembered() -> None:
    e = engine(*holder("victim", "node-1", 1, (2, 3)), *pending("vip", 100, 4), *pending("other", 50, 1))
    forged = e.state.pods[("default", "vip")]
    forged_raw = {**forged.raw, "spec": {**forged.raw["spec"], "priority": 1_000_000}}
    assert e.preempt(parse_pod(forged_raw), {"node-1": Candidate(())}) == {
        "node-1": Candidate(("uid-victim",))
    }
    e.state.apply({**forged.raw, "status": {"nominatedNodeName": "node-1"}})
    assert filtered(e, "other").passed == NODES  # nothing kept: the victim still runs


def test_look_alike_nodes_share_the_check_only_when_evictions_free_the_same_devices() -> None:
    # Both nodes have all four GPUs in use, so filter groups them; but on node-2 only two are
    # held by a less important pod, and the pod needs three.
    e = engine(
        *holder("low-1", "node-1", 1, (0, 1, 2, 3)),
        *holder("same-2", "node-2", 100, (0, 1)),
        *holder("low-2", "node-2", 1, (2, 3)),
        *pending("vip", 100, 3),
    )
    vip = e.state.pods[("default", "vip")]
    claims = e.snapshot().claims_of(vip)
    groups = e.snapshot().node_groups(claims, NODES)
    assert groups is not None and groups[0] == groups[1]  # look-alike to the filter
    result = filtered(e, "vip")
    assert list(result.failed) == ["node-1"] and list(result.unresolvable) == ["node-2"]
    # The same two nodes with the same layout of victims share the answer (and get it right).
    e2 = engine(
        *holder("low-1", "node-1", 1, (0, 1, 2, 3)),
        *holder("low-2", "node-2", 1, (0, 1, 2, 3)),
        *pending("vip", 100, 3),
    )
    assert sorted(filtered(e2, "vip").failed) == NODES


def test_a_node_whose_allocation_timed_out_is_not_checked_again() -> None:
    e = engine(*FULL_OF_LOW, *pending("vip", 100, 2))
    timed_out = Assessment(False, "timed out trying to allocate devices", timed_out=True)
    e._assessor = lambda snapshot, claims: lambda node: timed_out  # type: ignore[method-assign]
    result = filtered(e, "vip")
    assert result.failed == {} and result.unresolvable["node-1"] == timed_out.reason


def test_nodes_judged_for_nominations_count_against_the_filter_budget() -> None:
    now = [0.0]
    e = engine(*NOMINATED, clock=lambda: now[0], filter_budget=5.0)
    terminating(e, "victim")
    original = e._assessor

    def slow(snapshot: Any, claims: Any) -> Any:
        assess = original(snapshot, claims)

        def each(node: Any) -> Any:
            now[0] += 3.0  # two allocations (node-1 holds a victim: two groups) fit in 5 s, no more
            return assess(node)

        return each

    e._assessor = slow  # type: ignore[method-assign]
    result = filtered(e, "other")
    assert result.passed == ["node-2"]
    assert "not evaluated" in result.failed["node-1"]
