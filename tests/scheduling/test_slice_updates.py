"""Filter across slice changes: the engine re-indexes only the pools a change touches and keeps
the answers of nodes that cannot see them; its answers stay those of an engine built afresh."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.allocator.search import Allocator
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.decide.answers import FilterResult
from extender.scheduling.decide.claim_hints import without_hint
from extender.scheduling.engine import Engine
from tests.builders import allocated, attrs, claim, device, device_class, exact, node, pod, resource_slice

CEL = CelEnvironment()
BIG = 'device.attributes["driver-a"].model == "big"'
ZONE_A = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
NODES = {"n1": "a", "n2": "b", "n3": "a"}


def engine_for(objects: list[dict[str, Any]]) -> Engine:
    return assemble(ClusterState.from_objects(objects), MemoryAPI(MemoryStore()), CEL)


def gpus(name: str, *models: str, **spec: Any) -> dict[str, Any]:
    """A node-local slice (or, with ``spec``, any other) of devices with these models."""
    devices = [device(f"g{i}", attributes=attrs(model=m, serial=f"{name}-{i}")) for i, m in enumerate(models)]
    return resource_slice(f"{name}-gpus", devices, **{"pool": name, "node": name, **spec})


def base() -> list[dict[str, Any]]:
    return [
        device_class(),
        *(node(n, zone=z) for n, z in NODES.items()),
        *(gpus(n, "big", "small") for n in NODES),
        claim("big", requests=[exact(selectors=[BIG])]),
        pod("p", ["big"]),
    ]


def answer(engine: Engine, name: str = "p") -> tuple[list[str], dict[str, str]]:
    result: FilterResult = engine.filter(engine.state.pods[("default", name)], sorted(NODES))
    assert not result.error and not result.failed, result
    return sorted(result.passed), result.unresolvable


@pytest.fixture
def allocations(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The nodes the allocator runs for, in order (what the memo did not answer)."""
    seen: list[str] = []
    original = Allocator.allocate

    def spy(self: Allocator, node: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(node.name)
        return original(self, node, *args, **kwargs)

    monkeypatch.setattr(Allocator, "allocate", spy)
    yield seen


def test_a_device_change_in_an_updated_slice_is_seen_by_filter() -> None:
    engine = engine_for(base())
    assert answer(engine)[0] == ["n1", "n2", "n3"]
    engine.state.apply(gpus("n2", "small", "small"))
    passed, unresolvable = answer(engine)
    assert passed == ["n1", "n3"] and "n2" in unresolvable
    engine.state.apply(gpus("n2", "small", "big"))
    assert answer(engine)[0] == ["n1", "n2", "n3"]


def test_after_a_node_local_slice_change_only_that_node_is_judged_again(allocations: list[str]) -> None:
    objects = base()
    # Nodes that do not look alike (their own model names), so each has an answer of its own.
    objects[4:7] = [gpus(n, "big", f"other-{n}") for n in NODES]
    engine = engine_for(objects)
    assert answer(engine)[0] == ["n1", "n2", "n3"] and sorted(allocations) == ["n1", "n2", "n3"]
    allocations.clear()
    engine.state.apply(gpus("n2", "small", "other-n2"))
    assert answer(engine)[0] == ["n1", "n3"]
    assert allocations == ["n2"]  # n1 and n3 cannot see pool n2: their answers are kept
    allocations.clear()
    engine.state.apply(gpus("n2", "big", "other-n2"))  # back as it was: the answer is remembered
    assert answer(engine)[0] == ["n1", "n2", "n3"] and allocations == []


def test_a_slice_any_node_may_see_judges_every_node_again(allocations: list[str]) -> None:
    objects = base()
    objects[4:7] = [gpus(n, "small", f"other-{n}") for n in NODES]
    objects.append(gpus("shared", "small", node=None, nodeSelector=ZONE_A))
    engine = engine_for(objects)
    assert answer(engine)[0] == []
    allocations.clear()
    engine.state.apply(gpus("shared", "big", node=None, nodeSelector=ZONE_A))
    assert answer(engine)[0] == ["n1", "n3"] and sorted(allocations) == ["n1", "n2", "n3"]


def test_a_class_change_rebuilds_and_judges_every_node_again(allocations: list[str]) -> None:
    objects = base()
    objects[4:7] = [gpus(n, "big", f"other-{n}") for n in NODES]
    engine = engine_for(objects)
    assert answer(engine)[0] == ["n1", "n2", "n3"]
    allocations.clear()
    engine.state.apply(device_class(expression='device.driver == "other"'))
    assert answer(engine)[0] == [] and sorted(allocations) == ["n1", "n2", "n3"]


# --- randomized: an engine kept across slice changes answers as one built afresh ------------------

CLAIMS = [
    claim("one"),
    claim("big", requests=[exact(selectors=[BIG])]),
    claim("two-big", requests=[exact(count=2, selectors=[BIG])]),
    claim("all", requests=[exact(mode="All")]),
]
slice_scope = st.sampled_from(["n1", "n2", "n3", "zone-a", "all"])


@st.composite
def slice_changes(draw: Any) -> list[tuple[str, dict[str, Any] | None]]:
    """Slice changes by name (None: deleted), and devices taken and given back (a claim
    "held", allocated or deleted) in between."""
    out: list[tuple[str, dict[str, Any] | None]] = []
    for _ in range(draw(st.integers(1, 8))):
        name = draw(st.sampled_from(["s1", "s2", "s3", "s4", "held"]))
        if name == "held":
            pool, dev = draw(st.sampled_from(["p1", "p2", "p3"])), draw(st.sampled_from(["g0", "g1"]))
            held = claim("held", allocation=allocated(("driver-a", pool, dev)))
            out.append((name, None if draw(st.booleans()) else held))
            continue
        if draw(st.integers(0, 4)) == 0:
            out.append((name, None))
            continue
        scope = draw(slice_scope)
        spec: dict[str, Any] = {}
        if scope == "zone-a":
            spec["nodeSelector"] = ZONE_A
        elif scope == "all":
            spec["allNodes"] = True
        models = draw(st.lists(st.sampled_from(["big", "small"]), max_size=3))
        raw = gpus(name, *models, node=scope if scope in NODES else None, **spec)
        raw["metadata"]["name"] = name
        raw["spec"]["pool"] = {
            "name": draw(st.sampled_from(["p1", "p2", "p3"])),
            "generation": draw(st.integers(1, 2)),
            "resourceSliceCount": draw(st.integers(1, 2)),
        }
        out.append((name, raw))
    return out


def answers(engine: Engine) -> list[Any]:
    """Filter's decisions, without claim hints: those follow slice changes with a lag by design
    (claim_hints.REBUILD_AFTER_COSTS, on the real clock), so a kept engine's hints may still be
    a fresh one's older ones; their own tests cover them."""
    out = []
    for c in CLAIMS:
        result = engine.filter(engine.state.pods[("default", f"pod-{c['metadata']['name']}")], sorted(NODES))
        unresolvable = {node: without_hint(why) for node, why in result.unresolvable.items()}
        failed = {node: without_hint(why) for node, why in result.failed.items()}
        out.append((sorted(result.passed), unresolvable, failed, without_hint(result.error)))
    return out


@settings(max_examples=60, deadline=None)
@given(slice_changes())
def test_an_engine_kept_across_slice_changes_answers_as_a_fresh_one(
    changes: list[tuple[str, dict[str, Any] | None]],
) -> None:
    objects: list[dict[str, Any]] = [
        device_class(),
        *(node(n, zone=z) for n, z in NODES.items()),
        *CLAIMS,
        *(pod(f"pod-{c['metadata']['name']}", [c["metadata"]["name"]]) for c in CLAIMS),
    ]
    current: dict[str, dict[str, Any]] = {}
    kept = engine_for(objects)
    answers(kept)
    for name, raw in changes:
        if raw is None:
            current.pop(name, None)
            kind = "ResourceClaim" if name == "held" else "ResourceSlice"
            kept.state.remove({"kind": kind, "metadata": {"name": name, "namespace": "default"}})
        else:
            current[name] = raw
            kept.state.apply(copy.deepcopy(raw))
        fresh = engine_for([*objects, *copy.deepcopy(list(current.values()))])
        assert answers(kept) == answers(fresh)
