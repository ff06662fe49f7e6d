"""DRANodeAllocatableResources (1.36): Filter's node-resource check and PreBind's pod status.

Upstream's cases (v1.36.3 pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go
TestPlugin node-allocatable-resource-*) have their Filter answers in test_plugin_table_136.py;
here their PreBind changes to the pod run through the bind verb against an in-memory API
server, and the rules of nodeallocatabledynamicresources.go the table does not reach are cased
out one by one (sharing, the node's other pods, pod-level requests, formats, errors).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from extender.allocator.releases import release_of
from extender.cluster.api import api_error
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.model.core import parse_pod
from extender.model.dra import parse_resource_slice
from extender.scheduling.decide import node_allocatable as na
from extender.scheduling.engine import Engine
from extender.scheduling.preempt.victims import Candidate
from tests.builders import container, device, pod
from tests.scheduling.on_store import engine_on_store
from tests.scheduling.test_plugin_table_136 import (
    CASES,
    CLAIM,
    CLASS_A,
    POD,
    WORKER,
    Case,
    capacity_claim,
    container_pod,
    gates_of,
    mapped_device,
    node_slice,
    objects_of,
    pending,
    worker,
)

RELEASE = release_of(36)
GATE = {"DRANodeAllocatableResources": True}


class FailingBinding(MemoryAPI):
    async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise api_error(403, "Forbidden", None)


def cluster(
    c: Case, api: type[MemoryAPI] = MemoryAPI, *, following: bool = True
) -> tuple[Engine, MemoryStore]:
    return engine_on_store(objects_of(c), gates_of(c), RELEASE, api=api, following=following)


def case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def statuses(store: MemoryStore, name: str = POD) -> Any:
    return (store.get("Pod", "default", name).get("status") or {}).get("nodeAllocatableResourceClaimStatuses")


def bind(engine: Engine, store: MemoryStore, name: str = POD) -> str:
    uid = store.get("Pod", "default", name)["metadata"]["uid"]
    return asyncio.run(engine.bind("default", name, uid, WORKER))


def entry(**resources: str) -> list[dict[str, Any]]:
    return [{"resourceClaimName": CLAIM, "containers": ["c1"], "resources": resources}]


# --- upstream's cases, PreBind ---------------------------------------------------------------------

PREBIND = {
    "node-allocatable-resource-multiplier": entry(cpu="1", memory="1Gi"),
    "node-allocatable-resource-capacitykey": entry(cpu="1"),
    "node-allocatable-resource-capacitykey-and-multiplier": entry(cpu="1", memory="1Gi"),
}


@pytest.mark.parametrize("name", sorted(PREBIND))
def test_prebind_records_what_the_claims_stand_for(name: str) -> None:
    engine, store = cluster(case(name))
    assert bind(engine, store) == ""
    assert statuses(store) == PREBIND[name]
    assert store.get("Pod", "default", POD)["spec"]["nodeName"] == WORKER
    claim = store.get("ResourceClaim", "default", CLAIM)
    assert claim["status"]["reservedFor"][0]["name"] == POD


@pytest.mark.parametrize(
    "name",
    [
        "node-allocatable-resource-insufficient-resources-with-multiplier",
        "node-allocatable-resource-insufficient-with-capacityKey",
    ],
)
def test_a_pod_that_does_not_fit_is_not_written(name: str) -> None:
    engine, store = cluster(case(name))
    before = store.get("ResourceClaim", "default", CLAIM)
    assert bind(engine, store).startswith("cannot bind to worker")
    assert statuses(store) is None and store.get("ResourceClaim", "default", CLAIM) == before


def test_a_failed_binding_clears_the_statuses_it_recorded() -> None:
    """Upstream Unreserve (clearNodeAllocatableResourceClaimStatus): the kubelet and kube-scheduler
    must not count resources for a pod that is not bound."""
    engine, store = cluster(case("node-allocatable-resource-multiplier"), FailingBinding)
    assert "403" in bind(engine, store)
    assert statuses(store) is None
    assert not store.get("ResourceClaim", "default", CLAIM).get("status", {}).get("reservedFor")


# --- the rules upstream's table does not reach -----------------------------------------------------


def variant(
    base: str, *, objects: list[dict[str, Any]] | None = None, pod_: dict[str, Any] | None = None
) -> Case:
    c = case(base)
    extra = objects or []
    return Case(
        c.name,
        [*c.objects, *extra] if isinstance(c.objects, list) else c.objects,
        pod_ or c.pod,
        c.want,
        c.nodes,
        c.gates,
    )


def other_pod(name: str, *, cpu: str = "0", claim: str | None = None, bound: bool = True) -> dict[str, Any]:
    p = pod(
        name,
        containers=[container("c1", {"cpu": cpu} if cpu != "0" else {})],
        node_name=WORKER if bound else None,
    )
    if claim is not None:
        p["status"] = {
            "nodeAllocatableResourceClaimStatuses": [
                {"resourceClaimName": claim, "containers": ["c1"], "resources": {"cpu": "1"}}
            ]
        }
    return p


def filter_answer(
    engine: Engine, store: MemoryStore, name: str = POD
) -> tuple[list[str], dict[str, str], dict[str, str], str]:
    result = engine.filter(parse_pod(store.get("Pod", "default", name)), [WORKER])
    return result.passed, result.failed, result.unresolvable, result.error


def test_the_node_s_other_pods_count_with_their_claim_statuses() -> None:
    """9 CPUs requested by a bound pod, plus 1 its claim stands for: the pod's one more CPU does
    not fit. Unschedulable, not Unresolvable: evicting that pod would make room."""
    c = variant(
        "node-allocatable-resource-multiplier", objects=[other_pod("busy", cpu="9", claim="someone-elses")]
    )
    engine, store = cluster(c)
    passed, failed, unresolvable, error = filter_answer(engine, store)
    assert passed == [] and not error and not unresolvable
    assert failed[WORKER] == "Insufficient cpu"


def test_finished_pods_do_not_count() -> None:
    busy = other_pod("done", cpu="9")
    busy["status"] = {"phase": "Succeeded"}
    engine, store = cluster(variant("node-allocatable-resource-multiplier", objects=[busy]))
    assert filter_answer(engine, store)[0] == [WORKER]


def allocated_on_worker() -> dict[str, Any]:
    """The pod's claim, allocated already (to a device on worker)."""
    c = pending()
    result = {"request": "req-1", "driver": "some-driver", "pool": WORKER, "device": "x"}
    c["status"] = {"allocation": {"devices": {"results": [result]}}}
    return c


