"""prioritize with ``score_tie_break`` through the engine (engine.py passes EngineConfig's setting
to decide/scores.py): a prioritized list's tie among the nodes that give its first choice is
broken toward the node left with no GPU stranded; off, the scores are as they were."""

from __future__ import annotations

import pytest

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from tests.builders import (
    allocated,
    claim,
    device,
    device_class,
    exact,
    first_available,
    node,
    pod,
    resource_slice,
)


def gpu_node(name: str, held: int) -> list[dict[str, object]]:
    """8 devices, the first ``held`` of them allocated to a claim of their own."""
    devices = [device(f"{name}-d{i}") for i in range(8)]
    holding = allocated(*[("driver-a", name, f"{name}-d{i}") for i in range(held)])
    return [
        node(name),
        resource_slice(name, devices, node=name, pool=name),
        claim(f"{name}-held", allocation=holding),
    ]


# (case, --score-tie-break, scores of: 8 free, 4 free, 2 free)
CASES = [
    ("off: both nodes that give 4 score 10", "none", {"empty": 10, "half": 10, "two-left": 8}),
    (
        "on: the node left with 0 free keeps 10, the one left with 4 gets 9",
        "fragmentation",
        {"empty": 9, "half": 10, "two-left": 8},
    ),
]


@pytest.mark.parametrize(("case", "tie_break", "expected"), CASES, ids=[c[0] for c in CASES])
def test_prioritize_breaks_a_prioritized_lists_tie_only_when_asked(
    case: str, tie_break: str, expected: dict[str, int]
) -> None:
    wants = claim("wants", requests=[first_available("gpu", exact("four", count=4), exact("two", count=2))])
    objects = [
        device_class(),
        *gpu_node("empty", 0),
        *gpu_node("half", 4),
        *gpu_node("two-left", 6),
        wants,
        pod("p", ["wants"]),
    ]
    state = ClusterState.from_objects(objects)
    config = EngineConfig(score_tie_break=tie_break)
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), config)
    p = state.pods[("default", "p")]
    names = ["empty", "half", "two-left"]
    assert engine.filter(p, names).passed == names  # pass/fail as without it
    assert dict(engine.prioritize(p, names)) == expected
