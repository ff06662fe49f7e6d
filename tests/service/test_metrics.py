"""/metrics read with prometheus-client's own parser: names, types, labels known up front, no
*_created series, process metrics, device capacity gauges, and counters callers cannot inflate."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.scheduling.decide.capacity import Capacity, capacity_steps
from extender.scheduling.decide.snapshot import Snapshot
from extender.service.metrics import CapacityCollector, LoopFeed
from tests.builders import allocated, claim, device, device_class, exact, node, pod, reserve, resource_slice
from tests.service.fixtures import EXAMPLE_NODES, TRAINER, args_names, binding, scheduler_pod
from tests.service.harness import Running, run_with_service

#: family name -> type, as the parser reports them (counters without their _total suffix).
FAMILIES = {
    "dra_extender_request_duration_seconds": "histogram",
    "dra_extender_filter_nodes": "counter",
    "dra_extender_filter_errors": "counter",
    "dra_extender_binds": "counter",
    "dra_extender_claim_write_conflicts": "counter",
    "dra_extender_resourceclaim_creates": "counter",
    "dra_extender_bad_requests": "counter",
    "dra_extender_cache_objects": "gauge",
    "dra_extender_in_flight_allocations": "gauge",
    "dra_extender_in_flight_entries": "gauge",
    "dra_extender_filters_held": "gauge",
    "dra_extender_build_info": "gauge",
    "dra_extender_filter_cut_short": "counter",
    "dra_extender_preempt": "counter",
    "dra_extender_api_requests": "counter",
    "dra_extender_api_request_duration_seconds": "histogram",
    "dra_extender_claims_held_for_unbound_pods": "gauge",
    "dra_extender_claims_held_for_unbound_pods_oldest_seconds": "gauge",
    "dra_extender_cel_compile_errors": "counter",
    "dra_extender_cel_evaluation_errors": "counter",
    "dra_extender_write_outcome_unknown": "counter",
    "dra_extender_writes_refused_by_fence": "counter",
    "dra_extender_store_fence": "gauge",
    "dra_extender_device_classes_not_compiling": "gauge",
    "dra_extender_ready": "gauge",
    "dra_extender_leader": "gauge",
    "process_cpu_seconds": "counter",
    "process_resident_memory_bytes": "gauge",
    "python_info": "gauge",
    "python_gc_collections": "counter",
}
CAPACITY_FAMILIES = {
    "dra_extender_node_devices": "gauge",
    "dra_extender_class_devices": "gauge",
    "dra_extender_class_pods_fit": "gauge",
    "dra_extender_class_stranded_devices": "gauge",
    "dra_extender_capacity_computed_timestamp_seconds": "gauge",
}


def samples(text: str) -> dict[str, list[Sample]]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def types(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def value(text: str, name: str, **labels: str) -> float:
    found = [
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name and s.labels == labels
    ]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_families_types_and_no_created_series_before_any_request() -> None:
    async def body(r: Running) -> str:
        return (await r.client.get("/metrics")).text

    text = run_with_service(body)
    assert FAMILIES.items() <= types(text).items()
    assert not [s.name for family in samples(text).values() for s in family if s.name.endswith("_created")]
    # Every label value exists at 0 before its first event.
    for verb in ("filter", "prioritize", "bind"):
        assert value(text, "dra_extender_bad_requests_total", verb=verb) == 0
        assert value(text, "dra_extender_request_duration_seconds_count", verb=verb) == 0
    for outcome in ("success", "failure"):
        assert value(text, "dra_extender_binds_total", outcome=outcome) == 0
    for outcome in ("passed", "rejected"):
        assert value(text, "dra_extender_filter_nodes_total", outcome=outcome) == 0
    # The top bucket reaches past a bind's worst case (API calls of up to 30 s each).
    buckets = [
        float(s.labels["le"])
        for s in samples(text)["dra_extender_request_duration_seconds"]
        if s.name.endswith("_bucket") and s.labels["verb"] == "bind"
    ]
    assert max(b for b in buckets if b != float("inf")) >= 120
    (build,) = samples(text)["dra_extender_build_info"]
    assert build.value == 1 and build.labels["version"] and build.labels["python"]


#: The in-flight maps every replica reports (``Engine.entries``), each a series from the start.
IN_FLIGHT_MAPS = {
    "binds",
    "binds_ever_parked",
    "claim_records",
    "pods_with_records",
    "claims_touched",
    "claims_dirty",
    "claims_creating",
    "holds",
    "expected_binds",
    "seen_pods",
    "placing",
    "group_filters",
    "preemptions",
    "unanswered_bindings",
    "make_room_holds",
    "background_writes",
    "finalizers_watched",
    "timed_out_claim_sets",
    "claims_waited_in_vain",
    "make_room_hints",
    "claim_hints",
}


def test_in_flight_entries_follow_a_filter_and_a_bind_and_match_the_inflight_view() -> None:
    async def body(r: Running) -> list[tuple[str, dict[str, int]]]:
        seen = []

        async def look(when: str) -> None:
            text = (await r.client.get("/metrics")).text
            entries = {s.labels["map"]: int(s.value) for s in samples(text)["dra_extender_in_flight_entries"]}
            view = (await r.client.get("/debug/inflight")).json()
            assert entries == view["entries"], when
            seen.append((when, entries))

        await look("at rest")
        await r.client.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES))
        await look("filtered")
        await r.client.post("/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3"))
        await look("bound")
        return seen

    (rest, filtered, bound) = run_with_service(body)
    assert set(rest[1]) == IN_FLIGHT_MAPS and not any(rest[1].values()), rest
    # The filter remembered the pod as sent and expects its bind.
    assert filtered[1]["seen_pods"] == 1 and filtered[1]["expected_binds"] == 1, filtered
    # The bind is done (no bind in flight) and nothing else waits for it.
    assert bound[1]["binds"] == 0 and bound[1]["expected_binds"] == 0, bound


def test_made_up_node_names_are_not_counted() -> None:
    async def body(r: Running) -> str:
        names = [*EXAMPLE_NODES, *(f"fake-{i}" for i in range(50))]
        assert (
            await r.client.post("/scheduler/filter", content=args_names(TRAINER, names))
        ).status_code == 200
        return (await r.client.get("/metrics")).text

    text = run_with_service(body)
    counted = value(text, "dra_extender_filter_nodes_total", outcome="passed") + value(
        text, "dra_extender_filter_nodes_total", outcome="rejected"
    )
    assert counted == len(EXAMPLE_NODES)


def test_capacity_gauges_follow_a_bind_and_match_the_capacity_view() -> None:
    async def body(r: Running) -> tuple[str, dict[str, object]]:
        await r.client.post("/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3"))
        first = (await r.client.get("/metrics")).text  # asks the engine's loop for a computation
        assert not CAPACITY_FAMILIES.keys() & types(first).keys()
        for _ in range(20):
            await asyncio.sleep(0)
        text = (await r.client.get("/metrics")).text
        view = (await r.client.get("/debug/capacity")).json()
        return text, view

    text, view = run_with_service(body)
    assert CAPACITY_FAMILIES.items() <= types(text).items()
    allocated = value(
        text, "dra_extender_node_devices", node="gpu-node-3", driver="gpu.example.com", state="allocated"
    )
    free = value(text, "dra_extender_node_devices", node="gpu-node-3", driver="gpu.example.com", state="free")
    (line,) = [n for n in view["nodes"] if n["node"] == "gpu-node-3" and n["driver"] == "gpu.example.com"]  # type: ignore[attr-defined]
    assert (allocated, free) == (line["allocated"], line["free"]) and allocated >= 1
    fits = view["podsThatFit"]["gpu.example.com"]  # type: ignore[index]
    stranded = view["strandedFor"]["gpu.example.com"]  # type: ignore[index]
    for count in ("1", "2", "4", "8"):
        assert (
            value(text, "dra_extender_class_pods_fit", device_class="gpu.example.com", count=count)
            == fits[count]
        )
        assert (
            value(text, "dra_extender_class_stranded_devices", device_class="gpu.example.com", count=count)
            == stranded[count]
        )


def test_the_capacity_feed_computes_in_slices_and_never_twice_at_once() -> None:
    """The engine's loop runs other work between slices; a scrape never waits for a result."""
    now = [0.0]
    queued: list[Callable[[], None]] = []
    started: list[int] = []

    def steps() -> Generator[None, None, Capacity]:
        started.append(1)
        for _ in range(5):
            now[0] += 0.004  # each node takes 4 ms
            yield
        return Capacity(free_by_class={"gpu": {"n": 3}})

    feed = LoopFeed(steps, queued.append, min_interval=15.0, slice_seconds=0.01, clock=lambda: now[0])
    assert feed.ask() is None and len(queued) == 1
    assert feed.ask() is None and len(queued) == 1  # asked again within the interval: nothing new
    slices = 0
    while queued:
        queued.pop(0)()
        slices += 1
    assert slices == 2  # 3 nodes in the first 10 ms slice, the other 2 and the result in the second
    assert feed.ask() is not None and feed.latest is not None and feed.latest.pods_that_fit("gpu", 1) == 3
    now[0] += 20
    feed.ask()
    feed.ask()
    queued.pop(0)()  # the next computation starts
    now[0] += 20
    feed.ask()
    queued[-1]()  # a start while one runs is ignored
    assert started == [1, 1]


