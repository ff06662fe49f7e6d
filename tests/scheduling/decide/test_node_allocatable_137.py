"""DRANodeAllocatableResources' second alpha (1.37, kubernetes#140009): mapping and overhead.

The unit tables translate upstream's tests of nodeallocatabledynamicresources.go
(TestBuildNodeAllocatableDRAInfo, TestValidateNodeAllocatableDRAClaimSharing,
TestValidatePodLevelResourcesCoverDRA; read in a post-1.37 copy whose logic matches the file at
the merge commit af7eeeb2, with 1.38's renamed status fields read back as 1.37's). The engine
cases then run Filter and bind end to end against an in-memory API server, deciding as 1.37.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.allocator.releases import release_of
from extender.model.core import parse_pod
from extender.model.dra import DeviceID, parse_resource_claim, parse_resource_slice
from extender.model.node_allocatable import NodeAllocatableError, parse_claim_resources
from extender.model.reader import Reader
from extender.scheduling.decide import node_allocatable as na
from extender.scheduling.decide.node_allocatable import pod_entries
from tests.builders import claim, container, device, device_class, exact, pod, reserve, resource_slice
from tests.scheduling.on_store import engine_on_store
from tests.scheduling.test_plugin_table_136 import worker

DRIVER = "dra.example.com"
NODE = "test-node"
CLAIM = "node-allocatable-claim"


def mapped(
    multiplier: str | None = None, key: str | None = None, factor: str | None = None
) -> dict[str, Any]:
    """A ``nodeAllocatableResources`` entry with a mapping: ``deviceMultiplier``, or
    ``capacityKey`` (times ``capacityMultiplier`` = ``factor``)."""
    m: dict[str, Any] = {}
    if multiplier is not None:
        m["deviceMultiplier"] = multiplier
    if key is not None:
        m["capacityKey"] = key
    if factor is not None:
        m["capacityMultiplier"] = factor
    return {"mapping": m}


def overhead(per_pod: str | None = None, per_container: str | None = None) -> dict[str, Any]:
    o = {k: v for k, v in (("perPod", per_pod), ("perContainer", per_container)) if v is not None}
    return {"overhead": o}


def both(*entries: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for e in entries:
        out.update(e)
    return out


def backing(name: str, **resources: dict[str, Any]) -> dict[str, Any]:
    return device(name, nodeAllocatableResources=resources)


def a_pod(claims: dict[str, list[str]], *, extra: Sequence[str] = (), **spec: Any) -> Any:
    """A pod whose entry ``e-<claim>`` names each claim; ``claims``: container -> claims it uses."""
    names = sorted({c for used in claims.values() for c in used} | set(extra))
    containers = []
    for cname, used in claims.items():
        c = container(cname, {})
        c["resources"] = {"claims": [{"name": f"e-{u}"} for u in used]}
        containers.append(c)
    p = pod("p", containers=containers or None)
    p["spec"]["resourceClaims"] = [{"name": f"e-{n}", "resourceClaimName": n} for n in names]
    p["spec"].update(spec)
    return parse_pod(p)


def result(
    dev: str, *, driver: str = DRIVER, pool: str = "pool1", consumed: dict[str, str] | None = None
) -> dict[str, Any]:
    r: dict[str, Any] = {"request": "req-0", "driver": driver, "pool": pool, "device": dev}
    if consumed is not None:
        r["consumedCapacity"] = consumed
    return r


def statuses(slices: list[dict[str, Any]], allocations: dict[str, list[dict[str, Any]]], p: Any) -> list[Any]:
    index = {d.id: d for s in slices for d in parse_resource_slice(s).devices}
    out = na.claim_statuses_137(
        p,
        pod_entries(p),
        {name: {"devices": {"results": results}} for name, results in allocations.items()},
        lambda *key: index.get(DeviceID(*key)),
    )
    return [s.to_dict() for s in out]


def on_node(*devices: dict[str, Any], driver: str = DRIVER, name: str = "s1") -> dict[str, Any]:
    return resource_slice(name, list(devices), driver=driver, pool="pool1", node=NODE)


# --- TestBuildNodeAllocatableDRAInfo ------------------------------------------------------------------


@dataclass
class Build:
    name: str
    slices: list[dict[str, Any]]
    allocations: dict[str, list[dict[str, Any]]]
    #: container -> claims it uses
    claims: dict[str, list[str]] = field(default_factory=lambda: {"c1": [CLAIM]})
    want: list[dict[str, Any]] = field(default_factory=list)


CPU0 = backing("cpu0", cpu=mapped("1"))
KEYED = backing("device1", cpu=mapped(key=f"{DRIVER}/cpu"), memory=mapped(key=f"{DRIVER}/memory"))
OVERHEAD = backing("device1", memory=overhead("1Gi", "500Mi"))

BUILD = [
    Build("empty", [on_node(CPU0)], {}),
    Build(
        "one container, deviceMultiplier",
        [on_node(CPU0)],
        {CLAIM: [result("cpu0")]},
        want=[
            {"resourceClaimName": CLAIM, "containers": ["c1"], "mapping": [{"name": "cpu", "quantity": "1"}]}
        ],
    ),
    Build(
        "capacityKey cpu and memory, no multiplier",
        [on_node(KEYED)],
        {CLAIM: [result("device1", consumed={f"{DRIVER}/cpu": "4", f"{DRIVER}/memory": "8Gi"})]},
        want=[
            {
                "resourceClaimName": CLAIM,
                "containers": ["c1"],
                "mapping": [{"name": "cpu", "quantity": "4"}, {"name": "memory", "quantity": "8Gi"}],
            }
        ],
    ),
    Build(
        "fungible, a device backing nothing chosen",
        [on_node(device("gpu0"), CPU0)],
        {CLAIM: [result("gpu0")]},
    ),
    Build(
        "two claims, sorted by name",
        [
            on_node(
                backing("cpu0", cpu=mapped(key=f"{DRIVER}/cpu")),
                backing("gpu0", cpu=mapped("2"), memory=mapped("4Gi")),
            )
        ],
        {"gpu-claim": [result("gpu0")], "cpu-claim": [result("cpu0", consumed={f"{DRIVER}/cpu": "10"})]},
        claims={"c1": ["cpu-claim", "gpu-claim"]},
        want=[
            {
                "resourceClaimName": "cpu-claim",
                "containers": ["c1"],
                "mapping": [{"name": "cpu", "quantity": "10"}],
            },
            {
                "resourceClaimName": "gpu-claim",
                "containers": ["c1"],
                "mapping": [{"name": "cpu", "quantity": "2"}, {"name": "memory", "quantity": "4Gi"}],
            },
        ],
    ),
    Build(
        "containers in pod order, only those using the claim",
        [on_node(CPU0)],
        {CLAIM: [result("cpu0")]},
        claims={"c1": [CLAIM], "sidecar1": [], "c2": [CLAIM]},
        want=[
            {
                "resourceClaimName": CLAIM,
                "containers": ["c1", "c2"],
                "mapping": [{"name": "cpu", "quantity": "1"}],
            }
        ],
    ),
    Build(
        "a missing capacity key is ignored for that resource",
        [on_node(KEYED)],
        {CLAIM: [result("device1", consumed={f"{DRIVER}/memory": "8Gi"})]},
        want=[
            {
                "resourceClaimName": CLAIM,
                "containers": ["c1"],
                "mapping": [{"name": "memory", "quantity": "8Gi"}],
            }
        ],
    ),
    Build(
        "an unreferenced claim is allowed (no containers listed)",
        [on_node(CPU0)],
        {"unref-claim": [result("cpu0")]},
        claims={"c1": []},
        want=[{"resourceClaimName": "unref-claim", "mapping": [{"name": "cpu", "quantity": "1"}]}],
    ),
    Build(
        "an unreferenced claim with overhead",
        [on_node(OVERHEAD)],
        {"unref-claim": [result("device1")]},
        claims={"c1": []},
        want=[
            {
                "resourceClaimName": "unref-claim",
                "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "500Mi"}],
            }
        ],
    ),
    Build(
        "capacityKey times capacityMultiplier",
        [on_node(backing("cpu0", cpu=mapped(key=f"{DRIVER}/cores", factor="2")))],
        {CLAIM: [result("cpu0", consumed={f"{DRIVER}/cores": "4"})]},
        want=[
            {"resourceClaimName": CLAIM, "containers": ["c1"], "mapping": [{"name": "cpu", "quantity": "8"}]}
        ],
    ),
    Build(
        "the capacity key is not what was consumed: no entry",
        [on_node(backing("cpu0", cpu=mapped(key=f"{DRIVER}/cpu")))],
        {CLAIM: [result("cpu0", consumed={f"{DRIVER}/wrong": "4"})]},
    ),
    Build(
        "perPod only",
        [on_node(backing("device1", memory=overhead("1Gi")))],
        {CLAIM: [result("device1")]},
        want=[
            {
                "resourceClaimName": CLAIM,
                "containers": ["c1"],
                "overhead": [{"name": "memory", "perPod": "1Gi"}],
            }
        ],
    ),
    Build(
        "overhead with two containers: listed once each, not multiplied here",
        [on_node(OVERHEAD)],
        {CLAIM: [result("device1")]},
        claims={"c1": [CLAIM], "c2": [CLAIM]},
        want=[
            {
                "resourceClaimName": CLAIM,
                "containers": ["c1", "c2"],
                "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "500Mi"}],
            }
        ],
    ),
    Build(
        "mapping and overhead on the same resource",
        [on_node(backing("device1", memory=both(mapped("2Gi"), overhead("1Gi", "500Mi"))))],
        {CLAIM: [result("device1")]},
        want=[
            {
                "resourceClaimName": CLAIM,
                "containers": ["c1"],
                "mapping": [{"name": "memory", "quantity": "2Gi"}],
                "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "500Mi"}],
            }
        ],
    ),
    Build(
        "deviceMultiplier counts once per allocated device",
        [on_node(CPU0, backing("cpu1", cpu=mapped("1")))],
        {CLAIM: [result("cpu0"), result("cpu1")]},
        want=[
            {"resourceClaimName": CLAIM, "containers": ["c1"], "mapping": [{"name": "cpu", "quantity": "2"}]}
        ],
    ),
    Build(
        "driver collision: the result's driver decides",
        [
            on_node(backing("cpu0", cpu=mapped("1")), driver="driver-a", name="sa"),
            on_node(backing("cpu0", cpu=mapped("8")), driver="driver-b", name="sb"),
        ],
        {CLAIM: [result("cpu0", driver="driver-b")]},
        want=[
            {"resourceClaimName": CLAIM, "containers": ["c1"], "mapping": [{"name": "cpu", "quantity": "8"}]}
        ],
    ),
]


@pytest.mark.parametrize("case", BUILD, ids=[c.name for c in BUILD])
def test_build_node_allocatable_dra_info(case: Build) -> None:
    assert (
        statuses(case.slices, case.allocations, a_pod(case.claims, extra=list(case.allocations))) == case.want
    )


BUILD_ERRORS = [
    (
        "device not found",
        [result("cpu0"), result("nonexistent-device")],
        f"claim default/{CLAIM}, device nonexistent-device, driver {DRIVER}: device nonexistent-device not found "
        f"in pool pool1 for driver {DRIVER}",
    ),
    (
        "a capacity key with no consumedCapacity at all",
        [result("device1")],
        f"claim default/{CLAIM}, device device1: ConsumedCapacity is nil, but Capacity key '{DRIVER}/cpu' is set "
        "in NodeAllocatableResources for resource cpu",
    ),
]


@pytest.mark.parametrize(("name", "results", "message"), BUILD_ERRORS, ids=[c[0] for c in BUILD_ERRORS])
def test_build_errors_are_filter_errors(name: str, results: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(NodeAllocatableError) as caught:
        statuses([on_node(CPU0, KEYED)], {CLAIM: results}, a_pod({"c1": [CLAIM]}))
    assert str(caught.value) == message


# --- TestValidateNodeAllocatableDRAClaimSharing -------------------------------------------------------

SHARED = f"node allocatable resource claim {CLAIM} has a mapped device and cannot be shared across pods"
COMBINED = backing("combined", cpu=both(mapped("1"), overhead(per_container="100")))
GPU_OVERHEAD = backing("gpu0", memory=overhead(per_container="100"))
OTHER_POD = {"resource": "pods", "name": "other", "uid": "other-pod-uid"}
OWN_GROUP = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "my-pod-group", "uid": "g"}


def allocated_claim(dev: str | None, *reserved: dict[str, Any]) -> Any:
    c = claim(CLAIM)
    if dev is not None:
        c["status"] = {"allocation": {"devices": {"results": [result(dev)]}}}
        if reserved:
            c["status"]["reservedFor"] = list(reserved)
    return parse_resource_claim(c)


SHARING = [
    ("claim not allocated yet", None, (), False, None),
    ("mapped, not shared", "cpu0", (), False, None),
    ("mapped, reserved for another pod", "cpu0", (OTHER_POD,), False, SHARED),
    (
        "mapped, reserved for this pod",
        "cpu0",
        ({"resource": "pods", "name": "p", "uid": "uid-p"},),
        False,
        None,
    ),
    ("overhead only, reserved for another pod", "gpu0", (OTHER_POD,), False, None),
    ("mapping and overhead on one device, reserved for another pod", "combined", (OTHER_POD,), False, SHARED),
    ("reserved for the pod's own group", "cpu0", (OWN_GROUP,), True, None),
    ("reserved for another group", "cpu0", ({**OWN_GROUP, "name": "other-pod-group"},), True, SHARED),
    ("reserved for the pod's group, group claims off", "cpu0", (OWN_GROUP,), False, SHARED),
]


@pytest.mark.parametrize(("name", "dev", "reserved", "groups", "want"), SHARING, ids=[c[0] for c in SHARING])
def test_validate_node_allocatable_dra_claim_sharing(
    name: str, dev: str | None, reserved: tuple[dict[str, Any], ...], groups: bool, want: str | None
) -> None:
    devices = {d.id: d for d in parse_resource_slice(on_node(CPU0, GPU_OVERHEAD, COMBINED)).devices}
    p = a_pod({"c1": [CLAIM]}, schedulingGroup={"podGroupName": "my-pod-group"})
    assert na.sharing_problem_137(p, allocated_claim(dev, *reserved), devices, group_claims=groups) == want


# --- TestValidatePodLevelResourcesCoverDRA ------------------------------------------------------------


def level_pod(
    requests: dict[str, str] | None,
    limits: dict[str, str] | None,
    containers: dict[str, tuple[dict[str, str], dict[str, str]]],
) -> Any:
    cs = []
    for name, (req, lim) in containers.items():
        c = container(name, dict(req))
        c.setdefault("resources", {})["limits"] = lim
        cs.append(c)
    p = pod("p", containers=cs)
    if requests is not None or limits is not None:
        p["spec"]["resources"] = {
            k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None
        }
    return parse_pod(p)


def status(
    *,
    containers: tuple[str, ...] = (),
    mapping: dict[str, str] | None = None,
    per_pod: str | None = None,
    per_container: str | None = None,
) -> Any:
    entry: dict[str, Any] = {"resourceClaimName": "c", "containers": list(containers)}
    if mapping:
        entry["mapping"] = [{"name": n, "quantity": q} for n, q in mapping.items()]
    if per_pod or per_container:
        o = {
            "name": "memory",
            **({"perPod": per_pod} if per_pod else {}),
            **({"perContainer": per_container} if per_container else {}),
        }
        entry["overhead"] = [o]
    return parse_claim_resources(Reader({"nodeAllocatableResourceClaimStatuses": [entry]}, "status"))


REQUESTS_SHORT = "is insufficient to cover the aggregated container and node-allocatable DRA requests"
LEVEL = [
    (
        "no pod-level resources",
        None,
        None,
        {"c1": ({"cpu": "1", "memory": "1Gi"}, {})},
        status(mapping={"cpu": "500m"}),
        None,
    ),
    (
        "sufficient",
        {"cpu": "2", "memory": "2Gi"},
        None,
        {"c1": ({"cpu": "1", "memory": "1Gi"}, {})},
        status(mapping={"cpu": "500m", "memory": "512Mi"}),
        None,
    ),
    (
        "cpu insufficient",
        {"cpu": "1", "memory": "2Gi"},
        None,
        {"c1": ({"cpu": "800m", "memory": "1Gi"}, {})},
        status(mapping={"cpu": "300m", "memory": "512Mi"}),
        f"pod level request for cpu {REQUESTS_SHORT}",
    ),
    (
        "DRA overhead covered: perPod plus perContainer once per listed container",
        {"cpu": "2", "memory": "3Gi"},
        None,
        {"c1": ({"cpu": "1", "memory": "1Gi"}, {})},
        status(containers=("c1",), per_pod="1Gi", per_container="1Gi"),
        None,
    ),
    (
        "DRA overhead not covered",
        {"cpu": "2", "memory": "2Gi"},
        None,
        {"c1": ({"cpu": "1", "memory": "1Gi"}, {})},
        status(containers=("c1",), per_pod="1Gi", per_container="1Gi"),
        f"pod level request for memory {REQUESTS_SHORT}",
    ),
    (
        "limits cover the container's limit and its DRA overhead",
        None,
        {"memory": "2Gi"},
        {"c1": ({}, {"memory": "1Gi"})},
        status(containers=("c1",), per_container="512Mi"),
        None,
    ),
    (
        "limits do not",
        None,
        {"memory": "2Gi"},
        {"c1": ({}, {"memory": "1536Mi"})},
        status(containers=("c1",), per_container="1Gi"),
        "pod level limit for memory is insufficient to cover the limit and DRA overhead for container c1",
    ),
    (
        "several insufficient: the first the pod names is reported",
        {"cpu": "1", "memory": "1Gi"},
        None,
        {"c1": ({"cpu": "1100m", "memory": "1100Mi"}, {})},
        status(mapping={"cpu": "100m", "memory": "100Mi"}),
        f"pod level request for cpu {REQUESTS_SHORT}",
    ),
    (
        "hugepages limits: the containers' limits with the claims' amounts",
        None,
        {"hugepages-2Mi": "4Mi"},
        {"c1": ({}, {"hugepages-2Mi": "2Mi"})},
        status(containers=("c1",), mapping={"hugepages-2Mi": "4Mi"}),
        "pod level limit for hugepages-2Mi is insufficient to cover the aggregated container and "
        "node-allocatable DRA limits",
    ),
    (
        "hugepages limits covered",
        None,
        {"hugepages-2Mi": "6Mi"},
        {"c1": ({}, {"hugepages-2Mi": "2Mi"})},
        status(containers=("c1",), mapping={"hugepages-2Mi": "4Mi"}),
        None,
    ),
    (
        "overcommitted containers but no claim statuses",
        None,
        {"memory": "4Gi"},
        {"c1": ({}, {"memory": "3Gi"}), "c2": ({}, {"memory": "3Gi"})},
        (),
        None,
    ),
]


@pytest.mark.parametrize(
    ("name", "requests", "limits", "containers", "entries", "want"), LEVEL, ids=[c[0] for c in LEVEL]
)
def test_validate_pod_level_resources_cover_dra(
    name: str, requests: Any, limits: Any, containers: Any, entries: Any, want: str | None
) -> None:
    assert na.pod_level_problem(level_pod(requests, limits, containers), entries) == want


def test_spec_overhead_is_not_part_of_the_pod_level_comparison() -> None:
    """1.37 compares AggregateContainerRequests (1.36: PodRequests, which adds spec.overhead)."""
    p = level_pod({"cpu": "4", "memory": "3Gi"}, None, {"c1": ({"cpu": "1", "memory": "1Gi"}, {})})
    p = parse_pod({**p.raw, "spec": {**p.raw["spec"], "overhead": {"cpu": "500m", "memory": "512Mi"}}})
    assert na.pod_level_problem(p, status(mapping={"cpu": "3", "memory": "2Gi"})) is None


# --- Filter and bind, deciding as 1.37 ----------------------------------------------------------------

WORKER = "worker"
GATES = "DRANodeAllocatableResources=true"


def worker_slice(*devices: dict[str, Any]) -> dict[str, Any]:
    return resource_slice("worker-slice", list(devices), driver=DRIVER, pool=WORKER, node=WORKER)


def claim_pod(
    name: str, claim_name: str = CLAIM, *, cpu: str = "1", node_name: str | None = None, uses: bool = True
) -> dict[str, Any]:
    c = container("c1", {"cpu": cpu})
    if uses:
        c.setdefault("resources", {})["claims"] = [{"name": "dev"}]
    p = pod(name, containers=[c], node_name=node_name)
    p["spec"]["resourceClaims"] = [{"name": "dev", "resourceClaimName": claim_name}]
    return p


def allocated_to(dev: str, *users: str) -> dict[str, Any]:
    c = claim(CLAIM, [exact("req-0", "cls")])
    c["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": WORKER, "device": dev}]},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [WORKER]}]}
                ]
            },
        }
    }
    return reserve(c, *users) if users else c


def with_status(p: dict[str, Any], *entries: dict[str, Any]) -> dict[str, Any]:
    p["status"] = {"nodeAllocatableResourceClaimStatuses": list(entries)}
    return p


NUMA0 = backing("numa0", cpu=mapped("4"), memory=overhead("1Gi", "512Mi"))
NUMA0_STATUS = {
    "resourceClaimName": CLAIM,
    "containers": ["c1"],
    "mapping": [{"name": "cpu", "quantity": "4"}],
    "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "512Mi"}],
}


def run(objects: list[dict[str, Any]], *, pod_name: str = "p", release: int = 37) -> tuple[Any, Any, Any]:
    nodes = [worker(WORKER, {"cpu": "10", "memory": "10Gi", "pods": 32})]
    engine, store = engine_on_store(
        [*nodes, device_class("cls", f'device.driver == "{DRIVER}"'), *objects], GATES, release_of(release)
    )
    answer = engine.filter(parse_pod(store.get("Pod", "default", pod_name)), [WORKER])
    return engine, store, answer


def bind(engine: Any, store: Any, name: str = "p") -> str:
    uid = store.get("Pod", "default", name)["metadata"]["uid"]
    return str(asyncio.run(engine.bind("default", name, uid, WORKER)))


def test_a_new_allocation_s_mapping_and_overhead_fit_and_are_recorded() -> None:
    engine, store, answer = run([worker_slice(NUMA0), claim(CLAIM, [exact("req-0", "cls")]), claim_pod("p")])
    assert answer.passed == [WORKER], answer
    assert bind(engine, store) == ""
    assert store.get("Pod", "default", "p")["status"]["nodeAllocatableResourceClaimStatuses"] == [
        NUMA0_STATUS
    ]


def test_the_mapping_counts_against_the_node_s_other_pods() -> None:
    """1 CPU of the container and 4 the device stands for; a bound pod takes 6 of 10."""
    busy = claim_pod("busy", "other", cpu="6", node_name=WORKER, uses=False)
    _, _, answer = run([worker_slice(NUMA0), claim(CLAIM, [exact("req-0", "cls")]), claim_pod("p"), busy])
    assert answer.failed == {WORKER: "Insufficient cpu"} and not answer.unresolvable, answer


def test_a_claim_with_a_mapped_device_is_not_shared_across_pods() -> None:
    objects = [worker_slice(NUMA0), allocated_to("numa0", "owner"), claim_pod("p")]
    _, _, answer = run(objects)
    assert answer.unresolvable == {WORKER: SHARED}, answer


def test_an_overhead_only_claim_is_shared_and_its_overhead_counts_for_each_pod() -> None:
    """The claim is allocated and reserved for the first pod, which records 6Gi per pod; the
    second pod may share it (1.36 refused), and pays the 6Gi again: 12Gi > 10Gi."""
    heavy = backing("heavy", memory=overhead("6Gi"))
    owner = with_status(
        claim_pod("owner", node_name=WORKER),
        {"resourceClaimName": CLAIM, "containers": ["c1"], "overhead": [{"name": "memory", "perPod": "6Gi"}]},
    )
    _, _, answer = run([worker_slice(heavy), allocated_to("heavy", "owner"), owner, claim_pod("p")])
    assert answer.failed == {WORKER: "Insufficient memory"}, answer
    light = backing("heavy", memory=overhead("2Gi"))
    owner = with_status(
        claim_pod("owner", node_name=WORKER),
        {"resourceClaimName": CLAIM, "containers": ["c1"], "overhead": [{"name": "memory", "perPod": "2Gi"}]},
    )
    engine, store, answer = run([worker_slice(light), allocated_to("heavy", "owner"), owner, claim_pod("p")])
    assert answer.passed == [WORKER], answer
    assert bind(engine, store) == ""
    assert store.get("Pod", "default", "p")["status"]["nodeAllocatableResourceClaimStatuses"] == [
        {"resourceClaimName": CLAIM, "containers": ["c1"], "overhead": [{"name": "memory", "perPod": "2Gi"}]}
    ]


def test_an_unreferenced_claim_is_allowed_and_pays_no_per_container_overhead() -> None:
    engine, store, answer = run(
        [worker_slice(NUMA0), claim(CLAIM, [exact("req-0", "cls")]), claim_pod("p", uses=False)]
    )
    assert answer.passed == [WORKER], answer
    assert bind(engine, store) == ""
    recorded = store.get("Pod", "default", "p")["status"]["nodeAllocatableResourceClaimStatuses"]
    assert recorded == [{k: v for k, v in NUMA0_STATUS.items() if k != "containers"}]


@pytest.mark.parametrize(
    ("release", "field_name", "entry"),
    [
        (37, "nodeAllocatableResourceMappings", {"cpu": {"allocationMultiplier": "100"}}),
        (36, "nodeAllocatableResources", {"cpu": {"mapping": {"deviceMultiplier": "100"}}}),
    ],
)
def test_each_release_reads_its_own_api_only(release: int, field_name: str, entry: dict[str, Any]) -> None:
    """A 1.37 API server serves only nodeAllocatableResources (the 1.36 field is tombstoned), and
    a 1.36 one only nodeAllocatableResourceMappings: the other release's field counts nothing."""
    dev = device("big", **{field_name: entry})
    _, _, answer = run(
        [worker_slice(dev), claim(CLAIM, [exact("req-0", "cls")]), claim_pod("p")], release=release
    )
    assert answer.passed == [WORKER], answer