def test_a_claim_another_pod_on_the_node_records_is_refused() -> None:
    """validateNodeAllocatableDRAClaimSharing: the pod's allocated claim is in another pod's
    claim statuses on the node (one such pod, or several)."""
    allocated = allocated_on_worker()
    base = case("node-allocatable-resource-multiplier")
    for users, reason in [
        (["first"], f"node allocatable resource claim {CLAIM} is already used by another pod"),
        (["first", "second"], f"node allocatable resource claim {CLAIM} shared by multiple pods"),
    ]:
        objects = [allocated, CLASS_A, *(other_pod(u, claim=CLAIM) for u in users)]
        engine, store = cluster(Case(base.name, objects, base.pod, base.want, base.nodes, base.gates))
        assert filter_answer(engine, store)[2] == {WORKER: reason}


def test_a_claim_no_container_uses_is_refused() -> None:
    p = container_pod()
    del p["spec"]["containers"][0]["resources"]
    engine, store = cluster(variant("node-allocatable-resource-multiplier", pod_=p))
    assert filter_answer(engine, store)[2] == {
        WORKER: f"claim {CLAIM}: node-allocatable resource claim not referenced by any container within the pod"
    }


def test_pod_level_requests_must_cover_the_claims() -> None:
    p = container_pod()
    p["spec"]["resources"] = {"requests": {"cpu": "500m"}}
    engine, store = cluster(variant("node-allocatable-resource-multiplier", pod_=p))
    assert filter_answer(engine, store)[2] == {
        WORKER: "pod level request for cpu is insufficient to cover the aggregated container and "
        "node-allocatable DRA requests"
    }


def test_a_capacity_key_on_a_device_that_is_not_shared_is_an_error() -> None:
    """No consumedCapacity in the result (the device does not allow multiple allocations):
    Filter's statusError, the pod's scheduling attempt fails."""
    slice_ = node_slice(WORKER, mapped_device(cpu=(None, "example.com/cpus")))
    slice_["spec"]["devices"][0]["capacity"] = {"example.com/cpus": {"value": "4"}}
    c = case("node-allocatable-resource-multiplier")
    assert isinstance(c.objects, list)
    objects = [o for o in c.objects if o.get("kind") != "ResourceSlice"] + [slice_]
    engine, store = cluster(Case(c.name, objects, c.pod, c.want, c.nodes, c.gates))
    error = filter_answer(engine, store)[3]
    assert (
        "ConsumedCapacity is nil, but Capacity key 'example.com/cpus' is set in NodeAllocatableResourceMappings for resource cpu"
        in error
    )


