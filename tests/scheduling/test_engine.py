"""Engine decisions under time pressure: budgets checked before every node, timeouts remembered."""

from __future__ import annotations

from extender.allocator import Features
from extender.allocator.releases import release_of
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig, NoObserver, Observer
from extender.scheduling.engine import Engine
from tests.builders import claim, device, device_class, exact, node, pod, resource_slice


class SteppingClock:
    """Frozen, or (while ``running``) one ``step`` further at every reading."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step
        self.running = False

    def __call__(self) -> float:
        if self.running:
            self.now += self.step
        return self.now


class Cuts(NoObserver):
    """Records the observer's ``filter_cut_short`` calls."""

    def __init__(self) -> None:
        self.causes: list[str] = []

    def filter_cut_short(self, cause: str) -> None:
        self.causes.append(cause)


def engine_with(
    clock: SteppingClock,
    nodes: int,
    config: EngineConfig,
    alike: bool = True,
    observer: Observer | None = None,
) -> Engine:
    """Nodes with 16 devices each (``alike``), or node-i with 16 + i (no two look alike)."""
    many = claim("many", requests=[exact(f"r{i}") for i in range(16)])  # >= 16 search steps
    objects = [device_class(), many, pod("p", ["many"])]
    for i in range(nodes):
        devices = [device(f"d{j}") for j in range(16 if alike else 16 + i)]
        objects += [node(f"node-{i}"), resource_slice(f"s{i}", devices, node=f"node-{i}", pool=f"p{i}")]
    state = ClusterState.from_objects(objects)
    return assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), config, clock=clock, observer=observer)


def test_a_node_that_timed_out_keeps_that_answer_for_a_while() -> None:
    """Before 1.36 a timeout is the node's reason (Unresolvable, until a cluster event): the
    extender does not spend the budget on that node again for a while."""
    clock = SteppingClock(2.0)
    config = EngineConfig(node_timeout=1.0, filter_budget=1e9, release=release_of(35))
    engine = engine_with(clock, 1, config)
    p = engine.state.pods[("default", "p")]
    clock.running = True
    first = engine.filter(p, ["node-0"])
    assert "timed out" in first.unresolvable["node-0"]
    clock.running = False  # the allocation would fit now, but the timeout is remembered
    assert engine.filter(p, ["node-0"]).unresolvable["node-0"] == first.unresolvable["node-0"]
    clock.now += engine.config.timeout_memo_seconds + 1
    assert engine.filter(p, ["node-0"]).passed == ["node-0"]


def test_prioritize_scores_the_other_nodes_past_a_timeout() -> None:
    """A node's timeout is the pod's error in filter (1.36+), but prioritize only loses that
    node's score: the nodes after it are still judged."""
    clock = SteppingClock(0.0)
    engine = engine_with(clock, 3, EngineConfig(node_timeout=1.0, filter_budget=1e9), alike=False)
    p = engine.state.pods[("default", "p")]
    slow = {"node-0"}
    original = engine._assessor

    def slow_first(snapshot, claims):  # type: ignore[no-untyped-def]
        assess = original(snapshot, claims)

        def each(n):  # type: ignore[no-untyped-def]
            clock.step, clock.running = (2.0, True) if n.name in slow else (0.0, False)
            try:
                return assess(n)
            finally:
                clock.running = False

        return each

    engine._assessor = slow_first  # type: ignore[method-assign]
    scores = dict(engine.prioritize(p, ["node-0", "node-1", "node-2"]))
    slow.clear()
    others = dict(engine.prioritize(p, ["node-1", "node-2"]))
    assert max(others.values()) == 10
    assert scores == {"node-0": 0, **others}


def test_without_the_filter_timeout_gate_an_allocation_has_no_limit() -> None:
    """DRASchedulerFilterTimeout off: the plugin's Filter sets no deadline, nor does the extender."""
    clock = SteppingClock(2.0)
    features = Features.parse("DRASchedulerFilterTimeout=false")
    engine = engine_with(clock, 1, EngineConfig(features=features, node_timeout=1.0, filter_budget=1e9))
    clock.running = True
    assert engine.filter(engine.state.pods[("default", "p")], ["node-0"]).passed == ["node-0"]


def test_a_timeout_fails_the_filter_from_1_36_and_the_retry_allocates_again() -> None:
    """v1.36.3 Filter (kubernetes#137607): a timeout is an error, so kube-scheduler backs the
    pod off and tries again; the retry allocates afresh (nothing remembered)."""
    clock = SteppingClock(2.0)
    cuts = Cuts()
    engine = engine_with(
        clock, 2, EngineConfig(node_timeout=1.0, filter_budget=1e9), alike=False, observer=cuts
    )
    p = engine.state.pods[("default", "p")]
    clock.running = True
    first = engine.filter(p, ["node-0", "node-1"])
    assert first.error == "node node-0: timed out trying to allocate devices"
    assert first.passed == []
    assert cuts.causes == ["node_timeout"]  # node-1 not judged after the error: not the budget
    clock.running = False
    assert engine.filter(p, ["node-0", "node-1"]).passed == ["node-0", "node-1"]
    assert cuts.causes == ["node_timeout"]


def slowed(engine: Engine, clock: SteppingClock, seconds: float) -> list[str]:
    """Every allocation the engine's filter and prioritize run takes ``seconds``; returns the
    nodes allocated for, in order."""
    original = engine._assessor
    allocated: list[str] = []

    def slow_assessor(snapshot, claims):  # type: ignore[no-untyped-def]
        assess = original(snapshot, claims)

        def each(n):  # type: ignore[no-untyped-def]
            clock.now += seconds
            allocated.append(n.name)
            return assess(n)

        return each

    engine._assessor = slow_assessor  # type: ignore[method-assign]
    return allocated


