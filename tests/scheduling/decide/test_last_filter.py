"""prioritize right after filter, in the same scheduling cycle, scores with the filter's answers
for the nodes it passed, as the in-tree Score reads what Filter found in that cycle
(dynamicresources.go, Score: ``state.nodeAllocations``, v1.34.0-v1.37.0), even when binds
changed the cache in between; another pod, other names or changed claims decide afresh
(extender/scheduling/decide/last_filter.py). Either way its scores are those of an engine that
never filtered, on the cache as that filter saw it (the oracle)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.engine import Engine
from tests.builders import allocated, claim, device, device_class, node, pod, resource_slice

NODES = [f"node-{i}" for i in range(5)]


def objects() -> list[dict[str, Any]]:
    """Five nodes of 4 devices; node-i has i of them taken (binpacking scores differ)."""
    out: list[dict[str, Any]] = [
        device_class(),
        claim("mine"),
        pod("p", ["mine"]),
        claim("yours"),
        pod("q", ["yours"]),
    ]
    for i, name in enumerate(NODES):
        out += [
            node(name),
            resource_slice(f"s{i}", [device(f"d{j}") for j in range(4)], node=name, pool=name),
        ]
        for j in range(min(i, 4)):
            out.append(claim(f"held-{i}-{j}", allocation=allocated(("driver-a", name, f"d{j}"))))
    return out


def engine_of(objs: list[dict[str, Any]]) -> Engine:
    state = ClusterState.from_objects(objs)
    return assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), EngineConfig())


def take_a_device(engine: Engine) -> None:
    engine.state.apply(claim("late", allocation=allocated(("driver-a", "node-1", "d3"))))


def relabel_a_node(engine: Engine) -> None:
    engine.state.apply(node("node-2", zone="b"))


def change_the_claim(engine: Engine) -> None:
    engine.state.apply(claim("mine", resourceVersion="2"))


#: name -> (what happens between filter and prioritize, prioritize's names (None: what filter
#: passed), prioritize's pod, whether the filter's answers are reused).
CASES: dict[str, tuple[Callable[[Engine], None] | None, list[str] | None, str, bool]] = {
    "nothing: the same pod, names and snapshot": (None, None, "p", True),
    "fewer names than filter passed": (None, NODES[:2], "p", False),
    "another pod": (None, None, "q", False),
    "a device taken in between: the cycle's answers still": (take_a_device, None, "p", True),
    "a Node record changed in between: the cycle's answers still": (relabel_a_node, None, "p", True),
    "the pod's claim changed in between": (change_the_claim, None, "p", False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_prioritize_after_filter_scores_as_a_fresh_engine(case: str) -> None:
    between, names, who, reused = CASES[case]
    engine = engine_of(objects())
    passed = engine.filter(engine.state.pods[("default", "p")], NODES).passed
    assert passed == NODES[:4]  # node-4 is full
    if between is not None:
        between(engine)
    asked = names if names is not None else passed
    target = engine.state.pods[("default", who)]
    snapshot = engine.snapshots.current()
    claims = engine.snapshots.claims_of(snapshot, target)
    memo = engine._last_filter
    assert memo is not None
    assert (memo.for_prioritize(target.uid, claims.key(), asked) is not None) is reused

    oracle = engine_of(objects())
    if between is not None and not reused:  # deciding afresh sees the change
        between(oracle)
    assert engine.prioritize(target, asked) == oracle.prioritize(oracle.state.pods[("default", who)], asked)


def test_a_device_taken_between_filter_and_prioritize_does_not_move_the_cycles_scores() -> None:
    engine = engine_of(objects())
    p = engine.state.pods[("default", "p")]
    passed = engine.filter(p, NODES).passed
    cycle = dict(engine_of(objects()).prioritize(p, passed))
    fresh = engine_of(objects())
    take_a_device(fresh)
    assert dict(fresh.prioritize(fresh.state.pods[("default", "p")], passed)) != cycle  # it would
    take_a_device(engine)
    assert dict(engine.prioritize(p, passed)) == cycle


def test_a_filter_with_the_nodes_sent_remembers_nothing() -> None:
    engine = engine_of(objects())
    p = engine.state.pods[("default", "p")]
    engine.filter(p, NODES, {name: engine.state.nodes[name] for name in NODES})
    assert engine._last_filter is None


def test_a_filter_that_passes_nothing_remembers_nothing() -> None:
    engine = engine_of(objects())
    engine.filter(engine.state.pods[("default", "p")], NODES[4:])
    assert engine._last_filter is None
