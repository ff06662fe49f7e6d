"""Memoized assessments (one allocation shared by look-alike nodes) equal full decisions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide import projection
from extender.scheduling.decide import snapshot as snapshot_module
from extender.scheduling.decide.claim_hints import without_hint
from extender.scheduling.decide.snapshot import Snapshot
from tests.builders import allocated, attrs, claim, device, device_class, exact, node, pod, resource_slice

CEL = CelEnvironment()
NUMA = 'device.attributes["driver-a"].numa'

CLAIMS = [
    claim("one"),
    claim("two-same-numa", requests=[exact(count=2)], constraints=[{"matchAttribute": "driver-a/numa"}]),
    claim("big-model", requests=[exact(selectors=['device.attributes["driver-a"].model == "big"'])]),
    claim("pair", requests=[exact("a"), exact("b")], constraints=[{"distinctAttribute": "driver-a/numa"}]),
    claim("all", requests=[exact(mode="All", selectors=['device.attributes["driver-a"].model == "small"'])]),
    # DRADerivedAttributes: what the expression reads tells nodes apart, not the derived name.
    claim(
        "derived-same-numa",
        requests=[exact(count=2, derivedAttributes=[{"name": "derived/n", "expression": NUMA}])],
        constraints=[{"matchAttribute": "derived/n"}],
    ),
]

device_spec = st.tuples(
    st.sampled_from(["big", "small"]), st.integers(0, 1), st.booleans(), st.integers(0, 10**6)
)


@st.composite
def clusters(draw: Any) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [device_class(), *CLAIMS]
    held: list[tuple[str, str, str]] = []
    for n in range(draw(st.integers(1, 6))):
        name = f"node-{n}"
        objects.append(node(name, zone=draw(st.sampled_from(["a", "b"]))))
        devices = []
        for i, (model, numa, used, serial) in enumerate(draw(st.lists(device_spec, min_size=0, max_size=4))):
            devices.append(device(f"d{i}", attributes=attrs(model=model, numa=numa, serial=f"s{serial}")))
            if used:
                held.append(("driver-a", name, f"d{i}"))
        objects.append(resource_slice(f"{name}-slice", devices, pool=name, node=name))
    if held:
        objects.append(claim("held", allocation=allocated(*held)))
    for c in CLAIMS:
        objects.append(pod(f"pod-{c['metadata']['name']}", [c["metadata"]["name"]]))
        # A look-alike pod: its claim has the same spec, so a node's "does not fit" is the
        # first pod's, said with its own claim's name (Snapshot._failures).
        twin = {**c, "metadata": {**c["metadata"], "name": f"{c['metadata']['name']}-twin"}}
        objects += [twin, pod(f"pod-{c['metadata']['name']}-twin", [twin["metadata"]["name"]])]
    return objects


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_assess_equals_decide(objects: list[dict[str, Any]]) -> None:
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(derived_attributes=True), CEL)
    for p in (p for p in state.pods.values() if not p.node_name):
        pod_claims = snapshot.claims_of(p)
        assess = snapshot.assessor(pod_claims)
        for n in state.nodes.values():
            full = snapshot.decide(pod_claims, n)
            fast = assess(n)
            assert (fast.fits, fast.reason, fast.error) == (full.fits, full.reason, full.error), (
                p.name,
                n.name,
            )
            if full.fits:
                assert fast.allocated == sum(len(a["devices"]["results"]) for a in full.allocations.values())


#: Snapshot._node_in_use keys a node's devices in use per device (dense) or by held position
#: (sparse, for nodes with many more devices than the cluster holds): both must group alike.
IN_USE_KEYS = {"dense": 10**9, "sparse": 0}


@pytest.mark.parametrize("in_use_key", IN_USE_KEYS)
@settings(max_examples=30, deadline=None)
@given(clusters(), st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["a", "b"])), max_size=3))
def test_engine_filter_and_prioritize_by_node_groups_equal_decide(
    in_use_key: str, objects: list[dict[str, Any]], relabels: list[tuple[int, str]]
) -> None:
    """Engine.filter and prioritize judge look-alike nodes once (Snapshot.node_groups): the
    answer per node is still decide's, also after Node label changes (no new snapshot)."""
    factor = snapshot_module.SPARSE_IN_USE_FACTOR
    snapshot_module.SPARSE_IN_USE_FACTOR = IN_USE_KEYS[in_use_key]
    try:
        check_filter_and_prioritize_by_node_groups(objects, relabels)
    finally:
        snapshot_module.SPARSE_IN_USE_FACTOR = factor


