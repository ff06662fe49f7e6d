"""ClusterState's pod indexes (bound pods by node, nominated pods by node, priorities of running
pods) follow every add, change and removal, as preemption and nominations read them."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from extender.cluster.state import ClusterState
from tests.builders import pod


def pod_on(
    name: str,
    node: str | None,
    priority: int = 0,
    nominated: str | None = None,
    phase: str = "",
    deleting: bool = False,
) -> dict[str, Any]:
    p = pod(name, node_name=node, priority=priority)
    if deleting:
        p["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    status: dict[str, Any] = {}
    if nominated:
        status["nominatedNodeName"] = nominated
    if phase:
        status["phase"] = phase
    if status:
        p["status"] = status
    return p


def expected(state: ClusterState) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[int, int]]:
    """The indexes recomputed from scratch."""
    by_node: dict[str, set[str]] = {}
    nominated: dict[str, set[str]] = {}
    priorities: dict[int, int] = {}
    for p in state.pods.values():
        if p.node_name:
            by_node.setdefault(p.node_name, set()).add(p.name)
            if not p.terminal:
                priorities[p.priority] = priorities.get(p.priority, 0) + 1
        elif p.nominated_node_name:
            nominated.setdefault(p.nominated_node_name, set()).add(p.name)
    return by_node, nominated, priorities


def actual(state: ClusterState) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[int, int]]:
    # Every indexed record is the table's current record, not a stale copy.
    for index in (state.pods_by_node, state.nominated):
        for pods in index.values():
            assert all(state.pods.get(key) is p for key, p in pods.items())
    return (
        {n: {p.name for p in pods.values()} for n, pods in state.pods_by_node.items()},
        {n: {p.name for p in pods.values()} for n, pods in state.nominated.items()},
        dict(state.bound_priorities),
    )


def test_a_pod_moves_from_nominated_to_bound_and_away() -> None:
    state = ClusterState()
    state.apply(pod_on("p", None, 5, nominated="node-1"))
    assert actual(state) == ({}, {"node-1": {"p"}}, {})
    state.apply(pod_on("p", "node-1", 5, nominated="node-1"))
    assert actual(state) == ({"node-1": {"p"}}, {}, {5: 1})
    assert state.lowest_bound_priority() == 5
    state.apply(pod_on("p", "node-1", 5, phase="Succeeded"))
    assert actual(state) == ({"node-1": {"p"}}, {}, {})
    assert state.lowest_bound_priority() is None
    state.remove(pod_on("p", "node-1"))
    assert actual(state) == ({}, {}, {})


OPS = st.lists(
    st.tuples(
        st.sampled_from(["apply", "remove", "relist"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([None, "node-1", "node-2"]),
        st.integers(-2, 2),
        st.sampled_from([None, "node-1", "node-2"]),
        st.sampled_from(["", "Running", "Failed"]),
        st.booleans(),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_the_indexes_always_equal_a_recount(ops: list[Any]) -> None:
    state = ClusterState()
    for op, name, node, priority, nominated, phase, deleting in ops:
        obj = pod_on(name, node, priority, nominated, phase, deleting)
        if op == "apply":
            state.apply(obj)
        elif op == "remove":
            state.remove(obj)
        else:
            state.replace_kind("Pod", [obj])
        assert actual(state) == expected(state)