def test_the_filter_budget_is_checked_before_every_allocation() -> None:
    clock = SteppingClock(0.0)
    cuts = Cuts()
    engine = engine_with(
        clock, 5, EngineConfig(node_timeout=1e9, filter_budget=10.0), alike=False, observer=cuts
    )
    p = engine.state.pods[("default", "p")]
    slowed(engine, clock, 6.0)  # every node takes 6 s: the budget (10 s) allows two
    result = engine.filter(p, [f"node-{i}" for i in range(5)])
    assert result.passed == ["node-0", "node-1"]
    assert cuts.causes == ["budget"]
    assert sorted(result.failed) == ["node-2", "node-3", "node-4"]
    assert all("time budget" in why for why in result.failed.values())
    scores = dict(engine.prioritize(p, [f"node-{i}" for i in range(5)]))
    assert scores["node-2"] == scores["node-3"] == scores["node-4"] == 0
    clock.step, clock.running = 20.0, True  # the view's budget is gone before the first node
    explained = engine.explain(p, [f"node-{i}" for i in range(5)])
    assert all(d.timed_out and "time budget" in (d.reason or "") for d in explained.values())


def test_a_node_listed_twice_after_the_budget_ran_out_is_failed_once() -> None:
    clock = SteppingClock(0.0)
    engine = engine_with(clock, 3, EngineConfig(node_timeout=1e9, filter_budget=10.0), alike=False)
    p = engine.state.pods[("default", "p")]
    slowed(engine, clock, 11.0)  # the first node uses up the budget
    result = engine.filter(p, ["node-0", "node-1", "node-1", "node-2"])
    assert result.passed == ["node-0"]
    assert sorted(result.failed) == ["node-1", "node-2"] and not result.unresolvable


def test_look_alike_nodes_share_one_allocation_within_the_budget() -> None:
    clock = SteppingClock(0.0)
    engine = engine_with(clock, 5, EngineConfig(node_timeout=1e9, filter_budget=10.0))
    p = engine.state.pods[("default", "p")]
    allocated = slowed(engine, clock, 6.0)
    names = [f"node-{i}" for i in range(5)]
    assert engine.filter(p, names).passed == names
    assert len(allocated) == 1
    assert engine.filter(p, [*reversed(names), "node-x"]).unresolvable == {
        "node-x": "node node-x is not known to the DRA extender"
    }
    assert len(allocated) == 2  # one allocation per call and group (answers come from the memo)


def test_a_node_whose_labels_change_is_judged_again_without_a_claim_change() -> None:
    # Node changes make no new snapshot: the per-node tables must notice the new Node record
    # (a network-attached pool selects nodes by label).
    rack = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
    }
    objects = [
        device_class(),
        node("node-1"),
        resource_slice("s", [device("d0")], nodeSelector=rack),
        claim("c"),
        pod("p", ["c"]),
        claim("c2"),
        pod("p2", ["c2"]),
    ]
    state = ClusterState.from_objects(objects)
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment())
    assert engine.filter(state.pods[("default", "p")], ["node-1"]).passed == []
    state.apply(node("node-1", rack="r1"))
    assert engine.filter(state.pods[("default", "p")], ["node-1"]).passed == ["node-1"]
    # And a pod asking alike gets the shared answer for the new record, not the old one.
    state.apply(node("node-1"))
    assert engine.filter(state.pods[("default", "p2")], ["node-1"]).passed == []


def test_a_relabelled_node_leaves_its_group_of_look_alike_nodes() -> None:
    """Nodes are grouped by what they can allocate from; a label change may move a node out."""
    rack = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
    }
    objects = [
        device_class(),
        resource_slice("s", [device("d0")], nodeSelector=rack),
        claim("c"),
        pod("p", ["c"]),
    ]
    objects += [node(f"node-{i}", rack="r1") for i in range(3)]
    state = ClusterState.from_objects(objects)
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment())
    names = ["node-0", "node-1", "node-2"]
    assert engine.filter(state.pods[("default", "p")], names).passed == names
    state.apply(node("node-1", rack="r2"))
    assert engine.filter(state.pods[("default", "p")], names).passed == ["node-0", "node-2"]
    assert dict(engine.prioritize(state.pods[("default", "p")], names))["node-1"] == 0
    state.remove(node("node-2"))
    result = engine.filter(state.pods[("default", "p")], names)
    assert result.passed == ["node-0"]
    assert result.unresolvable["node-2"] == "node node-2 is not known to the DRA extender"


def test_a_timeout_remembered_for_one_pod_leaves_other_pods_grouped() -> None:
    clock = SteppingClock(2.0)
    engine = engine_with(clock, 5, EngineConfig(node_timeout=1.0, filter_budget=1e9))
    engine.state.apply(claim("many2", requests=[exact(f"r{i}") for i in range(16)]))
    engine.state.apply(pod("p2", ["many2"]))
    names = [f"node-{i}" for i in range(5)]
    clock.running = True
    first = engine.filter(engine.state.pods[("default", "p")], names)
    assert all("timed out" in why for why in first.unresolvable.values())
    clock.running = False
    allocated = slowed(engine, clock, 0.0)
    assert engine.filter(engine.state.pods[("default", "p2")], names).passed == names
    assert len(allocated) == 1  # look-alike nodes: one allocation, though p's timeouts are remembered
