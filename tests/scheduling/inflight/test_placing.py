"""Pods this extender bound, counted on their node until the cache shows them there
(DRANodeAllocatableResources: kube-scheduler's assumed pods)."""

from __future__ import annotations

from extender.cluster.state import ClusterState
from extender.model.core import Pod, parse_pod
from extender.scheduling.inflight.placing import PLACING_TTL, Placing
from tests.builders import pod


def names(pods: list[Pod]) -> list[str]:
    return sorted(p.name for p in pods)


def test_a_bound_pod_counts_until_the_cache_shows_it_bound() -> None:
    state = ClusterState.from_objects([pod("a")])
    placing = Placing()
    placing.add(parse_pod(pod("a")), "node-1", (), now=0.0)
    assert names(placing.pods_on("node-1", state, (), 1.0)) == ["a"]
    assert placing.pods_on("node-2", state, (), 1.0) == []
    state.apply(pod("a", node_name="node-1"))  # the watch shows the Binding
    assert names(placing.pods_on("node-1", state, (), 2.0)) == ["a"]  # the cache's, once
    state.apply(pod("a"))  # (were it to go back, the entry is gone: nothing is counted twice)
    assert placing.pods_on("node-1", state, (), 3.0) == []


def test_a_pod_the_cache_has_not_seen_stays_until_it_shows_up_or_is_deleted() -> None:
    """The bind read it from the API server: its bind is over, the cache still lacks it."""
    state = ClusterState.from_objects([])
    placing = Placing()
    placing.add(parse_pod(pod("new")), "node-1", (), now=0.0)
    assert names(placing.pods_on("node-1", state, (), 1.0)) == ["new"]
    state.apply(pod("new"))
    state.remove(pod("new"))  # deleted
    assert placing.pods_on("node-1", state, (), 2.0) == []


def test_an_entry_ends_after_its_ttl_unless_its_bind_is_running() -> None:
    state = ClusterState.from_objects([pod("slow")])
    placing = Placing()
    placing.add(parse_pod(pod("slow")), "node-1", (), now=0.0)
    later = PLACING_TTL + 1
    assert names(placing.pods_on("node-1", state, {"uid-slow"}, later)) == ["slow"]
    assert placing.pods_on("node-1", state, (), later) == []