def test_an_extended_resource_claim_is_recorded_under_its_created_name() -> None:
    """kubernetes#141467: v1.37.0 records the in-memory ``<extended-resources>`` name, which the API
    server refuses (the pod fails at PreBind); the extender records the claim it created, as the
    fix (#141556, after v1.37.0) does."""
    gpu = "example.com/gpu"
    p = pod("p", containers=[container("c1", {gpu: 1})])
    engine, store = engine_on_store(
        [
            worker(WORKER, {"cpu": "10", "memory": "10Gi", "pods": 32}),
            device_class("gpu", f'device.driver == "{DRIVER}"', extended_resource=gpu),
            worker_slice(NUMA0),
            p,
        ],
        GATES + ",DRAExtendedResource=true",
        release_of(37),
    )
    assert engine.filter(parse_pod(store.get("Pod", "default", "p")), [WORKER]).passed == [WORKER]
    assert bind(engine, store) == ""
    created = [c["metadata"]["name"] for c in store.objects("ResourceClaim")]
    recorded = store.get("Pod", "default", "p")["status"]["nodeAllocatableResourceClaimStatuses"]
    assert len(created) == 1 and [s["resourceClaimName"] for s in recorded] == created
    assert recorded[0]["mapping"] == [{"name": "cpu", "quantity": "4"}]


def test_a_device_that_names_other_nodes_is_a_filter_error() -> None:
    """getDeviceFromSlices: a perDeviceNodeSelection device must match the node ("device %s does
    not match node", an Error status), even when its claim is allocated already."""
    elsewhere = backing("numa9", cpu=mapped("1"))
    elsewhere["nodeName"] = "other-node"
    here = backing("numa0", cpu=mapped("1"))
    here["nodeName"] = WORKER
    shared = resource_slice(
        "per-device", [here, elsewhere], driver=DRIVER, pool=WORKER, perDeviceNodeSelection=True
    )
    c = allocated_to("numa9")
    del c["status"]["allocation"]["nodeSelector"]  # a broken record: the claim says it fits anywhere
    _, _, answer = run([shared, c, claim_pod("p")])
    assert answer.error == (
        f"claim default/{CLAIM}, device numa9, driver {DRIVER}: device numa9 does not match node"
    ), answer
