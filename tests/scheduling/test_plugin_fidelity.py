"""Plugin-level fidelity: what kube-scheduler 1.37's DynamicResources plugin answers, case by case.

Every case names the upstream code path that decides it (pkg/scheduler/framework/plugins/
dynamicresources and k8s.io/dynamic-resource-allocation structured/internal/incubating) and runs
twice: through ``dra-extender simulate`` (the CLI, offline) and through ``Engine.filter`` (what
the HTTP verb calls). Both must give the same answer: fits (with which devices), unschedulable
(``reason``) or an error for the pod (``error``).
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cli import main
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.scores import score_nodes
from tests.builders import (
    allocated,
    attrs,
    claim,
    container,
    device,
    device_class,
    device_status,
    exact,
    first_available,
    node,
    pod,
    resource_slice,
    with_allocatable,
)

A = device_class()
PAST = "2020-01-01T00:00:00Z"
FUTURE = "2099-01-01T00:00:00Z"


@dataclass
class Case:
    name: str
    #: The upstream function whose behaviour this case pins down.
    upstream: str
    objects: list[dict[str, Any]]
    claims: list[str] = field(default_factory=lambda: ["claim-0"])
    gates: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    #: "fits", "reason" or "error", and a substring of the reason / error.
    outcome: str = "fits"
    contains: str = ""
    #: For "fits": (claim, [(request, device), ...]) that must be allocated.
    devices: tuple[str, list[tuple[str, str]]] | None = None
    #: The pod's containers and init containers (extended resources), the node's allocatable.
    containers: list[dict[str, Any]] | None = None
    init_containers: list[dict[str, Any]] | None = None
    allocatable: dict[str, str | int] = field(default_factory=dict)
    #: The node's status.declaredFeatures.
    declared: tuple[str, ...] = ()


def bound(name: str, allocation: dict[str, Any], **status: Any) -> dict[str, Any]:
    """An allocated claim (its devices in use), optionally with more status fields."""
    c = claim(name, allocation=allocation)
    c["status"].update(status)
    return c


def binding_allocation(timestamp: str | None = None) -> dict[str, Any]:
    allocation = allocated(("driver-a", "pool-1", "d0"))
    result = allocation["devices"]["results"][0]
    result["bindingConditions"] = ["Attached"]
    result["bindingFailureConditions"] = ["AttachFailed"]
    if timestamp:
        allocation["allocationTimestamp"] = timestamp
    return allocation


def gt_selector(value: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rank", "operator": "Gt", "values": [value]}]}]
    }


def held_elsewhere() -> dict[str, Any]:
    """Claim "held" on d0, allocated for nodes with rank > 5 (node-1 gets rank 1: unavailable)."""
    return bound("held", {**allocated(("driver-a", "pool-1", "d0")), "nodeSelector": gt_selector("5")})


ERRORING = 'device.attributes["driver-a"].extra == "x"'  # a runtime error where "extra" is missing
COUNTERS = [{"name": "cs", "counters": {"mem": {"value": "1"}}}]
CONSUMES = [{"counterSet": "cs", "counters": {"mem": {"value": "1"}}}]


CASES = [
    # --- 1. PreFilter: unschedulable, not errors --------------------------------------------------
    Case(
        "missing-class",
        "PreFilter -> validateDeviceClass: NotFound is statusUnschedulable",
        [resource_slice("s", [device("d0")]), claim(requests=[exact(cls="nope")])],
        outcome="reason",
        contains="request req-0: device class nope does not exist",
    ),
    Case(
        "missing-class-in-unused-alternative",
        "PreFilter validates every firstAvailable subrequest's class before allocating",
        [
            A,
            resource_slice("s", [device("d0")]),
            claim(requests=[first_available("req-0", exact("a"), exact("b", cls="nope"))]),
        ],
        outcome="reason",
        contains="request req-0/b: device class nope does not exist",
    ),
    Case(
        "prioritized-list-off",
        "PreFilter: firstAvailable with DRAPrioritizedList off is statusUnschedulable",
        [A, resource_slice("s", [device("d0")]), claim(requests=[first_available("req-0", exact("a"))])],
        gates="DRAPrioritizedList=false",
        outcome="reason",
        contains="resource claim default/claim-0, request req-0: has subrequests, but the DRAPrioritizedList "
        "feature is disabled",
    ),
    Case(
        "empty-class-name",
        "PreFilter -> validateDeviceClass: an empty class name is statusError",
        [A, resource_slice("s", [device("d0")]), claim(requests=[exact(cls="")])],
        outcome="error",
        contains="request req-0: unsupported request type",
    ),
    Case(
        "neither-exactly-nor-first-available",
        "PreFilter: a request with neither field is statusUnschedulable 'unknown request type'",
        [A, resource_slice("s", [device("d0")]), claim(requests=[{"name": "req-0"}])],
        outcome="reason",
        contains="resource claim default/claim-0, request req-0: unknown request type",
    ),
    Case(
        "invalid-pool-is-this-node-only",
        "Filter: Allocate's ErrFailedAllocationOnNode is statusUnschedulable",
        [A, resource_slice("s", [device("d0"), device("d0")]), claim()],
        outcome="reason",
        contains="invalid resource pools were encountered",
    ),
    # --- 2. no dedup of claims -------------------------------------------------------------------
    Case(
        "same-claim-twice-needs-twice-the-devices",
        "podResourceClaims keeps every pod.spec.resourceClaims entry; Allocate gets the claim twice",
        [A, resource_slice("s", [device("d0")]), claim()],
        claims=["claim-0", "claim-0"],
        outcome="reason",
        contains="cannot allocate all claims",
    ),
    Case(
        "same-claim-twice-fits-with-two-devices",
        "podResourceClaims / Allocate: the first allocation of the claim is the one written",
        [A, resource_slice("s", [device("d0"), device("d1")]), claim()],
        claims=["claim-0", "claim-0"],
        devices=("claim-0", [("req-0", "d0")]),
    ),
    # --- 3. binding conditions of allocated claims -----------------------------------------------
    Case(
        "binding-failure-condition",
        "Filter -> isClaimReadyForBinding: a True bindingFailureCondition makes the claim unavailable",
        [
            A,
            resource_slice("s", [device("d0")]),
            bound("claim-0", binding_allocation(FUTURE), devices=device_status(AttachFailed="True")),
        ],
        outcome="reason",
        contains="claim claim-0 binding failed: reason=Driver",
    ),
    Case(
        "binding-timeout",
        "Filter -> isClaimTimeout: allocationTimestamp + bindingTimeout before now",
        [A, resource_slice("s", [device("d0")]), bound("claim-0", binding_allocation(PAST))],
        outcome="reason",
        contains="claim claim-0 binding timeout",
    ),
    Case(
        "binding-pending-within-timeout",
        "Filter -> isClaimReadyForBinding false without error, not timed out: available",
        [A, resource_slice("s", [device("d0")]), bound("claim-0", binding_allocation(FUTURE))],
    ),
    Case(
        "binding-ready",
        "Filter -> isClaimReadyForBinding: all bindingConditions True",
        [
            A,
            resource_slice("s", [device("d0")]),
            bound("claim-0", binding_allocation(PAST), devices=device_status(Attached="True")),
        ],
    ),
    Case(
        "binding-checks-off-without-the-gates",
        "Filter: binding checks only with DRADeviceBindingConditions and DRAResourceClaimDeviceStatus",
        [A, resource_slice("s", [device("d0")]), bound("claim-0", binding_allocation(PAST))],
        gates="DRADeviceBindingConditions=false",
    ),
    # --- 4. the allocator runs even when an allocated claim is unavailable ------------------------
    Case(
        "allocator-error-wins-over-unavailable",
        "Filter: unavailable claims are collected, Allocate's error returns first",
        [
            A,
            device_class("bad", expression=ERRORING),
            resource_slice("s", [device("d0"), device("d1")]),
            held_elsewhere(),
            claim(requests=[exact(cls="bad")]),
        ],
        claims=["held", "claim-0"],
        labels={"rank": "1"},
        outcome="error",
        contains="CEL runtime error",
    ),
    Case(
        "cannot-allocate-wins-over-unavailable",
        "Filter: 'cannot allocate all claims' returns before 'resourceclaim not available on the node'",
        [
            A,
            resource_slice("s", [device("d0")]),
            held_elsewhere(),
            claim(requests=[exact(count=2)]),
        ],
        claims=["held", "claim-0"],
        labels={"rank": "1"},
        outcome="reason",
        contains="cannot allocate all claims",
    ),
    Case(
        "unavailable-after-a-successful-allocation",
        "Filter: unavailableClaims -> 'resourceclaim not available on the node'",
        [
            A,
            resource_slice("s", [device("d0"), device("d1")]),
            held_elsewhere(),
            claim(),
        ],
        claims=["held", "claim-0"],
        labels={"rank": "1"},
        outcome="reason",
        contains="resourceclaim not available on the node",
    ),
    # --- 5. node selectors that do not parse -------------------------------------------------------
    Case(
        "allocation-node-selector-gt-not-integer",
        "PreFilter -> nodeaffinity.NewNodeSelector error is statusError",
        [
            A,
            resource_slice("s", [device("d0")]),
            bound("claim-0", {**allocated(), "nodeSelector": gt_selector("1.5")}),
        ],
        outcome="error",
        contains="nodeSelectorTerms[0].matchExpressions[0].values[0]: Invalid value: \"1.5\": for 'Gt', 'Lt' "
        "operators, the value must be an integer",
    ),
    Case(
        "slice-node-selector-gt-not-integer",
        "GatherPools -> NodeMatches: 'failed to perform node selection for slice'",
        [A, resource_slice("s", [device("d0")], nodeSelector=gt_selector("x")), claim()],
        outcome="error",
        contains="gather pool information: failed to perform node selection for slice s: failed to parse node "
        "selector",
    ),
    Case(
        "device-node-selector-bad-operator",
        "GatherPools -> NodeMatches per device (perDeviceNodeSelection)",
        [
            A,
            resource_slice(
                "s",
                [
                    device(
                        "d0",
                        nodeSelector={
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "rank", "operator": "Near"}]}]
                        },
                    )
                ],
                perDeviceNodeSelection=True,
            ),
            claim(),
        ],
        outcome="error",
        contains='operator: Unsupported value: "Near"',
    ),
    # --- 6. no pruning that hides a CEL error ------------------------------------------------------
    Case(
        "cel-error-on-a-device-a-constraint-excludes",
        "allocateOne: isSelectable runs on every device not in use, before allocateDevice's constraints",
        [
            A,
            resource_slice(
                "s",
                [
                    device("d0", attributes=attrs(model="x", extra="x")),
                    device("d1", attributes=attrs(model="y")),
                ],
            ),
            claim(
                requests=[exact("a"), exact("b", selectors=[ERRORING])],
                constraints=[{"requests": ["a", "b"], "matchAttribute": "driver-a/model"}],
            ),
        ],
        outcome="error",
        contains="selector #0 on device driver-a/pool-1/d1: CEL runtime error",
    ),
    # --- 7. the 32-results limit inside firstAvailable ---------------------------------------------
    Case(
        "result-limit-propagates-only-when-every-alternative-exceeds",
        "allocateOne: allAllocationExceeded; another failure lets the previous request try its next device",
        [
            A,
            device_class("small", expression='device.attributes["driver-a"].size == "small"'),
            resource_slice(
                "s",
                [
                    device("d0", attributes=attrs(model="x", size="big")),
                    *[device(f"x{i}", attributes=attrs(model="x", size="big")) for i in range(32)],
                    device("d1", attributes=attrs(model="y", size="big")),
                    device("e0", attributes=attrs(model="y", size="small")),
                ],
            ),
            claim(
                requests=[
                    exact("r0"),
                    # "big" exceeds the 32-result limit next to r0; "small" fails for r0 = model x.
                    first_available("r1", exact("big", count=32), exact("small", cls="small")),
                ],
                constraints=[{"requests": ["r0", "r1"], "matchAttribute": "driver-a/model"}],
            ),
        ],
        devices=("claim-0", [("r0", "d1"), ("r1/small", "e0")]),
    ),
    Case(
        "all-mode-capacity-failure-rolls-back-the-constraint",
        "allocateDevice -> rollbackDevice (kubernetes#140431, v1.37.0 and v1.36.3): in All mode a failed "
        "capacity check undoes the constraint that accepted the device, so the alternative may take d0 "
        "(before the fix the leaked matchAttribute value refused it)",
        [
            A,
            device_class("shared", expression='device.attributes["driver-a"].model == "m1"'),
            resource_slice(
                "s",
                [
                    device(
                        "s0",
                        allowMultipleAllocations=True,
                        attributes=attrs(model="m1"),
                        capacity={"memory": "10Gi"},
                    ),
                    device("d0", attributes=attrs(model="m2")),
                ],
            ),
            claim(
                requests=[
                    exact("r0", cls="shared", capacity={"requests": {"memory": "6Gi"}}),
                    first_available(
                        "r1", exact("all", mode="All", capacity={"requests": {"memory": "6Gi"}}), exact("one")
                    ),
                ],
                constraints=[{"requests": ["r1"], "matchAttribute": "driver-a/model"}],
            ),
        ],
        devices=("claim-0", [("r0", "s0"), ("r1/one", "d0")]),
    ),
    Case(
        "counters-charged-for-a-tainted-device-are-released",
        "allocateDevice -> rollbackDevice (kubernetes#140431, v1.37.0 and v1.36.3): checkAvailableCounters "
        "charges the device before the taint check, and the rejection releases the charge again (before "
        "the fix t1's charge left no counter for c2)",
        [
            A,
            resource_slice(
                "s",
                [
                    device("c0", consumesCounters=CONSUMES),
                    device(
                        "t1",
                        consumesCounters=CONSUMES,
                        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    ),
                    device("c2", consumesCounters=CONSUMES),
                ],
                sharedCounters=[{"name": "cs", "counters": {"mem": {"value": "2"}}}],
            ),
            claim(requests=[exact("r0"), first_available("r1", exact("two", count=2), exact("one"))]),
        ],
        devices=("claim-0", [("r0", "c0"), ("r1/one", "c2")]),
    ),
    # --- 8. pools searched last: only bindingConditions on this node's slices -----------------------
    Case(
        "binds-to-node-alone-does-not-reorder",
        "GatherPools -> poolHasBindingConditions reads bindingConditions only",
        [
            A,
            resource_slice("s-a", [device("a0", bindsToNode=True)], pool="pool-a"),
            resource_slice("s-b", [device("b0")], pool="pool-b"),
            claim(),
        ],
        devices=("claim-0", [("req-0", "a0")]),
    ),
    Case(
        "binding-conditions-go-last",
        "GatherPools: pools with bindingConditions come after all others",
        [
            A,
            resource_slice("s-a", [device("a0", bindingConditions=["Attached"])], pool="pool-a"),
            resource_slice("s-b", [device("b0")], pool="pool-b"),
            claim(),
        ],
        devices=("claim-0", [("req-0", "b0")]),
    ),
    Case(
        "binds-to-node-usable-with-the-gate-off",
        "isSelectable hides only devices with bindingConditions when DeviceBindingAndStatus is off",
        [A, resource_slice("s", [device("d0", bindsToNode=True)]), claim()],
        gates="DRADeviceBindingConditions=false",
        devices=("claim-0", [("req-0", "d0")]),
    ),
    # --- 9. admin access ---------------------------------------------------------------------------
    Case(
        "admin-access-to-an-exclusively-held-multi-allocatable-device",
        "allocateOne / allocateDevice: adminAccess skips deviceInUse",
        [
            A,
            resource_slice("s", [device("d0", allowMultipleAllocations=True)]),
            bound("held", allocated(("driver-a", "pool-1", "d0"))),
            claim(requests=[exact(adminAccess=True)]),
        ],
        devices=("claim-0", [("req-0", "d0")]),
    ),
    # --- 10. shares without consumedCapacity -----------------------------------------------------------
    Case(
        "share-without-consumed-capacity-does-not-charge-counters-again",
        "allocateDevice -> deviceCapacityInUse (kubernetes#140437, v1.37.0; not in 1.36): a share known "
        "only by its shareID (AllocatedSharedDeviceIDs) lets the next share skip the counter check",
        [
            A,
            resource_slice(
                "s",
                [device("d0", allowMultipleAllocations=True, consumesCounters=CONSUMES)],
                sharedCounters=COUNTERS,
            ),
            bound("held", allocated(("driver-a", "pool-1", "d0"), share="s1")),
            claim(),
        ],
        devices=("claim-0", [("req-0", "d0")]),
    ),
    Case(
        "share-is-not-in-use-once-the-device-stops-sharing",
        "deviceInUse reads AllocatedDevices only (shares are AllocatedSharedDeviceIDs)",
        [
            A,
            resource_slice("s", [device("d0")]),
            bound("held", allocated(("driver-a", "pool-1", "d0"), share="s1")),
            claim(),
        ],
        devices=("claim-0", [("req-0", "d0")]),
    ),
    # --- 11. partitionable devices off -------------------------------------------------------------------
    Case(
        "partitionable-off-counter-devices-still-run-selectors",
        "isSelectable has no counter check; allocateDevice refuses counter-consuming devices",
        [
            device_class("bad", expression=ERRORING),
            resource_slice(
                "s", [device("d0", consumesCounters=CONSUMES), device("d1", attributes=attrs(extra="x"))]
            ),
            claim(requests=[exact(cls="bad")]),
        ],
        gates="DRAPartitionableDevices=false",
        outcome="error",
        contains="on device driver-a/pool-1/d0: CEL runtime error",
    ),
    Case(
        "partitionable-off-all-mode-is-unschedulable",
        "validateDeviceRequest lists the counter device for All; allocateDevice(must) refuses it",
        [
            A,
            resource_slice("s", [device("d0", consumesCounters=CONSUMES), device("d1")]),
            claim(requests=[exact(mode="All")]),
        ],
        gates="DRAPartitionableDevices=false",
        outcome="reason",
        contains="cannot allocate all claims",
    ),
    Case(
        "partitionable-off-exact-skips-the-counter-device",
        "allocateDevice: counter-consuming device refused, the search moves on",
        [A, resource_slice("s", [device("d0", consumesCounters=CONSUMES), device("d1")]), claim()],
        gates="DRAPartitionableDevices=false",
        devices=("claim-0", [("req-0", "d1")]),
    ),
]


# --- 12. DRA-backed extended resources (extendeddynamicresources.go) -------------------------------------

ER, ER1 = "example.com/gpu", "example.com/fpga"
GPU_CLASS = device_class(extended_resource=ER)
STALE = claim("pod-extended-resources-old", requests=[exact("container-0-request-0")])
STALE["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
STALE["metadata"]["ownerReferences"] = [
    {"apiVersion": "v1", "kind": "Pod", "name": "pod", "uid": "uid-pod", "controller": True}
]
CASES += [
    Case(
        "extended-resource-through-dra",
        "filterExtendedResources: not in allocatable, backed by a class -> createRequestsAndMappings",
        [GPU_CLASS, resource_slice("s", [device("d0"), device("d1")])],
        claims=[],
        containers=[container("main", {ER: 2})],
        devices=("<extended-resources>", [("container-0-request-0", "d0"), ("container-0-request-0", "d1")]),
    ),
    Case(
        "extended-resource-implicit-class-name",
        "ExtendedResourceCache: every class backs deviceclass.resource.kubernetes.io/<class>",
        [A, resource_slice("s", [device("d0")])],
        claims=[],
        containers=[container("main", {"deviceclass.resource.kubernetes.io/class-a": 1})],
        devices=("<extended-resources>", [("container-0-request-0", "d0")]),
    ),
    Case(
        "extended-resource-left-to-the-device-plugin",
        "filterExtendedResources: allocatable > 0, nothing for DRA, no user claim -> nil",
        [GPU_CLASS],
        claims=[],
        containers=[container("main", {ER: 1})],
        allocatable={ER: 4},
    ),
    Case(
        "extended-resource-neither-offered-nor-backed",
        "filterExtendedResources: not in allocatable and no class -> cannot fit resource",
        [GPU_CLASS, resource_slice("s", [device("d0")])],
        claims=[],
        containers=[container("main", {ER: 1, ER1: 1})],
        outcome="reason",
        contains="cannot fit resource",
    ),
    Case(
        "extended-resource-allocated-with-the-pods-claims",
        "Filter: the node's extended-resource claim is allocated last, in the same Allocate call",
        [GPU_CLASS, resource_slice("s", [device("d0"), device("d1")]), claim()],
        containers=[container("main", {ER: 1})],
        devices=("<extended-resources>", [("container-0-request-0", "d1")]),
    ),
    Case(
        "extended-resource-and-claims-must-fit-together",
        "Allocate: all claims or none",
        [GPU_CLASS, resource_slice("s", [device("d0")]), claim()],
        containers=[container("main", {ER: 1})],
        outcome="reason",
        contains="cannot allocate all claims",
    ),
    Case(
        "extended-resource-init-container-reuses-later-devices",
        "createRequestsAndMappings: a plain init container reuses long-lived requests after it",
        [GPU_CLASS, resource_slice("s", [device("d0"), device("d1")])],
        claims=[],
        containers=[container("main", {ER: 2})],
        init_containers=[container("setup", {ER: 1})],
        devices=("<extended-resources>", [("container-1-request-0", "d0"), ("container-1-request-0", "d1")]),
    ),
    Case(
        "extended-resource-newest-class-wins",
        "ExtendedResourceCache: of classes naming one resource the newest creationTimestamp wins",
        [
            device_class("old", extended_resource=ER, created="2026-01-01T00:00:00Z"),
            device_class(
                "new", 'device.driver == "driver-b"', extended_resource=ER, created="2026-06-01T00:00:00Z"
            ),
            resource_slice("s", [device("d0")]),
            resource_slice("s-b", [device("b0")], driver="driver-b", pool="pool-b"),
        ],
        claims=[],
        containers=[container("main", {ER: 1})],
        devices=("<extended-resources>", [("container-0-request-0", "b0")]),
    ),
    Case(
        "extended-resource-claim-from-an-earlier-cycle",
        "filterExtendedResources: the found claim has requests -> cannot schedule extended resource claim",
        [GPU_CLASS, resource_slice("s", [device("d0")]), STALE],
        claims=[],
        containers=[container("main", {ER: 1})],
        outcome="reason",
        contains="cannot schedule extended resource claim",
    ),
    Case(
        "extended-resource-gate-off",
        "preFilterExtendedResources: nothing when DRAExtendedResource is off (emulating 1.33)",
        [GPU_CLASS, resource_slice("s", [device("d0")])],
        claims=[],
        containers=[container("main", {ER: 1})],
        gates="DRAExtendedResource=false",
    ),
]


SKIPS_ALL = ["*"]
SKIPPING = {
    "devices": {
        "results": [
            {
                "request": "req-0",
                "driver": "driver-a",
                "pool": "pool-1",
                "device": "d0",
                "skipNodeOperations": SKIPS_ALL,
            }
        ]
    }
}
DECLARES = ("DRAOptionalNodeOperations",)

CASES += [
    # --- 14. DRAOptionalNodeOperations and the node's declaredFeatures (new in 1.37) ----------------
    Case(
        "allocated-claim-skipping-node-operations-needs-a-declaring-node",
        "Filter (v1.37, dynamicresources.go, allocationResultRequiresDRAOptionalNodeOperations; read "
        "at 4966917a): an allocated claim whose results skip node operations is unavailable on a node "
        "without DRAOptionalNodeOperations in status.declaredFeatures, whatever the gate says",
        [A, resource_slice("s", [device("d0")]), bound("claim-0", SKIPPING)],
        outcome="reason",
        contains="resourceclaim not available on the node",
    ),
    Case(
        "allocated-claim-skipping-node-operations-gate-on-still-needs-a-declaring-node",
        "Filter (v1.37): the same check with the gate on",
        [A, resource_slice("s", [device("d0")]), bound("claim-0", SKIPPING)],
        gates="DRAOptionalNodeOperations=true",
        outcome="reason",
        contains="skips node operations, which this node does not declare",
    ),
    Case(
        "allocated-claim-skipping-node-operations-on-a-declaring-node",
        "Filter (v1.37): a node that declares the feature runs the pod",
        [A, resource_slice("s", [device("d0")]), bound("claim-0", SKIPPING)],
        declared=DECLARES,
    ),
    Case(
        "skipping-device-allocated-on-a-declaring-node",
        "allocateDevice (v1.37, kubernetes#139933): gate on and a declaring node: the device is "
        "allocated and its result copies the slice's skipNodeOperations",
        [A, resource_slice("s", [device("d0")], skipNodeOperations=SKIPS_ALL), claim()],
        gates="DRAOptionalNodeOperations=true",
        declared=DECLARES,
        devices=("claim-0", [("req-0", "d0")]),
    ),
    Case(
        "skipping-device-refused-on-a-node-that-does-not-declare",
        "allocateDevice (v1.37): a device whose slice skips node operations is refused on a node "
        "that does not declare the feature",
        [A, resource_slice("s", [device("d0")], skipNodeOperations=SKIPS_ALL), claim()],
        gates="DRAOptionalNodeOperations=true",
        outcome="reason",
        contains="cannot allocate all claims",
    ),
    Case(
        "skipping-device-refused-while-the-gate-is-off",
        "allocateDevice (v1.37): with DRAOptionalNodeOperations off such a device is refused",
        [A, resource_slice("s", [device("d0")], skipNodeOperations=SKIPS_ALL), claim()],
        declared=DECLARES,
        outcome="reason",
        contains="cannot allocate all claims",
    ),
    Case(
        "skipping-device-passed-over-for-a-plain-one",
        "allocateDevice (v1.37): the refusal is per device, so ExactCount takes a plain sibling",
        [
            A,
            resource_slice("s", [device("d0")], skipNodeOperations=SKIPS_ALL),
            resource_slice("t", [device("d1")], pool="pool-2"),
            claim(),
        ],
        gates="DRAOptionalNodeOperations=true",
        devices=("claim-0", [("req-0", "d1")]),
    ),
    Case(
        "skipping-device-fails-allocation-mode-all",
        "allocateDevice (v1.37): All counts the refused device among its devices and fails "
        "(kubernetes#141091, which would have skipped it in isSelectable, was closed)",
        [
            A,
            resource_slice("s", [device("d0")], skipNodeOperations=SKIPS_ALL),
            resource_slice("t", [device("d1")], pool="pool-2"),
            claim(requests=[exact(mode="All")]),
        ],
        gates="DRAOptionalNodeOperations=true",
        outcome="reason",
        contains="cannot allocate all claims",
    ),
]


# --- running a case ------------------------------------------------------------------------------


def objects_of(case: Case) -> list[dict[str, Any]]:
    spec = pod("pod", case.claims, containers=case.containers, init_containers=case.init_containers)
    the_node = with_allocatable(node("node-1", **case.labels), case.allocatable)
    if case.declared:
        the_node.setdefault("status", {})["declaredFeatures"] = list(case.declared)
    return [*case.objects, the_node, spec]


def via_simulate(case: Case, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects_of(case)))
    out = io.StringIO()
    argv = ["simulate", str(path), "--pod", "default/pod", "--node", "node-1", "-o", "json"]
    if case.gates:
        argv += ["--feature-gates", case.gates]
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(argv, out)
    answer: dict[str, Any] = json.loads(out.getvalue())["pods"][0]["nodes"]["node-1"]
    assert code == (0 if answer["fits"] else 1), out.getvalue()  # simulate's exit codes
    return answer


def via_filter(case: Case) -> dict[str, Any]:
    state = ClusterState.from_objects(objects_of(case))
    assert not state.problems, state.problems
    features = Features.parse(case.gates, allow_locked=True)
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), EngineConfig(features=features))
    p = state.pods[("default", "pod")]
    result = engine.filter(p, ["node-1"])
    decision = engine.explain(p, ["node-1"])["node-1"]
    answer = {
        "fits": result.passed == ["node-1"],
        "reason": result.unresolvable.get("node-1") or result.failed.get("node-1"),
        "error": result.error or None,
        "allocations": decision.allocations,
    }
    return answer


def check(case: Case, answer: dict[str, Any]) -> None:
    if case.outcome == "fits":
        assert answer["fits"], answer
        if case.devices is not None:
            claim_name, wanted = case.devices
            results = answer["allocations"][claim_name]["devices"]["results"]
            assert [(r["request"], r["device"]) for r in results] == wanted, results
    elif case.outcome == "reason":
        assert not answer["fits"] and not answer["error"], answer
        assert case.contains in (answer["reason"] or ""), answer
    else:
        assert not answer["fits"], answer
        assert case.contains in (answer["error"] or ""), answer


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_simulate_answers_as_the_plugin(case: Case, tmp_path: Path) -> None:
    check(case, via_simulate(case, tmp_path))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_filter_answers_as_the_plugin(case: Case) -> None:
    check(case, via_filter(case))


# --- 12. consumedCapacity keeps the request's format (through simulate) --------------------------------


def test_consumed_capacity_echoes_the_request_format_in_simulate(tmp_path: Path) -> None:
    # calculateConsumedCapacity returns the request's own resource.Quantity: String() keeps "12e3".
    shared = device("d0", allowMultipleAllocations=True, capacity={"memory": "1Mi"})
    case = Case(
        "format",
        "calculateConsumedCapacity",
        [
            A,
            resource_slice("s", [shared]),
            claim(requests=[exact(capacity={"requests": {"memory": "12e3"}})]),
        ],
    )
    answer = via_simulate(case, tmp_path)
    assert answer["allocations"]["claim-0"]["devices"]["results"][0]["consumedCapacity"] == {"memory": "12e3"}


# --- 13. Score: prioritized lists first ---------------------------------------------------------------


def test_prioritize_mirrors_the_plugin_score_for_prioritized_lists() -> None:
    """Score -> computeScore (8 - index of the allocated subrequest), NormalizeScore ->
    DefaultNormalizeScore, mapped to the extender's 0..10; then binpack/spread among equals."""
    big = device_class("big", expression='device.attributes["driver-a"].size == "big"')
    small = device_class("small", expression='device.attributes["driver-a"].size == "small"')
    objects = [
        big,
        small,
        node("node-1"),
        node("node-2"),
        resource_slice("s1", [device("a", attributes=attrs(size="small"))], node="node-1", pool="p1"),
        resource_slice("s2", [device("b", attributes=attrs(size="big"))], node="node-2", pool="p2"),
        claim(requests=[first_available("req-0", exact("big", cls="big"), exact("small", cls="small"))]),
        pod("pod", ["claim-0"]),
    ]
    state = ClusterState.from_objects(objects)
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment())
    scores = dict(engine.prioritize(state.pods[("default", "pod")], ["node-1", "node-2"]))
    # node-2 gets the first choice (8 points), node-1 the second (7): 10 * 7 // 8 = 8.
    assert scores == {"node-2": 10, "node-1": 8}
    off = assemble(
        state,
        MemoryAPI(MemoryStore()),
        CelEnvironment(),
        EngineConfig(features=Features.parse("DRAPrioritizedList=false", allow_locked=True)),
    )
    # Without the gate the claim cannot be scheduled at all (PreFilter): every node scores 0.
    assert set(dict(off.prioritize(state.pods[("default", "pod")], ["node-1", "node-2"])).values()) == {0}