def gpus_held(node_name: str, total: int, held: int) -> list[dict[str, object]]:
    """A node with ``total`` devices of driver-a, and a claim holding the first ``held`` (last)."""
    devices = [device(f"{node_name}-g{i}") for i in range(total)]
    results = [("driver-a", node_name, f"{node_name}-g{i}") for i in range(held)]
    holding = claim(f"{node_name}-held", allocation=allocated(*results))
    return [node(node_name), resource_slice(node_name, devices, pool=node_name, node=node_name), holding]


def test_stranded_devices_per_class_and_count_refreshed_at_most_every_interval() -> None:
    """On a tiny cluster (8 devices with 7 free, 4 with 2 free): per count, the free devices no
    pod of that many can use. Within the interval a scrape shows the figures already computed,
    even after the cluster changed; the first scrape past it starts a computation (on the
    engine's loop: here the queue below) and the next shows its figures."""
    a, b = gpus_held("a", 8, 1), gpus_held("b", 4, 2)
    state = ClusterState.from_objects([device_class("gpu", 'device.driver == "driver-a"'), *a, *b])
    now = [0.0]
    queued: list[Callable[[], None]] = []
    feed = LoopFeed(
        lambda: capacity_steps(Snapshot(state, Features(), CelEnvironment())),
        queued.append,
        min_interval=15.0,
        clock=lambda: now[0],
    )
    registry = CollectorRegistry()
    registry.register(CapacityCollector(feed))

    def scrape() -> dict[str, float]:
        text = generate_latest(registry).decode()
        while queued:  # the engine's loop runs what the scrape asked for
            queued.pop(0)()
        found = samples(text).get("dra_extender_class_stranded_devices", [])
        return {s.labels["count"]: s.value for s in found if s.labels["device_class"] == "gpu"}

    assert scrape() == {}  # the first scrape starts the computation and shows none yet
    # 7 free on a, 2 on b: 7 % 2 + 2 % 2 = 1, 7 % 4 + 2 % 4 = 5, 7 % 8 + 2 % 8 = 9.
    assert scrape() == {"1": 0, "2": 1, "4": 5, "8": 9}
    state.remove(a[-1])  # node a's claim is gone: 8 free there
    now[0] += 14.9
    assert scrape() == {"1": 0, "2": 1, "4": 5, "8": 9}  # within the interval: not recomputed
    now[0] += 0.1
    assert scrape() == {"1": 0, "2": 1, "4": 5, "8": 9}  # starts the computation
    assert scrape() == {"1": 0, "2": 0, "4": 2, "8": 2}


