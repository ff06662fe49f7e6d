"""Upstream's TestPlugin table as released in Kubernetes v1.36.3, case by case.

Source: pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go, ``testPlugin``,
v1.36.3 (the tree openshift/microshift release-5.0 vendors). Each case whose outcome shows at
PreFilter/Filter runs twice, as in test_plugin_fidelity.py: through ``dra-extender simulate
--kubernetes-version 1.36`` (the CLI) and through ``Engine.filter`` with the 1.36 release. Cases
whose outcome lives only in later phases, or that need what the extender refuses or lacks, are
in :data:`NOT_EXPRESSIBLE`, each with the reason; :data:`UPSTREAM_NAMES` lists all 86.

How the translation reads upstream:

- Gates: testPlugin builds ``feature.Features`` from the case's ``disable*``/``enable*`` fields
  (:data:`PLUGIN_GATES` are those of a case that sets none); a field it never sets is false,
  e.g. EnableDRAPartitionableDevices. ``Case.gates`` holds what the case itself sets.
- Statuses: ``testContext.verify`` compares a rejection by its message only
  (``ErrorContains`` on ``AsError()``), never by its code. "reason" is Unschedulable or
  UnschedulableAndUnresolvable, "error" a statusError, as the v1.36.3 code path returns it
  (where the table writes another code, the case says so); ``contains`` holds substrings of
  upstream's message, all of which must be in the extender's (it adds detail to some messages
  and names the device in CEL errors: then the parts both share).
- Devices: upstream ignores the device names of allocation results (``IgnoreFields ... Device``)
  and some fixtures name placeholder devices; the devices here are the ones the allocator picks
  (the first free ones in slice order), with the requests exactly as upstream expects them.
- PreEnqueue's claim checks (missing-claim and friends) run again in PreFilter
  (``podResourceClaims``) with the same message, so they are PreFilter answers here.
"""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.allocator import Features
from extender.allocator.releases import release_of
from extender.cel import CelEnvironment
from extender.cli import main
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.engine import Engine
from tests.builders import (
    attrs,
    claim,
    container,
    device,
    device_class,
    exact,
    first_available,
    node,
    pod,
    resource_slice,
    with_allocatable,
)

RELEASE = release_of(36)

#: testPlugin's feature.Features for a case that sets none of its flags.
PLUGIN_GATES: dict[str, bool] = {
    "DRAAdminAccess": True,  # !disableDRAAdminAccess
    "DRADeviceBindingConditions": True,  # !disableDRADeviceBindingConditions
    "DRAResourceClaimDeviceStatus": True,  # !disableDRAResourceClaimDeviceStatus
    "DRADeviceTaints": False,  # enableDRADeviceTaints
    "DRASchedulerFilterTimeout": True,  # !disableDRASchedulerFilterTimeout
    "DRAPrioritizedList": False,  # enableDRAPrioritizedList
    "DRAExtendedResource": False,  # enableDRAExtendedResource
    "DRANodeAllocatableResources": False,  # enableDRANodeAllocatableResources
    "DRAConsumableCapacity": False,  # enableDRAConsumableCapacity
    "DRAWorkloadResourceClaims": False,  # enableDRAWorkloadResourceClaims
    "GenericWorkload": False,  # set together with enableDRAWorkloadResourceClaims
    "DRAPartitionableDevices": False,  # never set by testPlugin
    "DRAListTypeAttributes": False,  # never set by testPlugin
}

# --- upstream's fixtures, by their names ------------------------------------------------------------

WORKER, WORKER2, WORKER3 = "worker", "worker-2", "worker-3"
DRIVER, DRIVER2 = "some-driver", "some-driver-2"
POD, POD_UID = "my-pod", "1234"
CLAIM, CLAIM2 = "my-pod-my-resource", "my-pod-my-resource-2"
CLASS = "my-resource-class"
PODGROUP, PODGROUP_UID = "my-podgroup", "5678"
GPU, GPU2 = "example.com/gpu", "example.com/gpu2"
IMPLICIT = f"deviceclass.resource.kubernetes.io/{CLASS}"
EXTENDED = "<extended-resources>"  # the extender's name for the pod's extended-resource claim
FINALIZER = "resource.kubernetes.io/delete-protection"
BROKEN = f'device.attributes["{DRIVER}"].healthy'  # no such attribute on worker's device
ZERO_TIME = "0001-01-01T00:00:00Z"  # new(metav1.Time): non-nil, long past


def worker(name: str = WORKER, allocatable: dict[str, str | int] | None = None) -> dict[str, Any]:
    """A node labelled kubernetes.io/hostname=<name>, advertising ``allocatable``."""
    return with_allocatable(node(name, **{"kubernetes.io/hostname": name}), allocatable or {})


def node_slice(node_name: str, *devices: dict[str, Any], driver: str = DRIVER, **spec: Any) -> dict[str, Any]:
    """st.MakeResourceSlice(node, driver): pool named after the node, one slice."""
    return resource_slice(
        f"{node_name}-{driver}", list(devices), driver=driver, pool=node_name, node=node_name, **spec
    )


def instances(n: int) -> list[dict[str, Any]]:
    return [device(f"instance-{i}") for i in range(1, n + 1)]


def by_name(node_name: str) -> dict[str, Any]:
    """NodeSelector: metadata.name In [node_name] (a matchFields term)."""
    field_ = {"key": "metadata.name", "operator": "In", "values": [node_name]}
    return {"nodeSelectorTerms": [{"matchFields": [field_]}]}


def by_label(key: str, value: str) -> dict[str, Any]:
    expression = {"key": key, "operator": "In", "values": [value]}
    return {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}


WORKER_SLICE = node_slice(WORKER, device("instance-1"))
LARGE_WORKER_SLICE = node_slice(WORKER, *instances(4))
CLASS_A = device_class(CLASS, expression=None)
GPU_CLASS = device_class(CLASS, expression=None, extended_resource=GPU)
GPU2_CLASS = device_class(f"{CLASS}2", expression=None, extended_resource=GPU2)
TAINT = {"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}


def owned_by(name: str, uid: str, kind: str = "Pod", api_version: str = "v1") -> list[dict[str, Any]]:
    return [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}]


POD_OWNER = owned_by(POD, POD_UID)
PODGROUP_OWNER = owned_by(PODGROUP, PODGROUP_UID, "PodGroup", "scheduling.k8s.io/v1alpha2")
FOR_POD = {"resource": "pods", "name": POD, "uid": POD_UID}
FOR_PODGROUP = {
    "apiGroup": "scheduling.k8s.io",
    "resource": "podgroups",
    "name": PODGROUP,
    "uid": PODGROUP_UID,
}


def plain(name: str = CLAIM, requests: list[dict[str, Any]] | None = None, **meta: Any) -> dict[str, Any]:
    """st.MakeResourceClaim(): requests req-1, req-2, ... of class my-resource-class."""
    return claim(name, requests or [exact("req-1", cls=CLASS)], **meta)