def test_score_nodes_falls_back_to_the_packing_policy_when_the_plugin_score_ties() -> None:
    from extender.scheduling.decide.decision import Assessment

    tie = {
        "n1": Assessment(True, free_after=0, dra_score=8),
        "n2": Assessment(True, free_after=3, dra_score=8),
    }
    assert score_nodes(tie, "binpack") == {"n1": 10, "n2": 0}
    assert score_nodes(tie, "spread") == {"n1": 0, "n2": 10}
    ranked = {
        "n1": Assessment(True, free_after=0, dra_score=6),
        "n2": Assessment(True, free_after=3, dra_score=8),
    }
    assert score_nodes(ranked, "binpack") == {"n1": 7, "n2": 10}


# --- 15. look-alike nodes that differ in declaredFeatures get their own answers -------------------------


def test_declared_features_split_look_alike_nodes() -> None:
    """Nodes with equal devices share memoized answers; declaring DRAOptionalNodeOperations must
    keep a node out of the group of those that do not, in either order of judging."""
    declaring = node("node-1")
    declaring["status"] = {"declaredFeatures": list(DECLARES)}
    objects = [
        A,
        declaring,
        node("node-2"),
        resource_slice("s1", [device("d0")], node="node-1", pool="p1", skipNodeOperations=SKIPS_ALL),
        resource_slice("s2", [device("d0")], node="node-2", pool="p2", skipNodeOperations=SKIPS_ALL),
        claim(),
        pod("pod", ["claim-0"]),
    ]
    state = ClusterState.from_objects(objects)
    features = Features.parse("DRAOptionalNodeOperations=true")
    for order in (["node-1", "node-2"], ["node-2", "node-1"]):
        engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), EngineConfig(features=features))
        result = engine.filter(state.pods[("default", "pod")], order)
        assert result.passed == ["node-1"], result
        assert "node-2" in {**result.failed, **result.unresolvable}, result


def test_a_slice_that_skips_node_operations_splits_look_alike_nodes() -> None:
    """Equal devices, but only node-1's slice skips node operations: whatever the gate, node-1
    cannot take its device (no declared feature) and node-2 can, in either order of judging."""
    objects = [
        A,
        node("node-1"),
        node("node-2"),
        resource_slice("s1", [device("d0")], node="node-1", pool="p1", skipNodeOperations=SKIPS_ALL),
        resource_slice("s2", [device("d0")], node="node-2", pool="p2"),
        claim(),
        pod("pod", ["claim-0"]),
    ]
    state = ClusterState.from_objects(objects)
    for gates in ("", "DRAOptionalNodeOperations=true"):
        for order in (["node-1", "node-2"], ["node-2", "node-1"]):
            config = EngineConfig(features=Features.parse(gates))
            engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), config)
            assert engine.filter(state.pods[("default", "pod")], order).passed == ["node-2"], (gates, order)
