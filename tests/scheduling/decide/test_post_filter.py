"""What PostFilter releases when no node fits (decide/post_filter.py), and what in flight stops
it. The writes themselves, against a store, are in tests/scheduling/write/test_pod_group_writes.py
and the engine's PostFilter tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide import post_filter
from extender.scheduling.decide.post_filter import InFlight, Kind
from extender.scheduling.decide.snapshot import Snapshot
from tests.builders import allocated, claim, device, device_class, node, pod, reserve, resource_slice

CEL = CelEnvironment()
KEY = ("default", "a")


def on_node_2() -> dict[str, Any]:
    """An allocation to a device of node-2 (its node selector names node-2)."""
    out = allocated(("driver-a", "node-2", "gpu-0"))
    out["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}
        ]
    }
    return out


def objects(*, reserved_for: tuple[str, ...] = (), node_2: bool = True) -> list[dict[str, Any]]:
    """Pod ``p`` with claim ``a`` allocated on node-2; the candidate is node-1."""
    a = claim("a", allocation=on_node_2())
    if reserved_for:
        reserve(a, *reserved_for)
    out = [device_class(), node("node-1"), pod("p", ["a"]), a]
    if node_2:
        out += [node("node-2"), resource_slice("s", [device("gpu-0")], pool="node-2", node="node-2")]
    return out


@dataclass(frozen=True)
class Case:
    objects: list[dict[str, Any]]
    release: Kind | None
    in_flight: InFlight = field(default_factory=InFlight)


CASES = {
    "a claim no candidate can use, reserved for nobody: deallocated": Case(objects(), Kind.DEALLOCATE),
    "reserved for the pod alone: deallocated": Case(objects(reserved_for=("p",)), Kind.DEALLOCATE),
    "reserved for another pod too: left alone": Case(objects(reserved_for=("p", "q")), None),
    "the pod is being bound here: nothing": Case(objects(), None, InFlight(binding=True)),
    "a write of ours to the claim is not settled: nothing": Case(
        objects(), None, InFlight(settling=frozenset({KEY}))
    ),
    "a Binding that may still land keeps a claim whose node exists": Case(
        objects(), None, InFlight(may_land=True)
    ),
    "but not one stranded on a node that is gone": Case(
        objects(node_2=False), Kind.DEALLOCATE, InFlight(may_land=True)
    ),
}


def assert_released_as(case: Case) -> None:
    """PostFilter for pod ``p`` with node-1 the candidate releases ``case.release`` of claim ``a``."""
    state = ClusterState.from_objects(case.objects)
    snapshot = Snapshot(state, Features(), CEL)
    p = state.pods[("default", "p")]
    claims = snapshot.claims_of(p)
    release = post_filter.release(
        state, EngineConfig(), snapshot, p, claims, [state.nodes["node-1"]], case.in_flight, now=0.0
    )
    assert (release.kind if release else None) is case.release
    if release is not None:
        assert [c.key for c in release.claims] == [KEY]


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_post_filter_releases_as_upstream_unless_something_is_in_flight(case: Case) -> None:
    assert_released_as(case)


def test_a_bound_pod_releases_nothing() -> None:
    objs = objects()
    objs[2] = pod("p", ["a"], node_name="node-1")
    state = ClusterState.from_objects(objs)
    snapshot = Snapshot(state, Features(), CEL)
    p = state.pods[("default", "p")]
    nodes = [state.nodes["node-1"]]
    assert (
        post_filter.release(
            state, EngineConfig(), snapshot, p, snapshot.claims_of(p), nodes, InFlight(), now=0.0
        )
        is None
    )


def test_a_release_names_its_group_exactly_when_it_is_the_groups() -> None:
    state = ClusterState.from_objects(objects())
    a = state.claims[KEY]
    with pytest.raises(ValueError, match="no claim"):
        post_filter.Release(Kind.DEALLOCATE, ())
    with pytest.raises(ValueError, match="a pod group exactly when"):
        post_filter.Release(Kind.UNRESERVE_GROUP, (a,))


def partial_bind(
    *, reserved_for: tuple[str, ...] = ("p",), second_allocated: bool = False
) -> list[dict[str, Any]]:
    """Pod ``p`` with claims ``a`` (allocated to node-1's gpu-0, reserved for ``reserved_for``)
    and ``b`` (allocated to gpu-1 when ``second_allocated``, else still to allocate); node-1 is
    the only node and the candidate."""
    a = claim("a", allocation=allocated(("driver-a", "node-1", "gpu-0")))
    if reserved_for:
        reserve(a, *reserved_for)
    b = claim("b", allocation=allocated(("driver-a", "node-1", "gpu-1")) if second_allocated else None)
    if second_allocated:
        reserve(b, "p")
    slice_ = resource_slice("s", [device("gpu-0"), device("gpu-1")], pool="node-1", node="node-1")
    return [device_class(), node("node-1"), slice_, pod("p", ["a", "b"]), a, b]


#: Beyond upstream (decide/post_filter.py rule 2): a claim a failed bind left behind, available on
#: every candidate, so upstream's rule 1 would never reach it.
LEFT_BEHIND = {
    "claim a reserved for the pod, b still to allocate: a is released": Case(
        partial_bind(), Kind.DEALLOCATE_LEFT_BEHIND
    ),
    "every claim allocated (a lost Binding, not a partial bind): nothing": Case(
        partial_bind(second_allocated=True), None
    ),
    "reserved for another pod too: nothing": Case(partial_bind(reserved_for=("p", "q")), None),
    "reserved for nobody (not the pod's bind): nothing": Case(partial_bind(reserved_for=()), None),
    "the pod is being bound here: nothing": Case(partial_bind(), None, InFlight(binding=True)),
    "a write of ours to the claim is settling: nothing": Case(
        partial_bind(), None, InFlight(settling=frozenset({KEY}))
    ),
    "a Binding of ours may still land: nothing": Case(partial_bind(), None, InFlight(may_land=True)),
}


@pytest.mark.parametrize("case", LEFT_BEHIND.values(), ids=LEFT_BEHIND.keys())
def test_a_claim_a_failed_bind_left_behind_is_released(case: Case) -> None:
    assert_released_as(case)