def test_claims_held_for_unbound_pods_and_cel_failures(tmp_path: Path) -> None:
    """A claim allocated and reserved for a pod that was never bound shows up (computed on the
    engine's loop, like the capacity gauges); a DeviceClass that does not compile is counted
    once, however many filters meet it."""
    stuck = reserve(claim("stuck", allocation=allocated(("driver-a", "pool-1", "d0"))), "waiting")
    broken = device_class("broken")
    broken["spec"]["selectors"] = [{"cel": {"expression": "device.attributes["}}]
    objects = [
        device_class("class-a"),
        broken,
        resource_slice("s", [device("d0"), device("d1")]),
        node("node-1"),
        stuck,
        pod("waiting", ["stuck"]),
        claim("wants-broken", requests=[exact(cls="broken")]),
    ]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    wants = scheduler_pod("p", "uid-p", [{"name": "c", "resourceClaimName": "wants-broken"}])

    async def body(r: Running) -> str:
        for _ in range(2):
            answer = (await r.client.post("/scheduler/filter", content=args_names(wants, ["node-1"]))).json()
            assert "compilation failed" in answer["Error"]
        await r.client.get("/metrics")  # asks the engine's loop for a computation
        for _ in range(20):
            await asyncio.sleep(0)
        return (await r.client.get("/metrics")).text

    text = run_with_service(body, paths=[str(path)])
    assert value(text, "dra_extender_claims_held_for_unbound_pods") == 1
    assert value(text, "dra_extender_claims_held_for_unbound_pods_oldest_seconds") >= 0
    assert value(text, "dra_extender_cel_compile_errors_total") == 1
    assert value(text, "dra_extender_device_classes_not_compiling") == 1  # while it lasts
    assert value(text, "dra_extender_cel_evaluation_errors_total", kind="cost_limit") == 0