def test_consumed_capacity_times_multiplier_keeps_the_consumed_amount_s_format() -> None:
    """2 of the device's capacity, each standing for 1.5Gi of memory: 3Gi, written as the
    consumed quantity's (decimal) format says: 3221225472."""
    d = mapped_device("numa-0-cpus", memory=("1.5Gi", "example.com/cpus"))
    d["capacity"] = {"example.com/cpus": {"value": "10"}}
    d["allowMultipleAllocations"] = True
    slice_ = node_slice(WORKER, d, driver="node-allocatable-resource-driver")
    c = Case(
        "format",
        [capacity_claim("2"), CLASS_A, slice_],
        container_pod(),
        case("node-allocatable-resource-multiplier").want,
        [worker(allocatable={"cpu": "10", "memory": "10Gi"})],
        {**GATE, "DRAConsumableCapacity": True},
    )
    engine, store = cluster(c)
    assert bind(engine, store) == ""
    assert statuses(store) == entry(memory="3221225472")


def test_a_pod_being_bound_counts_before_the_watch_shows_it() -> None:
    """The first pod's bind recorded 6 CPUs the cache does not show yet (its watch lags): the
    second pod, asking the same, does not fit. In-tree, the first is an assumed pod."""
    base = case("node-allocatable-resource-multiplier")
    slice_ = node_slice(WORKER, mapped_device(cpu=("6", None)), mapped_device("instance-2", cpu=("6", None)))
    second = json.loads(json.dumps(container_pod()))
    second["metadata"].update(name="second", uid="uid-second")
    second["spec"]["resourceClaims"][0]["resourceClaimName"] = "second-claim"
    claim2 = pending("second-claim")
    c = Case(
        base.name,
        [pending(), claim2, CLASS_A, slice_, second],
        container_pod(),
        base.want,
        base.nodes,
        base.gates,
    )
    engine, store = cluster(c, following=False)
    assert bind(engine, store) == ""
    assert engine.state.pods[("default", POD)].node_name == ""  # the cache is behind
    passed, failed, _unresolvable, _error = filter_answer(engine, store, "second")
    assert passed == [] and failed == {WORKER: "Insufficient cpu"}


# --- from review: what is counted while pods are being bound, sharing, stale statuses -----------


def during(api_method: str) -> tuple[type[MemoryAPI], list[Any]]:
    """A MemoryAPI that, inside the first call of ``api_method``, runs ``hooks[0]()`` and keeps
    what it returned in ``hooks[1:]``."""
    hooks: list[Any] = []

    class Hooked(MemoryAPI):
        async def _hook(self) -> None:
            if len(hooks) == 1:
                hooks.append(hooks[0]())

    async def wrapped(self: Hooked, *args: Any, **kw: Any) -> Any:
        await self._hook()
        return await getattr(MemoryAPI, api_method)(self, *args, **kw)

    setattr(Hooked, api_method, wrapped)
    return Hooked, hooks


def second_pod_objects(first: dict[str, Any]) -> list[dict[str, Any]]:
    """Two devices standing for 3 CPUs each, and a second pod like ``first`` (1 CPU + a device)."""
    slice_ = node_slice(WORKER, mapped_device(cpu=("3", None)), mapped_device("instance-2", cpu=("3", None)))
    second = json.loads(json.dumps(first))
    second["metadata"].update(name="second", uid="uid-second")
    second["spec"]["resourceClaims"][0]["resourceClaimName"] = "second-claim"
    return [pending("second-claim"), CLASS_A, slice_, second]


def test_a_pod_counts_from_its_bind_s_decision_not_from_its_claim_writes() -> None:
    """The second pod's filter runs while the first pod's claim is being written (4 of 7 CPUs
    each): it does not fit. In-tree, the first is an assumed pod by then."""
    api, hooks = during("update_claim_status")
    base = case("node-allocatable-resource-multiplier")
    first = container_pod()
    first["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1"}
    objects = [pending(), *second_pod_objects(first)]  # (the case's pod is ``first``)
    nodes = [worker(allocatable={"cpu": "7", "memory": "10Gi"})]
    engine, store = cluster(Case(base.name, objects, first, base.want, nodes, base.gates), api)
    second = parse_pod(store.get("Pod", "default", "second"))
    hooks.append(lambda: engine.filter(second, [WORKER]))
    assert bind(engine, store) == ""
    assert hooks[1].failed == {WORKER: "Insufficient cpu"}, hooks[1]