def pending(name: str = CLAIM, requests: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A claim the pod owns (pendingClaim and friends)."""
    return plain(name, requests, ownerReferences=POD_OWNER)


def allocation(
    *results: tuple[str, str],
    node_name: str = WORKER,
    driver: str = DRIVER,
    pool: str = WORKER,
    **extra: Any,
) -> dict[str, Any]:
    """A status.allocation: (request, device) results, available on ``node_name``."""
    out = [{"request": r, "driver": driver, "pool": pool, "device": d, **extra} for r, d in results]
    return {"devices": {"results": out}, "nodeSelector": by_name(node_name)}


ON_WORKER = allocation(("req-1", "instance-1"))


def with_allocation(c: dict[str, Any], alloc: dict[str, Any], **status: Any) -> dict[str, Any]:
    """``c`` allocated (st's Allocation also adds the delete-protection finalizer)."""
    c["metadata"]["finalizers"] = [FINALIZER]
    c["status"] = {"allocation": alloc, **status}
    return c


def allocated(name: str = CLAIM, **status: Any) -> dict[str, Any]:
    """allocatedClaim: the pod's claim, allocated to worker's instance-1."""
    return with_allocation(pending(name), ON_WORKER, **status)


def other_allocated(admin: bool = False) -> dict[str, Any]:
    """otherAllocatedClaim: another claim holding worker's instance-1."""
    c = with_allocation(plain("not-my-claim"), allocation(("req-1", "instance-1")))
    if admin:
        c["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
        c["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    return c


def deleted(c: dict[str, Any]) -> dict[str, Any]:
    """``c`` with a deletionTimestamp (being deleted)."""
    c["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return c


def ago(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))


BINDING: dict[str, Any] = {"bindingConditions": ["condition"], "bindingFailureConditions": ["failed"]}


def binding_claim(
    name: str = CLAIM,
    *,
    timestamp: str = ZERO_TIME,
    conditions: dict[str, str] | None = None,
    driver: str = DRIVER,
    dev: str = "instance-1",
    request: str = "req-1",
) -> dict[str, Any]:
    """A claim allocated to a device with binding conditions and its status.devices entry
    (``conditions``: type -> status; None: an entry without conditions)."""
    alloc = allocation((request, dev), driver=driver, **BINDING)
    alloc["allocationTimestamp"] = timestamp
    entry: dict[str, Any] = {"driver": driver, "pool": WORKER, "device": dev}
    if conditions is not None:
        entry["conditions"] = [
            {"type": t, "status": s, "reason": "Test", "message": "", "lastTransitionTime": ZERO_TIME}
            for t, s in conditions.items()
        ]
    return with_allocation(pending(name), alloc, devices=[entry])


BOUND = {"condition": "True", "failed": "False"}
FAILED = {"condition": "False", "failed": "True"}


def fabric_slice(driver: str = DRIVER, dev: str = "instance-1") -> dict[str, Any]:
    """fabricSlice: a device that binds to the node, with binding conditions. Upstream sets both
    nodeName and nodeSelector (the API server would refuse that; GatherPools reads nodeName
    first); the same node here through the selector alone."""
    d = device(dev, bindsToNode=True, **BINDING)
    return resource_slice(
        f"{WORKER}-{driver}", [d], driver=driver, pool=WORKER, node=None, nodeSelector=by_name(WORKER)
    )


def my_pod(*claims: str, **extra: Any) -> dict[str, Any]:
    """podWithClaimName (podWithTwoClaimNames with two)."""
    return pod(POD, list(claims or (CLAIM,)), uid=POD_UID, **extra)


def template_pod(in_status: bool = True) -> dict[str, Any]:
    """podWithClaimTemplate(InStatus): entry my-resource from a template, the claim named in
    the status or (not yet) at all."""
    p = pod(POD, templates={"my-resource": CLAIM}, uid=POD_UID)
    if not in_status:
        del p["status"]
    return p


def grouped(p: dict[str, Any]) -> dict[str, Any]:
    """The pod in PodGroup my-podgroup (spec.schedulingGroup)."""
    p["spec"]["schedulingGroup"] = {"podGroupName": PODGROUP}
    return p


def gpu_pod(*requests: dict[str, str | int]) -> dict[str, Any]:
    """st.MakePod().Req(...)...: one container con<i> per map of extended-resource requests."""
    return pod(POD, uid=POD_UID, containers=[container(f"con{i}", r) for i, r in enumerate(requests)])


def extended_claim(node_name: str = WORKER) -> dict[str, Any]:
    """extendedResourceClaim(Node2): the pod's extended-resource claim from an earlier cycle,
    allocated for ``node_name``."""
    c = plain(
        "my-pod-extended-resources-0",
        [exact("container-0-request-0", cls=CLASS)],
        generateName="my-pod-extended-resources-",
        annotations={"resource.kubernetes.io/extended-resource-claim": "true"},
        ownerReferences=POD_OWNER,
    )
    return with_allocation(c, allocation(("container-0-request-0", "instance-1"), node_name=node_name))


#: testPlugin turns GenericWorkload on with EnableDRAWorkloadResourceClaims (it depends on it).
GROUP_GATES = {"DRAWorkloadResourceClaims": True, "GenericWorkload": True}
#: allocatedClaimWithWrongTopology's allocation: available on no node.
WRONG_TOPOLOGY = {"nodeSelector": by_label("no-such-label", "no-such-value")}


def pod_group(template: bool = False) -> dict[str, Any]:
    """podGroupWithClaimName (podGroupWithClaimTemplate): its entry is exactly the pod's (the
    entry names are the extender's builders', my_pod's and template_pod's)."""
    entry = (
        {"name": "my-resource", "resourceClaimTemplateName": "template"}
        if template
        else {
            "name": CLAIM,
            "resourceClaimName": CLAIM,
        }
    )
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": PODGROUP, "namespace": "default", "uid": PODGROUP_UID},
        "spec": {"resourceClaims": [entry]},
    }


def pod_group_claim(alloc: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    """pendingPodGroupClaim (the PodGroup owns it), allocated with ``alloc`` if given."""
    c = plain(ownerReferences=PODGROUP_OWNER)
    return c if alloc is None else with_allocation(c, alloc, **status)


#: workerNodeWithCapacity: 10 CPUs, 10Gi of memory, 32 pods.
CAPACITY_WORKER = worker(allocatable={"cpu": "10", "memory": "10Gi", "pods": 32})
NODE_ALLOCATABLE_DRIVER = "node-allocatable-resource-driver"
CPUS = "example.com/cpus"


def mapped_device(name: str = "instance-1", **mappings: tuple[str | None, str | None]) -> dict[str, Any]:
    """A device with nodeAllocatableResourceMappings: resource -> (allocationMultiplier, capacityKey)."""
    table = {}
    for resource, (multiplier, key) in mappings.items():
        entry = {"allocationMultiplier": multiplier} if multiplier is not None else {}
        if key is not None:
            entry["capacityKey"] = key
        table[resource] = entry
    return device(name, nodeAllocatableResourceMappings=table)


def cpus_slice(memory: str | None = None) -> dict[str, Any]:
    """workerNodeSliceWithNodeAllocatableResource: numa-0-cpus, 10 example.com/cpus to share,
    standing for that many CPUs (and, given ``memory``, that much memory per allocation)."""
    d = mapped_device("numa-0-cpus", cpu=(None, CPUS), **({"memory": (memory, None)} if memory else {}))
    d["capacity"] = {CPUS: {"value": "10"}}
    d["allowMultipleAllocations"] = True
    return node_slice(WORKER, d, driver=NODE_ALLOCATABLE_DRIVER)


def capacity_claim(cpus: str) -> dict[str, Any]:
    """pendingNodeAllocatableClaimWithCapacity: one device with ``cpus`` of example.com/cpus."""
    return pending(requests=[exact("req-1", cls=CLASS, capacity={"requests": {CPUS: cpus}})])


def container_pod() -> dict[str, Any]:
    """podWithClaimReferenceInContainer: entry my-resource names the claim; container c1 uses it."""
    p = pod(POD, uid=POD_UID, containers=[container("c1", {})])
    p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "my-resource"}]}
    p["spec"]["resourceClaims"] = [{"name": "my-resource", "resourceClaimName": CLAIM}]
    return p


# --- the cases ----------------------------------------------------------------------------------------


@dataclass
class Want:
    #: "fits", "reason" or "error", and substrings of the reason / error (all must be in it).
    outcome: str
    contains: tuple[str, ...] = ()
    #: For "fits": claim -> [(request, device), ...], exactly what the node's allocations hold.
    devices: dict[str, list[tuple[str, str]]] | None = None


def fits(devices: dict[str, list[tuple[str, str]]] | None = None) -> Want:
    return Want("fits", devices=devices)


def reason(*contains: str) -> Want:
    return Want("reason", contains)


def error(*contains: str) -> Want:
    return Want("error", contains)


#: Upstream's "claim default/my-pod-my-resource: selector #0: CEL runtime error: no such key: healthy"
#: (and the class's): the extender names the device after the selector ("selector #0 on device
#: some-driver/worker/instance-1: CEL runtime error: ..."), so both parts are matched.
CLAIM_CEL_ERROR = ("claim default/my-pod-my-resource: selector #0", "CEL runtime error: no such key: healthy")
CLASS_CEL_ERROR = ("class my-resource-class: selector #0", "CEL runtime error: no such key: healthy")
NOTHING_NEW: dict[str, list[tuple[str, str]]] = {}  # fits without allocating anything
INSTANCE_1 = {CLAIM: [("req-1", "instance-1")]}


@dataclass
class Case:
    name: str
    #: The objects besides nodes and pod; a function for the time-sensitive ones (upstream's
    #: patchTestCase), called right before the case runs.
    objects: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]]
    pod: dict[str, Any]
    #: The answer for worker, or per node name (nodes not named: upstream does not look).
    want: Want | dict[str, Want]
    nodes: list[dict[str, Any]] = field(default_factory=lambda: [worker()])
    #: The feature.Features fields the case sets, as gates (over PLUGIN_GATES).
    gates: dict[str, bool] = field(default_factory=dict)
    #: DynamicResourcesArgs.FilterTimeout (seconds; None: the default).
    timeout: float | None = None