def check_filter_and_prioritize_by_node_groups(
    objects: list[dict[str, Any]], relabels: list[tuple[int, str]]
) -> None:
    zone_a = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    }
    shared = [device("z0", attributes=attrs(model="big", numa=0, serial="z"))]
    objects = [*objects, resource_slice("zone-a", shared, pool="zone-a", nodeSelector=zone_a)]
    state = ClusterState.from_objects(objects)
    engine = assemble(state, MemoryAPI(MemoryStore()), CEL)
    pods = [p for p in state.pods.values() if not p.node_name]
    names = [*sorted(state.nodes), "node-missing"]
    for step in range(len(relabels) + 1):
        if step:
            n, zone = relabels[step - 1]
            state.apply(node(f"node-{n}", zone=zone))
            names.append(f"node-{n}")  # a node may be listed twice
        snapshot = engine.snapshot()
        for p in pods:
            pod_claims = snapshot.claims_of(p)
            result = engine.filter(p, names)
            scores = dict(engine.prioritize(p, names))
            decided = {n: snapshot.decide(pod_claims, state.nodes[n]) for n in names if n in state.nodes}
            # An error is the pod's answer: the first node's in the order sent, and nothing else
            # (a claim hint may follow it, as it may follow every reason: decisions are compared).
            first_error = next((d.error for n in names if (d := decided.get(n)) and d.error), None)
            assert without_hint(result.error) == (first_error or "")
            if first_error:
                assert not result.passed and not result.unresolvable and not result.failed
                continue
            for name in names:
                if name not in state.nodes:
                    assert name in result.unresolvable
                    continue
                full = decided[name]
                assert (name in result.passed) == full.fits, (p.name, name)
                reason = result.unresolvable.get(name)
                assert (reason and without_hint(reason)) == (None if full.fits else full.reason), (
                    p.name,
                    name,
                )
                assert full.fits or scores[name] == 0


def test_look_alike_nodes_share_one_allocation() -> None:
    objects: list[dict[str, Any]] = [device_class(), claim("one"), pod("p", ["one"])]
    for n in range(20):
        objects.append(node(f"node-{n}"))
        devices = [device(f"d{i}", attributes=attrs(model="big", serial=f"{n}-{i}")) for i in range(4)]
        objects.append(resource_slice(f"s{n}", devices, pool=f"node-{n}", node=f"node-{n}"))
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(), CEL)
    assess = snapshot.assessor(snapshot.claims_of(state.pods[("default", "p")]))
    assert all(assess(n).fits for n in state.nodes.values())
    answers = [a for per_claims in snapshot._assessments.values() for a in per_claims.values()]
    assert len(answers) == 1  # serials differ, but no selector reads them


def test_shared_devices_of_different_capacity_do_not_look_alike() -> None:
    """Without capacity requests a share still consumes the policy's default: capacity matters."""
    objects: list[dict[str, Any]] = [device_class(), claim("one"), pod("p", ["one"])]
    for n, size in (("node-small", "10Gi"), ("node-big", "20Gi")):
        policy = {"value": size, "requestPolicy": {"default": "5Gi"}}
        shared = device("d0", capacity={"memory": policy}, allowMultipleAllocations=True)
        objects += [node(n), resource_slice(f"s-{n}", [shared], pool=n, node=n)]
        held = allocated(("driver-a", n, "d0"), share=f"share-{n}", consumed={"memory": "6Gi"})
        objects.append(claim(f"held-{n}", allocation=held))
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(), CEL)
    pod_claims = snapshot.claims_of(state.pods[("default", "p")])
    assess = snapshot.assessor(pod_claims)
    for n in ("node-small", "node-big", "node-small"):
        assert (
            assess(state.nodes[n]).fits
            == snapshot.decide(pod_claims, state.nodes[n]).fits
            == (n == "node-big")
        )