def test_a_pod_without_such_claims_counts_while_it_is_bound() -> None:
    """Every bind is an assumed pod: a claim-less pod asking 4 CPUs, being bound, leaves 3 of 7."""
    api, hooks = during("bind_pod")
    base = case("node-allocatable-resource-multiplier")
    plain = pod("plain", uid="uid-plain", containers=[container("c", {"cpu": "4"})])
    objects = [plain, pending(), CLASS_A, node_slice(WORKER, mapped_device(cpu=("4", None)))]
    nodes = [worker(allocatable={"cpu": "7", "memory": "10Gi"})]
    engine, store = cluster(Case(base.name, objects, container_pod(), base.want, nodes, base.gates), api)
    me = parse_pod(store.get("Pod", "default", POD))
    hooks.append(lambda: engine.filter(me, [WORKER]))
    assert bind(engine, store, "plain") == ""
    assert hooks[1].failed == {WORKER: "Insufficient cpu"}, hooks[1]


def test_another_namespace_or_a_finished_pod_does_not_share_the_claim() -> None:
    allocated = allocated_on_worker()
    base = case("node-allocatable-resource-multiplier")
    elsewhere = other_pod("elsewhere", claim=CLAIM)
    elsewhere["metadata"]["namespace"] = "team-b"
    finished = other_pod("finished", claim=CLAIM)
    finished["status"]["phase"] = "Succeeded"
    engine, store = cluster(
        Case(
            base.name, [allocated, CLASS_A, elsewhere, finished], base.pod, base.want, base.nodes, base.gates
        )
    )
    assert filter_answer(engine, store)[0] == [WORKER]


def test_statuses_of_an_earlier_attempt_are_cleared_when_this_one_has_none() -> None:
    """The pod's status still names a claim from an earlier attempt (its clearing failed); this
    bind's devices stand for nothing: the pod is bound without the old statuses."""
    base = case("node-allocatable-resource-multiplier")
    p = container_pod()
    p["status"] = {"nodeAllocatableResourceClaimStatuses": entry(cpu="1")}
    objects = [pending(), CLASS_A, node_slice(WORKER, device("instance-1"))]
    engine, store = cluster(Case(base.name, objects, p, base.want, base.nodes, base.gates))
    assert bind(engine, store) == ""
    assert statuses(store) is None


def test_a_mapping_that_does_not_apply_makes_no_status_and_a_missing_device_is_an_error() -> None:
    """hasNodeAllocatableClaims: a capacityKey the result did not consume gives nothing (no empty
    ``resources``, which the API server would refuse); a result naming no published device is
    Filter's error, naming the claim as namespace/name."""
    d = parse_resource_slice(
        node_slice(WORKER, mapped_device("numa-0-cpus", cpu=(None, "example.com/other")), driver="drv")
    ).devices[0]
    p = parse_pod(container_pod())
    result = {"request": "req-1", "driver": "drv", "pool": WORKER, "device": "numa-0-cpus"}
    allocation = {"devices": {"results": [{**result, "consumedCapacity": {"example.com/cpus": "1"}}]}}
    entries = na.pod_entries(p)
    assert na.claim_statuses(p, entries, {CLAIM: allocation}, lambda *_: d) == ()
    # A claim with a mapped device and a result whose device is gone (upstream logs and skips a
    # claim whose devices are all gone; here one is found, so the other is an error).
    gone = {**result, "device": "gone", "consumedCapacity": {"example.com/other": "1"}}
    two = {"devices": {"results": [{**result, "consumedCapacity": {"example.com/other": "1"}}, gone]}}
    with pytest.raises(
        na.NodeAllocatableError, match=f"claim default/{CLAIM}, device gone: device gone not found"
    ):
        na.claim_statuses(
            p, entries, {CLAIM: two}, lambda _drv, _pool, name: d if name == "numa-0-cpus" else None
        )


def test_preemption_counts_the_victims_node_resources_out() -> None:
    """kube-scheduler's dry run picks a 4-CPU pod to evict (NodeResourcesFit); the preempt verb
    judges the node with it gone, its CPUs included (in-tree, the dry run's NodeInfo has the
    victim removed when DynamicResources' Filter runs): the node is kept, with that victim."""
    base = case("node-allocatable-resource-multiplier")
    victim = pod(
        "victim", uid="uid-victim", node_name=WORKER, containers=[container("c", {"cpu": "4"})], priority=0
    )
    me = container_pod()
    me["spec"]["priority"] = 100
    objects = [victim, pending(), CLASS_A, node_slice(WORKER, mapped_device(cpu=("4", None)))]
    nodes = [worker(allocatable={"cpu": "7", "memory": "10Gi"})]
    engine, store = cluster(Case(base.name, objects, me, base.want, nodes, base.gates))
    p = parse_pod(store.get("Pod", "default", POD))
    assert engine.filter(p, [WORKER]).failed == {WORKER: "Insufficient cpu"}
    answer = engine.preempt(p, {WORKER: Candidate(("uid-victim",))})
    assert answer == {WORKER: Candidate(("uid-victim",))}, answer