CASES = [
    # v1.36.3 dynamicresources_test.go TestPlugin/empty
    Case("empty", [], pod("foo"), fits(NOTHING_NEW)),
    # v1.36.3 dynamicresources_test.go TestPlugin/empty-with-extended-resources-enabled
    Case(
        "empty-with-extended-resources-enabled",
        [],
        pod("foo"),
        fits(NOTHING_NEW),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/claim-reference (PreBind's reservation: not here)
    Case("claim-reference", [allocated(), plain("not-my-claim")], my_pod(), fits(NOTHING_NEW)),
    # v1.36.3 dynamicresources_test.go TestPlugin/claim-template
    Case("claim-template", [allocated(), plain("not-my-claim")], template_pod(), fits(NOTHING_NEW)),
    # v1.36.3 dynamicresources_test.go TestPlugin/podgroup-claim-reference-feature-disabled-reserves-for-pod
    # (the PodGroup object is left out: with the gate off nothing reads it)
    Case(
        "podgroup-claim-reference-feature-disabled-reserves-for-pod",
        [with_allocation(plain(ownerReferences=PODGROUP_OWNER), ON_WORKER), plain("not-my-claim")],
        grouped(my_pod()),
        fits(NOTHING_NEW),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/missing-claim (PreEnqueue; PreFilter says the same)
    Case(
        "missing-claim",
        [allocated(), plain("not-my-claim")],
        template_pod(in_status=False),
        reason('pod "default/my-pod": ResourceClaim not created yet'),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/deleted-claim
    Case(
        "deleted-claim",
        [deleted(allocated())],
        template_pod(),
        reason('resourceclaim "my-pod-my-resource" is being deleted'),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/wrong-claim
    Case(
        "wrong-claim",
        [with_allocation(plain(ownerReferences=owned_by(POD, POD_UID + "123")), ON_WORKER)],
        template_pod(),
        reason(
            "ResourceClaim default/my-pod-my-resource was not created for Pod default/my-pod (Pod is not owner)"
        ),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/no-resources
    Case("no-resources", [pending(), CLASS_A], my_pod(), reason("cannot allocate all claims")),
    # v1.36.3 dynamicresources_test.go TestPlugin/with-resources
    Case("with-resources", [pending(), CLASS_A, WORKER_SLICE], my_pod(), fits(INSTANCE_1)),
    # v1.36.3 dynamicresources_test.go TestPlugin/podgroup-with-resources-feature-disabled-reserves-for-pod
    Case(
        "podgroup-with-resources-feature-disabled-reserves-for-pod",
        [plain(ownerReferences=PODGROUP_OWNER), CLASS_A, WORKER_SLICE],
        grouped(my_pod()),
        fits(INSTANCE_1),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/with-resources-has-finalizer
    Case(
        "with-resources-has-finalizer",
        [plain(ownerReferences=POD_OWNER, finalizers=[FINALIZER]), CLASS_A, WORKER_SLICE],
        my_pod(),
        fits(INSTANCE_1),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/with-resources-finalizer-gets-removed
    # (the removal happens before PreBind: only Filter's answer here)
    Case(
        "with-resources-finalizer-gets-removed",
        [plain(ownerReferences=POD_OWNER, finalizers=[FINALIZER]), CLASS_A, WORKER_SLICE],
        my_pod(),
        fits(INSTANCE_1),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/with-resources-finalizer-gets-added (likewise)
    Case(
        "with-resources-finalizer-gets-added", [pending(), CLASS_A, WORKER_SLICE], my_pod(), fits(INSTANCE_1)
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/skip-bind (Unreserve before PreBind: not here)
    Case("skip-bind", [pending(), CLASS_A, WORKER_SLICE], my_pod(), fits(INSTANCE_1)),
    # v1.36.3 dynamicresources_test.go TestPlugin/exhausted-resources-in-informer-cache
    Case(
        "exhausted-resources-in-informer-cache",
        [pending(), other_allocated(), CLASS_A, WORKER_SLICE],
        my_pod(),
        reason("cannot allocate all claims"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/tainted-device-disabled
    Case(
        "tainted-device-disabled",
        [pending(), CLASS_A, node_slice(WORKER, device("instance-1", taints=[TAINT]))],
        my_pod(),
        fits(INSTANCE_1),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/tainted-device-enabled
    Case(
        "tainted-device-enabled",
        [pending(), CLASS_A, node_slice(WORKER, device("instance-1", taints=[TAINT]))],
        my_pod(),
        reason("cannot allocate all claims"),
        gates={"DRADeviceTaints": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/request-admin-access-with-DRAAdminAccess-featuregate
    Case(
        "request-admin-access-with-DRAAdminAccess-featuregate",
        [
            pending(requests=[exact("req-1", cls=CLASS, adminAccess=True)]),
            other_allocated(),
            CLASS_A,
            WORKER_SLICE,
        ],
        my_pod(),
        fits(INSTANCE_1),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/request-admin-access-without-DRAAdminAccess-featuregate
    # (upstream emulates 1.35 for this; DRAAdminAccess is locked on in 1.36). The table writes
    # UnschedulableAndUnresolvable, but verify compares the message only: validateDeviceRequest's
    # plain error makes Filter return statusError.
    Case(
        "request-admin-access-without-DRAAdminAccess-featuregate",
        [
            pending(requests=[exact("req-1", cls=CLASS, adminAccess=True)]),
            other_allocated(),
            CLASS_A,
            WORKER_SLICE,
        ],
        my_pod(),
        error(
            "claim default/my-pod-my-resource, request req-1: admin access is requested, but the feature is disabled"
        ),
        gates={"DRAAdminAccess": False},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/structured-ignore-allocated-admin-access
    Case(
        "structured-ignore-allocated-admin-access",
        [pending(), other_allocated(admin=True), CLASS_A, WORKER_SLICE],
        my_pod(),
        fits(INSTANCE_1),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/claim-parameters-CEL-runtime-error
    Case(
        "claim-parameters-CEL-runtime-error",
        [pending(requests=[exact("req-1", cls=CLASS, selectors=[BROKEN])]), CLASS_A, WORKER_SLICE],
        my_pod(),
        error(*CLAIM_CEL_ERROR),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/class-parameters-CEL-runtime-error
    Case(
        "class-parameters-CEL-runtime-error",
        [pending(), device_class(CLASS, expression=BROKEN), WORKER_SLICE],
        my_pod(),
        error(*CLASS_CEL_ERROR),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/CEL-runtime-error-for-one-of-two-nodes
    # (worker's Error aborts the cycle: upstream does not filter worker-2, the pod stays pending)
    Case(
        "CEL-runtime-error-for-one-of-two-nodes",
        [
            pending(requests=[exact("req-1", cls=CLASS, selectors=[BROKEN])]),
            CLASS_A,
            WORKER_SLICE,
            node_slice(WORKER2, device("instance-1", attributes=attrs(healthy=True))),
        ],
        my_pod(),
        {WORKER: error(*CLAIM_CEL_ERROR)},
        nodes=[worker(), worker(WORKER2)],
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/CEL-runtime-error-for-one-of-three-nodes
    # (upstream writes the status as UnschedulableAndUnresolvable but compares its message only;
    # Filter returns statusError, which aborts before PreScore)
    Case(
        "CEL-runtime-error-for-one-of-three-nodes",
        [
            pending(requests=[exact("req-1", cls=CLASS, selectors=[BROKEN])]),
            CLASS_A,
            WORKER_SLICE,
            node_slice(WORKER2, device("instance-1", attributes=attrs(healthy=True))),
            node_slice(WORKER3, device("instance-1", attributes=attrs(healthy=True))),
        ],
        my_pod(),
        {WORKER: error(*CLAIM_CEL_ERROR)},
        nodes=[worker(), worker(WORKER2), worker(WORKER3)],
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/missing-class
    Case(
        "missing-class",
        [pending()],
        my_pod(),
        reason("request req-1: device class my-resource-class does not exist"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/wrong-topology (PostFilter's deallocation: not here)
    Case(
        "wrong-topology",
        [with_allocation(pending(), {"nodeSelector": by_label("no-such-label", "no-such-value")})],
        my_pod(),
        reason("resourceclaim not available on the node"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/good-topology
    Case(
        "good-topology",
        [with_allocation(pending(), {"nodeSelector": by_label("kubernetes.io/hostname", WORKER)})],
        my_pod(),
        fits(NOTHING_NEW),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/bind-failure (Unreserve after a failed bind: not here)
    Case(
        "bind-failure",
        [with_allocation(pending(), {"nodeSelector": by_label("kubernetes.io/hostname", WORKER)})],
        my_pod(),
        fits(NOTHING_NEW),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/postfilter-skip-unreserve-podgroup-feature-disabled
    # (reserved for the PodGroup, which the pod does not count as itself with the gate off)
    Case(
        "postfilter-skip-unreserve-podgroup-feature-disabled",
        [
            with_allocation(
                plain(ownerReferences=PODGROUP_OWNER),
                {"nodeSelector": by_label("no-such-label", "no-such-value")},
                reservedFor=[FOR_PODGROUP],
            ),
            CLASS_A,
        ],
        grouped(my_pod()),
        reason("resourceclaim not available on the node"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/reserved-okay
    Case("reserved-okay", [allocated(reservedFor=[FOR_POD])], my_pod(), fits(NOTHING_NEW)),
    # v1.36.3 dynamicresources_test.go TestPlugin/claim-with-request-with-unknown-device-class
    Case(
        "claim-with-request-with-unknown-device-class",
        [plain(requests=[exact("req-1", cls="does-not-exist")])],
        my_pod(),
        reason("request req-1: device class does-not-exist does not exist"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/claim-with-prioritized-list-feature-disabled
    Case(
        "claim-with-prioritized-list-feature-disabled",
        [plain(requests=[first_available("req-1", exact("subreq-1", cls=CLASS))]), CLASS_A],
        my_pod(),
        reason(
            "claim default/my-pod-my-resource, request req-1: has subrequests, but the DRAPrioritizedList "
            "feature is disabled"
        ),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/claim-with-prioritized-list-unknown-device-class
    Case(
        "claim-with-prioritized-list-unknown-device-class",
        [plain(requests=[first_available("req-1", exact("subreq-1", cls="does-not-exist"))])],
        my_pod(),
        reason("request req-1/subreq-1: device class does-not-exist does not exist"),
        gates={"DRAPrioritizedList": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/claim-with-prioritized-list
    Case(
        "claim-with-prioritized-list",
        [pending(requests=[first_available("req-1", exact("subreq-1", cls=CLASS))]), CLASS_A, WORKER_SLICE],
        my_pod(),
        fits({CLAIM: [("req-1/subreq-1", "instance-1")]}),
        gates={"DRAPrioritizedList": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-with-node-resource
    Case(
        "extended-resource-name-with-node-resource",
        [GPU_CLASS],
        gpu_pod({GPU: 1}),
        fits(NOTHING_NEW),
        nodes=[worker(allocatable={"pods": 32, GPU: 1})],
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-one-device-plugin-one-dra
    Case(
        "extended-resource-one-device-plugin-one-dra",
        [GPU_CLASS, GPU2_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1, GPU2: 1}),
        fits({EXTENDED: [("container-0-request-1", "instance-1")]}),
        nodes=[worker(allocatable={"pods": 32, GPU: 1})],
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-with-zero-allocatable
    Case(
        "extended-resource-name-with-zero-allocatable",
        [GPU_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        fits({EXTENDED: [("container-0-request-0", "instance-1")]}),
        nodes=[worker(allocatable={"pods": 32, GPU: 0})],
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/non-DRA-extended-resource-name-with-zero-allocatable
    # (PreFilter Skip: no class backs example.com/gpu)
    Case(
        "non-DRA-extended-resource-name-with-zero-allocatable",
        [CLASS_A, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        fits(NOTHING_NEW),
        nodes=[worker(allocatable={"pods": 32, GPU: 0})],
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-no-resource
    Case(
        "extended-resource-name-no-resource",
        [GPU_CLASS],
        gpu_pod({GPU: 1}),
        reason("cannot allocate all claims"),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-with-resources
    Case(
        "extended-resource-name-with-resources",
        [GPU_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        fits({EXTENDED: [("container-0-request-0", "instance-1")]}),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/implicit-extended-resource-name-with-resources
    Case(
        "implicit-extended-resource-name-with-resources",
        [GPU_CLASS, LARGE_WORKER_SLICE],
        gpu_pod({IMPLICIT: 1, GPU: 2}),
        fits(
            {
                EXTENDED: [
                    ("container-0-request-0", "instance-1"),
                    ("container-0-request-1", "instance-2"),
                    ("container-0-request-1", "instance-3"),
                ]
            }
        ),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/implicit-extended-resource-name-two-containers-with-resources
    Case(
        "implicit-extended-resource-name-two-containers-with-resources",
        [GPU_CLASS, LARGE_WORKER_SLICE],
        gpu_pod({IMPLICIT: 1}, {GPU: 2}),
        fits(
            {
                EXTENDED: [
                    ("container-0-request-0", "instance-1"),
                    ("container-1-request-0", "instance-2"),
                    ("container-1-request-0", "instance-3"),
                ]
            }
        ),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-with-resources-fail-patch
    # (PreBind's failing patch: not here)
    Case(
        "extended-resource-name-with-resources-fail-patch",
        [GPU_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        fits({EXTENDED: [("container-0-request-0", "instance-1")]}),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-with-resources-has-claim
    # (PostFilter's deletion of the claim: not here)
    Case(
        "extended-resource-name-with-resources-has-claim",
        [extended_claim(), GPU_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        reason("cannot schedule extended resource claim"),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-with-resources-delete-claim
    Case(
        "extended-resource-name-with-resources-delete-claim",
        [extended_claim(WORKER2), GPU_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        reason("cannot schedule extended resource claim"),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-bind-failure (Unreserve: not here)
    Case(
        "extended-resource-name-bind-failure",
        [GPU_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        fits({EXTENDED: [("container-0-request-0", "instance-1")]}),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-skip-bind (Unreserve: not here)
    Case(
        "extended-resource-name-skip-bind",
        [GPU_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        fits({EXTENDED: [("container-0-request-0", "instance-1")]}),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/extended-resource-name-claim-creation-failure
    # (PreBind's failing create: not here)
    Case(
        "extended-resource-name-claim-creation-failure",
        [GPU_CLASS, WORKER_SLICE],
        gpu_pod({GPU: 1}),
        fits({EXTENDED: [("container-0-request-0", "instance-1")]}),
        gates={"DRAExtendedResource": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/timeout (FilterTimeout 1ns; upstream skips it on
    # Windows for its coarse timers). Since 1.36 Filter returns statusError "node worker: timed out
    # trying to allocate devices" (kubernetes#137607: retried via backoff), as the extender does.
    Case(
        "timeout",
        [plain(requests=[exact(f"req-{i}", cls=CLASS) for i in range(1, 6)]), CLASS_A, LARGE_WORKER_SLICE],
        my_pod(),
        error("node worker: timed out trying to allocate devices"),
        timeout=1e-9,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/timeout_disabled
    Case(
        "timeout_disabled",
        [pending(), CLASS_A, WORKER_SLICE],
        my_pod(),
        fits(INSTANCE_1),
        gates={"DRASchedulerFilterTimeout": False},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/timeout_zero (FilterTimeout 0: no limit; simulate's
    # --timeout must be positive, so the default budget, which this allocation does not need)
    Case("timeout_zero", [pending(), CLASS_A, WORKER_SLICE], my_pod(), fits(INSTANCE_1)),
    # v1.36.3 dynamicresources_test.go TestPlugin/dont-add-allocation-timestamp (PreBind: not here)
    Case(
        "dont-add-allocation-timestamp",
        [pending(), CLASS_A, WORKER_SLICE],
        my_pod(),
        fits(INSTANCE_1),
        gates={"DRADeviceBindingConditions": False},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/add-allocation-timestamp (PreBind: not here)
    Case("add-allocation-timestamp", [pending(), CLASS_A, WORKER_SLICE], my_pod(), fits(INSTANCE_1)),
    # v1.36.3 dynamicresources_test.go TestPlugin/add-allocation-timestamp-failure
    # (the deallocation happens before PreBind: Filter's answer only)
    Case("add-allocation-timestamp-failure", [allocated()], my_pod(), fits(NOTHING_NEW)),
    # v1.36.3 dynamicresources_test.go TestPlugin/bind-claim-with-binding-conditions
    # (PreBind's binding timeout: not here)
    Case(
        "bind-claim-with-binding-conditions",
        [pending(), CLASS_A, fabric_slice()],
        my_pod(),
        fits(INSTANCE_1),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/bind-failure-concurrent-deallocation (likewise)
    Case(
        "bind-failure-concurrent-deallocation",
        [pending(), CLASS_A, fabric_slice()],
        my_pod(),
        fits(INSTANCE_1),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/bound-claim-with-succeeded-binding-conditions
    Case(
        "bound-claim-with-succeeded-binding-conditions",
        [binding_claim(conditions=BOUND)],
        my_pod(),
        fits(NOTHING_NEW),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/bound-claim-with-failed-binding
    Case(
        "bound-claim-with-failed-binding",
        [binding_claim(conditions=FAILED), WORKER_SLICE],
        my_pod(),
        reason("resourceclaim not available on the node"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/bound-claim-with-timed-out-binding
    Case(
        "bound-claim-with-timed-out-binding",
        lambda: [binding_claim(timestamp=ago(10 * 60))],
        my_pod(),
        reason("resourceclaim not available on the node"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/prebind-fail-with-binding-timeout
    # (not timed out at Filter, allocated 590 s before a 600 s BindingTimeout; PreBind's timeout:
    # not here)
    Case(
        "prebind-fail-with-binding-timeout",
        lambda: [binding_claim(timestamp=ago(600 - 10))],
        my_pod(),
        fits(NOTHING_NEW),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/bound-claim-with-mixed-binding-conditions
    Case(
        "bound-claim-with-mixed-binding-conditions",
        lambda: [
            binding_claim(timestamp=ago(10 * 60), conditions={"condition1": "True", "condition2": "False"})
        ],
        my_pod(),
        reason("resourceclaim not available on the node"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/bound-claim-without-binding-conditions
    Case(
        "bound-claim-without-binding-conditions",
        [allocated(), plain("not-my-claim")],
        template_pod(),
        fits(NOTHING_NEW),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/multi-claims-binding-conditions-all-success
    Case(
        "multi-claims-binding-conditions-all-success",
        [
            binding_claim(conditions=BOUND),
            binding_claim(CLAIM2, conditions=BOUND, driver=DRIVER2, dev="instance-2", request="req-2"),
            CLASS_A,
            fabric_slice(),
            fabric_slice(DRIVER2, "instance-2"),
        ],
        my_pod(CLAIM, CLAIM2),
        fits(NOTHING_NEW),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/multi-claims-binding-conditions-one-fail
    Case(
        "multi-claims-binding-conditions-one-fail",
        [
            binding_claim(conditions=BOUND),
            binding_claim(CLAIM2, conditions=FAILED, driver=DRIVER2, dev="instance-2", request="req-2"),
            CLASS_A,
            fabric_slice(),
            fabric_slice(DRIVER2, "instance-2"),
        ],
        my_pod(CLAIM, CLAIM2),
        reason("resourceclaim not available on the node"),
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/single-claim-prioritized-list-scoring
    # (Score: see test_prioritize_ranks_as_the_plugin_scores)
    Case(
        "single-claim-prioritized-list-scoring",
        [
            pending(
                requests=[
                    first_available(
                        "req-1",
                        exact("subreq-1", cls=CLASS, selectors=[BROKEN]),
                        exact("subreq-2", cls=CLASS),
                    )
                ]
            ),
            CLASS_A,
            node_slice(WORKER, device("instance-1", attributes=attrs(healthy=True))),
            node_slice(WORKER2, device("instance-1", attributes=attrs(healthy=False))),
        ],
        my_pod(),
        {
            WORKER: fits({CLAIM: [("req-1/subreq-1", "instance-1")]}),
            WORKER2: fits({CLAIM: [("req-1/subreq-2", "instance-1")]}),
        },
        nodes=[worker(), worker(WORKER2)],
        gates={"DRAPrioritizedList": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/multiple-claims-prioritized-list-scoring
    Case(
        "multiple-claims-prioritized-list-scoring",
        [
            pending(requests=[first_available("req-1", exact("subreq-1", cls=CLASS))]),
            pending(
                CLAIM2,
                [
                    first_available(
                        "req-1", *(exact(f"subreq-{i}", cls=CLASS, count=5 - i) for i in range(1, 5))
                    )
                ],
            ),
            CLASS_A,
            node_slice(WORKER, *instances(4)),
            node_slice(WORKER2, *instances(2)),
            node_slice(WORKER3, *instances(1)),
        ],
        my_pod(CLAIM, CLAIM2),
        {
            WORKER: fits(
                {
                    CLAIM: [("req-1/subreq-1", "instance-1")],
                    CLAIM2: [("req-1/subreq-2", f"instance-{i}") for i in (2, 3, 4)],
                }
            ),
            WORKER2: fits(
                {CLAIM: [("req-1/subreq-1", "instance-1")], CLAIM2: [("req-1/subreq-4", "instance-2")]}
            ),
            WORKER3: reason("cannot allocate all claims"),
        },
        nodes=[worker(), worker(WORKER2), worker(WORKER3)],
        gates={"DRAPrioritizedList": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/multiple-requests-prioritized-list-scoring
    Case(
        "multiple-requests-prioritized-list-scoring",
        [
            pending(
                requests=[
                    first_available(r, exact("subreq-1", cls=CLASS, count=2), exact("subreq-2", cls=CLASS))
                    for r in ("req-1", "req-2")
                ]
            ),
            CLASS_A,
            node_slice(WORKER, *instances(4)),
            node_slice(WORKER2, *instances(3)),
            node_slice(WORKER3, *instances(2)),
        ],
        my_pod(),
        {
            WORKER: fits(
                {
                    CLAIM: [
                        ("req-1/subreq-1", "instance-1"),
                        ("req-1/subreq-1", "instance-2"),
                        ("req-2/subreq-1", "instance-3"),
                        ("req-2/subreq-1", "instance-4"),
                    ]
                }
            ),
            WORKER2: fits(
                {
                    CLAIM: [
                        ("req-1/subreq-1", "instance-1"),
                        ("req-1/subreq-1", "instance-2"),
                        ("req-2/subreq-2", "instance-3"),
                    ]
                }
            ),
            WORKER3: fits({CLAIM: [("req-1/subreq-2", "instance-1"), ("req-2/subreq-2", "instance-2")]}),
        },
        nodes=[worker(), worker(WORKER2), worker(WORKER3)],
        gates={"DRAPrioritizedList": True},
    ),
    # --- DRAWorkloadResourceClaims (their PreBind and PostFilter writes: test_pod_group_writes.py)
    # v1.36.3 dynamicresources_test.go TestPlugin/podgroup-claim-reference
    Case(
        "podgroup-claim-reference",
        [pod_group_claim(ON_WORKER), plain("not-my-claim"), pod_group()],
        grouped(my_pod()),
        fits(NOTHING_NEW),
        gates=GROUP_GATES,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/podgroup-claim-template
    Case(
        "podgroup-claim-template",
        [pod_group_claim(ON_WORKER), plain("not-my-claim"), pod_group(template=True)],
        grouped(template_pod()),
        fits(NOTHING_NEW),
        gates=GROUP_GATES,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/podgroup-with-resources
    Case(
        "podgroup-with-resources",
        [pod_group_claim(), CLASS_A, WORKER_SLICE, pod_group()],
        grouped(my_pod()),
        fits(INSTANCE_1),
        gates=GROUP_GATES,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/bind-podgroup-failure
    Case(
        "bind-podgroup-failure",
        [pod_group_claim(ON_WORKER), pod_group()],
        grouped(my_pod()),
        fits(NOTHING_NEW),
        gates=GROUP_GATES,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/postfilter-unreserve-podgroup
    Case(
        "postfilter-unreserve-podgroup",
        [pod_group_claim(WRONG_TOPOLOGY, reservedFor=[FOR_PODGROUP]), CLASS_A, pod_group()],
        grouped(my_pod()),
        reason("resourceclaim not available on the node"),
        gates=GROUP_GATES,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/postfilter-deallocate-podgroup
    Case(
        "postfilter-deallocate-podgroup",
        [pod_group_claim(WRONG_TOPOLOGY), CLASS_A, pod_group()],
        grouped(my_pod()),
        reason("resourceclaim not available on the node"),
        gates=GROUP_GATES,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/postfilter-skip-unreserve-podgroup-when-pods-active
    Case(
        "postfilter-skip-unreserve-podgroup-when-pods-active",
        [
            pod_group_claim(WRONG_TOPOLOGY, reservedFor=[FOR_PODGROUP]),
            CLASS_A,
            pod_group(),
            grouped(pod(f"{POD}-2", node_name=WORKER)),  # scheduled: still needs the group's claim
        ],
        grouped(my_pod()),
        reason("resourceclaim not available on the node"),
        gates=GROUP_GATES,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/postfilter-skip-unreserve-podgroup-other-claim-deallocated
    Case(
        "postfilter-skip-unreserve-podgroup-other-claim-deallocated",
        [
            pod_group_claim(WRONG_TOPOLOGY, reservedFor=[FOR_PODGROUP]),
            with_allocation(pending(CLAIM2), WRONG_TOPOLOGY),
            CLASS_A,
            pod_group(),
        ],
        grouped(my_pod(CLAIM, CLAIM2)),
        reason("resourceclaim not available on the node"),
        gates=GROUP_GATES,
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/reserved-okay-podgroup
    Case(
        "reserved-okay-podgroup",
        [pod_group_claim(ON_WORKER, reservedFor=[FOR_PODGROUP]), pod_group()],
        grouped(my_pod()),
        fits(NOTHING_NEW),
        gates=GROUP_GATES,
    ),
    # --- DRANodeAllocatableResources (their PreBind pod status: test_node_allocatable_writes.py)
    # v1.36.3 dynamicresources_test.go TestPlugin/node-allocatable-resource-multiplier
    Case(
        "node-allocatable-resource-multiplier",
        [pending(), CLASS_A, node_slice(WORKER, mapped_device(cpu=("1", None), memory=("1Gi", None)))],
        container_pod(),
        fits(INSTANCE_1),
        nodes=[CAPACITY_WORKER],
        gates={"DRANodeAllocatableResources": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/node-allocatable-resource-capacitykey
    Case(
        "node-allocatable-resource-capacitykey",
        [capacity_claim("1"), CLASS_A, cpus_slice()],
        container_pod(),
        fits({CLAIM: [("req-1", "numa-0-cpus")]}),
        nodes=[CAPACITY_WORKER],
        gates={"DRANodeAllocatableResources": True, "DRAConsumableCapacity": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/node-allocatable-resource-capacitykey-and-multiplier
    Case(
        "node-allocatable-resource-capacitykey-and-multiplier",
        [capacity_claim("1"), CLASS_A, cpus_slice(memory="1Gi")],
        container_pod(),
        fits({CLAIM: [("req-1", "numa-0-cpus")]}),
        nodes=[CAPACITY_WORKER],
        gates={"DRANodeAllocatableResources": True, "DRAConsumableCapacity": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/node-allocatable-resource-insufficient-resources-with-multiplier
    # (the table writes Unschedulable and compares messages only; 11 CPUs on a 10-CPU node is
    # UnschedulableAndUnresolvable in the code, which is what the extender answers)
    Case(
        "node-allocatable-resource-insufficient-resources-with-multiplier",
        [pending(), CLASS_A, node_slice(WORKER, mapped_device(cpu=("11", None)))],
        container_pod(),
        reason("Insufficient cpu"),
        nodes=[CAPACITY_WORKER],
        gates={"DRANodeAllocatableResources": True},
    ),
    # v1.36.3 dynamicresources_test.go TestPlugin/node-allocatable-resource-insufficient-with-capacityKey
    Case(
        "node-allocatable-resource-insufficient-with-capacityKey",
        [capacity_claim("11"), CLASS_A, cpus_slice()],
        container_pod(),
        reason("cannot allocate all claims"),
        nodes=[CAPACITY_WORKER],
        gates={"DRANodeAllocatableResources": True, "DRAConsumableCapacity": True},
    ),
]


#: Every case of upstream's testPlugin table (v1.36.3), in the file's order.
UPSTREAM_NAMES = [
    "empty",
    "empty-with-extended-resources-enabled",
    "claim-reference",
    "claim-template",
    "podgroup-claim-reference-feature-disabled-reserves-for-pod",
    "podgroup-claim-reference",
    "podgroup-claim-template",
    "missing-claim",
    "deleted-claim",
    "wrong-claim",
    "no-resources",
    "with-resources",
    "podgroup-with-resources",
    "podgroup-with-resources-feature-disabled-reserves-for-pod",
    "with-resources-has-finalizer",
    "with-resources-finalizer-gets-removed",
    "with-resources-finalizer-gets-added",
    "skip-bind",
    "exhausted-resources-in-informer-cache",
    "exhausted-resources-in-flight-claim",
    "other-resources-in-flight-claim",
    "tainted-device-disabled",
    "tainted-device-enabled",
    "request-admin-access-with-DRAAdminAccess-featuregate",
    "request-admin-access-without-DRAAdminAccess-featuregate",
    "structured-ignore-allocated-admin-access",
    "claim-parameters-CEL-runtime-error",
    "class-parameters-CEL-runtime-error",
    "CEL-runtime-error-for-one-of-two-nodes",
    "CEL-runtime-error-for-one-of-three-nodes",
    "missing-class",
    "wrong-topology",
    "good-topology",
    "bind-failure",
    "bind-podgroup-failure",
    "postfilter-unreserve-podgroup",
    "postfilter-skip-unreserve-podgroup-feature-disabled",
    "postfilter-deallocate-podgroup",
    "postfilter-skip-unreserve-podgroup-when-pods-active",
    "postfilter-skip-unreserve-podgroup-other-claim-deallocated",
    "reserved-okay",
    "reserved-okay-podgroup",
    "DRA-disabled",
    "claim-with-request-with-unknown-device-class",
    "claim-with-prioritized-list-feature-disabled",
    "claim-with-prioritized-list-unknown-device-class",
    "claim-with-prioritized-list",
    "extended-resource-name-with-node-resource",
    "extended-resource-one-device-plugin-one-dra",
    "extended-resource-name-with-zero-allocatable",
    "non-DRA-extended-resource-name-with-zero-allocatable",
    "extended-resource-name-no-resource",
    "extended-resource-name-with-resources",
    "implicit-extended-resource-name-with-resources",
    "implicit-extended-resource-name-two-containers-with-resources",
    "extended-resource-name-with-resources-fail-patch",
    "extended-resource-name-with-resources-has-claim",
    "extended-resource-name-with-resources-delete-claim",
    "extended-resource-name-bind-failure",
    "extended-resource-name-skip-bind",
    "extended-resource-name-claim-creation-failure",
    "canceled",
    "timeout",
    "timeout_disabled",
    "timeout_zero",
    "dont-add-allocation-timestamp",
    "add-allocation-timestamp",
    "add-allocation-timestamp-failure",
    "bind-claim-with-binding-conditions",
    "bind-failure-concurrent-deallocation",
    "bound-claim-with-succeeded-binding-conditions",
    "bound-claim-with-failed-binding",
    "bound-claim-with-timed-out-binding",
    "prebind-fail-with-binding-timeout",
    "bound-claim-with-mixed-binding-conditions",
    "bound-claim-without-binding-conditions",
    "multi-claims-binding-conditions-all-success",
    "multi-claims-binding-conditions-one-fail",
    "single-claim-prioritized-list-scoring",
    "multiple-claims-prioritized-list-scoring",
    "multiple-requests-prioritized-list-scoring",
    "node-allocatable-resource-multiplier",
    "node-allocatable-resource-capacitykey",
    "node-allocatable-resource-capacitykey-and-multiplier",
    "node-allocatable-resource-insufficient-resources-with-multiplier",
    "node-allocatable-resource-insufficient-with-capacityKey",
]


#: Upstream cases with nothing to answer at PreFilter/Filter that simulate can reproduce, and why.
NOT_EXPRESSIBLE: dict[str, str] = {
    "exhausted-resources-in-flight-claim": "an in-flight allocation (SignalClaimPendingAllocation) is the "
    "plugin's internal state between Reserve and PreBind; a state file has no such thing",
    "other-resources-in-flight-claim": "an in-flight allocation (SignalClaimPendingAllocation) is the "
    "plugin's internal state between Reserve and PreBind; a state file has no such thing",
    "DRA-disabled": "DynamicResourceAllocation=false: simulate refuses it (exit 2: nothing to simulate) and "
    "the extender's Features have no such switch; the plugin's Skip has no counterpart",
    "canceled": "Filter called with a context the caller canceled: neither simulate nor the filter verb "
    "has a caller that cancels one node's Filter",
}


# --- running a case ------------------------------------------------------------------------------


def gates_of(case: Case) -> str:
    return ",".join(f"{k}={str(v).lower()}" for k, v in {**PLUGIN_GATES, **case.gates}.items())


def wanted(case: Case) -> dict[str, Want]:
    return case.want if isinstance(case.want, dict) else {WORKER: case.want}


def objects_of(case: Case) -> list[dict[str, Any]]:
    objects = case.objects() if callable(case.objects) else case.objects
    copies: list[dict[str, Any]] = json.loads(json.dumps([*objects, *case.nodes, case.pod]))
    return copies


def pod_key(case: Case) -> str:
    return f"default/{case.pod['metadata']['name']}"


def via_simulate(case: Case, node_name: str, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects_of(case)))
    out = io.StringIO()
    argv = ["simulate", str(path), "--pod", pod_key(case), "--node", node_name, "-o", "json"]
    argv += ["--kubernetes-version", "1.36", "--feature-gates", gates_of(case)]
    if case.timeout is not None:
        argv += ["--timeout", repr(case.timeout)]
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(argv, out)
    result = json.loads(out.getvalue())
    assert result["problems"] == [], result["problems"]
    answer: dict[str, Any] = result["pods"][0]["nodes"][node_name]
    assert code == (0 if answer["fits"] else 1), out.getvalue()  # simulate's exit codes
    return answer


def engine_of(case: Case) -> tuple[Engine, ClusterState]:
    state = ClusterState.from_objects(objects_of(case))
    assert not state.problems, state.problems
    features = Features.parse(gates_of(case), allow_locked=True, release=RELEASE)
    config = EngineConfig(features=features, release=RELEASE)
    if case.timeout is not None:
        config = EngineConfig(features=features, release=RELEASE, node_timeout=case.timeout)
    return assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), config), state


def via_filter(case: Case) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """One filter call for all the case's nodes (as kube-scheduler sends them): the nodes that
    passed, and per node the answer; an error is the whole pod's (Filter's Error aborts)."""
    engine, state = engine_of(case)
    p = state.pods[("default", case.pod["metadata"]["name"])]
    names = [n["metadata"]["name"] for n in case.nodes]
    result = engine.filter(p, names)
    decisions = engine.explain(p, names)
    answers = {
        name: {
            "fits": name in result.passed,
            "reason": result.unresolvable.get(name) or result.failed.get(name),
            "error": result.error or None,
            "allocations": decisions[name].allocations,
        }
        for name in names
    }
    return result.passed, answers


def check(want: Want, answer: dict[str, Any], node_name: str) -> None:
    if want.outcome == "fits":
        assert answer["fits"] and not answer["error"], answer
        if want.devices is not None:
            allocations = answer["allocations"]
            got = {
                c: [(r["request"], r["device"]) for r in a["devices"]["results"]]
                for c, a in allocations.items()
            }
            assert got == want.devices, allocations
            for a in allocations.values():  # every device here is node-local
                assert a.get("nodeSelector") == by_name(node_name), a
    elif want.outcome == "reason":
        assert not answer["fits"] and not answer["error"], answer
        assert all(part in (answer["reason"] or "") for part in want.contains), answer
    else:
        assert not answer["fits"], answer
        assert all(part in (answer["error"] or "") for part in want.contains), answer


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_simulate_answers_as_the_136_plugin(case: Case, tmp_path: Path) -> None:
    for node_name, want in wanted(case).items():
        check(want, via_simulate(case, node_name, tmp_path), node_name)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_filter_answers_as_the_136_plugin(case: Case) -> None:
    passed, answers = via_filter(case)
    for node_name, want in wanted(case).items():
        check(want, answers[node_name], node_name)
    if any(w.outcome == "error" for w in wanted(case).values()):
        assert passed == [], passed  # Filter's Error aborts the pod's cycle on every node


#: Upstream's NormalizeScore results (MaxNodeScore 100) for the nodes that pass Filter.
NORMALIZED = {
    "single-claim-prioritized-list-scoring": {WORKER: 100, WORKER2: 87},
    "multiple-claims-prioritized-list-scoring": {WORKER: 100, WORKER2: 86},
    "multiple-requests-prioritized-list-scoring": {WORKER: 100, WORKER2: 93, WORKER3: 87},
}


@pytest.mark.parametrize("name", sorted(NORMALIZED))
def test_prioritize_ranks_as_the_plugin_scores(name: str) -> None:
    """Score/NormalizeScore of the scoring cases through the prioritize verb: the extender's
    0..10 (MaxExtenderPriority) is upstream's 0..100 divided by 10, rounded down."""
    case = next(c for c in CASES if c.name == name)
    engine, state = engine_of(case)
    p = state.pods[("default", POD)]
    scores = dict(engine.prioritize(p, list(NORMALIZED[name])))
    assert scores == {n: s // 10 for n, s in NORMALIZED[name].items()}


def test_every_upstream_case_is_translated_or_listed() -> None:
    translated = [c.name for c in CASES]
    assert len(UPSTREAM_NAMES) == len(set(UPSTREAM_NAMES)) == 86
    assert len(translated) == len(set(translated))
    assert set(translated).isdisjoint(NOT_EXPRESSIBLE)
    assert sorted([*translated, *NOT_EXPRESSIBLE]) == sorted(UPSTREAM_NAMES)