def test_a_timed_out_assessment_is_not_remembered() -> None:
    many = claim("many", requests=[exact(f"r{i}") for i in range(16)])  # >= 16 search steps
    objects = [device_class(), many, pod("p", ["many"]), node("node-1")]
    objects.append(resource_slice("s", [device(f"d{i}") for i in range(16)], node="node-1"))
    state = ClusterState.from_objects(objects)
    late = [True]
    calls = [0]

    def clock() -> float:
        """The first call sets the deadline; while ``late``, every later reading is past it."""
        calls[0] += 1
        return 100.0 if late[0] and calls[0] > 1 else 0.0

    snapshot = Snapshot(state, Features(), CEL, clock=clock)
    assess = snapshot.assessor(snapshot.claims_of(state.pods[("default", "p")]), timeout=1.0)
    first = assess(state.nodes["node-1"])
    # 1.36+ (the default): an error for the pod, naming the node (kubernetes#137607).
    assert not first.fits and first.error == "node node-1: timed out trying to allocate devices"
    late[0] = False
    assert assess(state.nodes["node-1"]).fits


@pytest.mark.parametrize(("limit", "carried"), [(100, True), (0, False)])
def test_memo_tables_are_carried_over_only_while_small(
    monkeypatch: pytest.MonkeyPatch, limit: int, carried: bool
) -> None:
    monkeypatch.setattr(snapshot_module, "MAX_CARRIED_ENTRIES", limit)
    objects = [device_class(), claim("one"), pod("p", ["one"]), node("node-1")]
    objects.append(resource_slice("s", [device("d0"), device("d1")], node="node-1"))
    state = ClusterState.from_objects(objects)
    first = Snapshot(state, Features(), CEL)
    assert first.assessor(first.claims_of(state.pods[("default", "p")]))(state.nodes["node-1"]).fits
    second = Snapshot(state, Features(), CEL, inventory=first.inventory, previous=first, changed=set())
    assert (second._assessments is first._assessments) == carried
    assert (second._projections is first._projections) == carried


