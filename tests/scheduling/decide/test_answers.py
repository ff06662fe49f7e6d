"""One answer per node (decide/answers.py) and the filter budget: the nodes where pods nominated
ahead keep devices are judged within the budget, before the pod's own nominated node is judged
with what its preemption is releasing (which the budget does not refuse), so a slow release
check never costs another node its answer."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.snapshot import Snapshot
from tests.builders import allocated, claim, device, device_class, exact, node, pod, reserve, resource_slice


def objects() -> list[dict[str, Any]]:
    victim_claim = claim(
        "victim-claim", allocation=allocated(("driver-a", "T", "gpu-0"), ("driver-a", "T", "gpu-1"))
    )
    reserve(victim_claim, "victim")
    victim = pod("victim", ["victim-claim"], node_name="T", priority=1)
    victim["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    p = pod("p", ["p-claim"], priority=50)
    p["status"] = {"nominatedNodeName": "T"}
    q = pod("q", ["q-claim"], priority=100)
    q["status"] = {"nominatedNodeName": "W"}
    return [
        device_class(),
        node("T"),
        node("W"),
        resource_slice("t", [device("gpu-0"), device("gpu-1")], pool="T", node="T"),
        resource_slice("w", [device("gpu-0"), device("gpu-1")], pool="W", node="W"),
        victim_claim,
        victim,
        claim("p-claim", requests=[exact(count=1)]),
        p,
        claim("q-claim", requests=[exact(count=1)]),
        q,
    ]


def test_a_slow_release_check_on_the_preemptors_node_costs_no_other_node_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    state = ClusterState.from_objects(objects())
    assert not state.problems, state.problems
    config = EngineConfig(device_preemption=True, scheduler_names=frozenset({"dra-extender-scheduler"}))
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), config, clock=lambda: now[0])
    original = Snapshot.decide

    def slow_release(self: Snapshot, claims: Any, n: Any, **kw: Any) -> Any:  # the real allocation, slow
        out = original(self, claims, n, **kw)
        if n.name == "T" and self._what_if:  # the release assessment on the preemptor's node
            now[0] += 1000.0  # it took long: past the filter budget afterwards
        return out

    monkeypatch.setattr(Snapshot, "decide", slow_release)
    result = engine.filter(state.pods[("default", "p")], ["T", "W"])
    # W (q keeps one GPU, one is left for p) is judged before T's release: both pass.
    assert result.passed == ["T", "W"], (result.passed, result.failed, result.unresolvable)