def test_assessments_stay_right_across_snapshots_as_devices_change_hands(tmp_path: Any) -> None:
    """Carried-over memo and per-node keys (Snapshot(previous=...)) never give a stale answer."""
    import asyncio

    import yaml

    from extender.service.runtime import ServeConfig, build_embedded

    objects: list[dict[str, Any]] = [device_class()]
    for n in range(6):
        objects.append(node(f"node-{n}"))
        devices = [
            device(
                f"d{i}", attributes=attrs(model="big" if i % 2 else "small", numa=i // 2, serial=f"{n}{i}")
            )
            for i in range(4)
        ]
        objects.append(resource_slice(f"s{n}", devices, pool=f"node-{n}", node=f"node-{n}"))
    for i in range(16):
        objects.append(
            claim(
                f"c{i}",
                requests=[
                    exact(selectors=['device.attributes["driver-a"].model == "big"'] if i % 3 == 0 else None)
                ],
            )
        )
        objects.append(pod(f"p{i}", [f"c{i}"]))
    objects.append(
        claim("pair", requests=[exact(count=2)], constraints=[{"matchAttribute": "driver-a/numa"}])
    )
    objects.append(pod("pair-pod", ["pair"]))
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    service, _store = build_embedded([str(path)], ServeConfig())
    engine = service.engine
    names = sorted(engine.state.nodes)
    for i in range(16):
        snapshot = engine.snapshot()
        for p in ("pair-pod", f"p{(i + 1) % 16}"):
            pod_record = engine.state.pods[("default", p)]
            if pod_record.node_name:
                continue
            claims = snapshot.claims_of(pod_record)
            assess = snapshot.assessor(claims)
            for node_name in names:
                full = snapshot.decide(claims, engine.state.nodes[node_name])
                fast = assess(engine.state.nodes[node_name])
                assert (fast.fits, fast.reason, fast.error) == (full.fits, full.reason, full.error), (
                    i,
                    p,
                    node_name,
                )
        asyncio.run(engine.bind("default", f"p{i}", f"uid-p{i}", names[i % len(names)]))


def test_what_is_remembered_of_deleted_claims_goes_away(tmp_path: Any) -> None:
    """Pods come and go (create, filter, bind, delete): the memo keeps nothing of the gone ones."""
    import asyncio

    import yaml

    from extender.cluster.owner_gc import release_and_delete
    from extender.service.runtime import ServeConfig, build_embedded

    objects: list[dict[str, Any]] = [device_class()]
    for n in range(4):
        objects.append(node(f"node-{n}"))
        devices = [device(f"d{i}", attributes=attrs(model="big", serial=f"{n}{i}")) for i in range(2)]
        objects.append(resource_slice(f"s{n}", devices, pool=f"node-{n}", node=f"node-{n}"))
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    service, store = build_embedded([str(path)], ServeConfig())
    engine = service.engine
    names = sorted(engine.state.nodes)

    async def cycle(i: int) -> None:
        store.create(claim(f"c{i}"))
        created = store.create(pod(f"p{i}", [f"c{i}"]))
        p = engine.state.pods[("default", f"p{i}")]
        passed = engine.filter(p, names).passed
        remembered.append(sum(len(answers) for answers in engine.snapshot()._assessments.values()))
        if passed:
            best = max(engine.prioritize(p, passed), key=lambda s: s[1])[0]
            assert await engine.bind("default", f"p{i}", created["metadata"]["uid"], best) == ""
        if i >= 6:  # 6 of the 8 devices stay taken: most nodes answer "does not fit" to a pod
            old = i - 6
            uid = store.get("Pod", "default", f"p{old}")["metadata"]["uid"]
            store.delete("Pod", "default", f"p{old}")
            release_and_delete(store, "default", f"c{old}", uid)

    sizes = []
    remembered: list[int] = []
    for i in range(60):
        asyncio.run(cycle(i))
        snapshot = engine.snapshot()
        sizes.append((len(snapshot._claims_ids), len(snapshot._claim_refs), len(snapshot._assessments)))
    assert max(sizes[20:]) <= (20, 10, 20), sizes  # bounded by the live claims, not by all seen
    assert max(remembered) > 1  # answers were remembered (the bound is not trivial)


def test_specs_remembered_past_their_claims_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pods whose claims all differ (no two share answers) keep at most MAX_SPEC_KEYS specs."""
    monkeypatch.setattr(snapshot_module, "MAX_SPEC_KEYS", 2)
    objects: list[dict[str, Any]] = [device_class(), node("node-1")]
    objects.append(resource_slice("s", [device("d0", attributes=attrs(serial="s0"))], node="node-1"))
    for i in range(5):
        objects.append(
            claim(f"c{i}", requests=[exact(selectors=[f'device.attributes["driver-a"].serial != "x{i}"'])])
        )
        objects.append(pod(f"p{i}", [f"c{i}"]))
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(), CEL)
    for _ in range(2):
        for i in range(5):
            claims = snapshot.claims_of(state.pods[("default", f"p{i}")])
            assert snapshot.assessor(claims)(state.nodes["node-1"]).fits
    assert len(snapshot._spec_keys) == 2
    assert len(snapshot._claims_ids) <= 5 + 2  # each pod's own key, and two specs


def test_nodes_whose_devices_differ_only_in_what_a_derived_attribute_reads_are_told_apart() -> None:
    """node-0's values 1, 2 never match; node-1's 3, 3 do. The derived name is no device
    attribute, so only the expression's reads can tell the nodes apart."""
    objects: list[dict[str, Any]] = [device_class()]
    for name, values in (("node-0", [1, 2]), ("node-1", [3, 3])):
        objects.append(node(name))
        devices = [device(f"d{i}", attributes=attrs(v=v)) for i, v in enumerate(values)]
        objects.append(resource_slice(f"{name}-s", devices, pool=name, node=name))
    derived = [{"name": "derived/x", "expression": 'device.attributes["driver-a"].v'}]
    objects.append(
        claim(
            "c",
            requests=[exact(count=2, derivedAttributes=derived)],
            constraints=[{"matchAttribute": "derived/x"}],
        )
    )
    objects.append(pod("p", ["c"]))
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(derived_attributes=True), CEL)
    pod_claims = snapshot.claims_of(state.pods[("default", "p")])
    assess = snapshot.assessor(pod_claims)
    assert [assess(n).fits for n in state.nodes.values()] == [False, True]
    groups = snapshot.node_groups(pod_claims, list(state.nodes))
    assert groups is not None and groups[0] != groups[1]


def _two_kinds_of_nodes() -> list[dict[str, Any]]:
    """node-big-i and node-small-i, one device each, told apart by the model only."""
    objects: list[dict[str, Any]] = []
    for model in ("big", "small"):
        for i in range(3):
            name = f"node-{model}-{i}"
            objects.append(node(name))
            devices = [device("d0", attributes=attrs(model=model))]
            objects.append(resource_slice(f"s-{name}", devices, pool=name, node=name))
    return objects


def test_pods_asking_for_the_same_devices_share_one_projection(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real = projection.claim_projection  # the function snapshot.py calls by this name

    def counted(*args: Any) -> Any:
        made.append(1)
        return real(*args)

    monkeypatch.setattr(snapshot_module, "claim_projection", counted)
    objects = [device_class(), *_two_kinds_of_nodes()]
    objects += [claim("one"), pod("p", ["one"]), claim("two"), pod("q", ["two"])]
    objects += [claim("other", requests=[exact(selectors=['device.attributes["driver-a"].model == "big"'])])]
    objects += [pod("r", ["other"])]
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(), CEL)
    names = sorted(state.nodes)
    claims = {p: snapshot.claims_of(state.pods[("default", p)]) for p in "pqr"}
    groups = {p: snapshot.node_groups(c, names) for p, c in claims.items()}
    assert len(made) == 2  # p's and q's specs are equal; r's selector reads the model
    assert snapshot._projections[claims["p"].key()] is snapshot._projections[claims["q"].key()]
    assert groups["p"] == groups["q"] and groups["p"] is not None and len(set(groups["p"])) == 1
    assert groups["r"] is not None and len(set(groups["r"])) == 2  # big and small told apart


#: Selectors and whether the projection reads the device's CEL view (the driver and
#: allowMultipleAllocations it has from the device itself).
VIEW_READS = {
    "no selector": ([], False),
    "the driver": (['device.driver == "driver-a"'], False),
    "allowMultipleAllocations": (["!device.allowMultipleAllocations"], False),
    "an attribute": (['device.attributes["driver-a"].version != ""'], True),
}


@pytest.mark.parametrize("case", VIEW_READS)
def test_a_projection_builds_cel_views_only_when_selectors_read_them_and_tells_unreadable_devices_apart(
    case: str,
) -> None:
    selectors, reads_view = VIEW_READS[case]
    objects: list[dict[str, Any]] = [device_class()]
    for name, version in (("node-a", "1.0.0"), ("node-b", "1.0.0"), ("node-bad", "not-a-version")):
        objects.append(node(name))
        devices = [device("d0", attributes=attrs(version=("version", version)))]
        objects.append(resource_slice(f"s-{name}", devices, pool=name, node=name))
    objects += [claim("one", requests=[exact(selectors=selectors)]), pod("p", ["one"])]
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(), CEL)
    groups = snapshot.node_groups(
        snapshot.claims_of(state.pods[("default", "p")]), ["node-a", "node-b", "node-bad"]
    )
    assert groups is not None and groups[0] == groups[1] != groups[2]
    views = {s.node_name: s.devices[0]._cel is not None for s in state.slices.values()}
    # The unreadable one is converted to learn why (every expression fails on it).
    assert views == {"node-a": reads_view, "node-b": reads_view, "node-bad": True}


def test_a_changed_device_class_is_never_served_a_stale_projection() -> None:
    """The class's selector is part of what a projection reads: after the class changes, a pod
    with the same spec as one filtered before is judged on the new selector."""
    objects = [device_class(expression="true"), *_two_kinds_of_nodes()]
    objects += [claim("one"), pod("p", ["one"]), claim("two"), pod("q", ["two"])]
    kept = assemble(ClusterState.from_objects(objects), MemoryAPI(MemoryStore()), CEL, EngineConfig())
    names = sorted(kept.state.nodes)
    assert kept.filter(kept.state.pods[("default", "p")], names).passed == names
    changed = device_class(expression='device.attributes["driver-a"].model == "big"')
    kept.state.apply(changed)
    fresh_objects = [changed, *objects[1:]]
    fresh = assemble(ClusterState.from_objects(fresh_objects), MemoryAPI(MemoryStore()), CEL, EngineConfig())
    q = ("default", "q")
    answer = kept.filter(kept.state.pods[q], names)
    assert (
        answer.passed == fresh.filter(fresh.state.pods[q], names).passed == [n for n in names if "big" in n]
    )
