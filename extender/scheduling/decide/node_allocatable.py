"""DRANodeAllocatableResources at Filter and PreBind, as v1.36.3 does it
(pkg/scheduler/framework/plugins/dynamicresources/nodeallocatabledynamicresources.go).

With the gate on, a device's ``nodeAllocatableResourceMappings`` turn its allocation into node
resources (cpu, memory, ...) the pod takes on top of its containers' requests:

- an allocated claim another pod on the node already records in its
  ``status.nodeAllocatableResourceClaimStatuses`` is refused (one pod per such claim);
- for the claims allocated in this cycle, the statuses are computed from the new allocations
  (a device's ``allocationMultiplier``, or the capacity consumed under ``capacityKey`` times it),
  every such claim must be used by some container, pod-level requests must cover the total, and
  the pod with them must fit the node's allocatable minus what its pods request ("Insufficient
  cpu", Unschedulable, or UnschedulableAndUnresolvable when the node is too small anyway);
- PreBind records the statuses in the pod's status before the Binding.

1.37's second API (``nodeAllocatableResources``, mapping and overhead) differs in how statuses
are built, which claims count, sharing and the pod-level checks: its parts are below the 1.36
ones, named ``..._137`` where both releases have one.

Longer than the other modules of the room: both releases' APIs of one feature, kept beside each
other so that a reader sees where they differ.

Pure: the caller hands in the node, its pods and a device lookup.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from extender.allocator.features import Features
from extender.allocator.inventory import device_on_node
from extender.model.core import Node, Pod
from extender.model.dra import Device, DeviceID, ResourceClaim
from extender.model.node_allocatable import ClaimResources, Overhead, add_quantities, consumed_amount
from extender.model.node_allocatable import NodeAllocatableError as NodeAllocatableError
from extender.model.nodeselector import NodeSelectorError
from extender.model.requests import Requests, pod_requests
from extender.quantity import Quantity, QuantityError, parse_quantity

#: (driver, pool, device) -> the published device, if any.
DeviceLookup = Callable[[str, str, str], Device | None]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why the pod does not fit with its node-allocatable claims (None in ``reason``: it fits)."""

    reason: str | None = None
    #: Unschedulable (not Unresolvable): evicting pods could make room.
    resolvable: bool = False
    statuses: tuple[ClaimResources, ...] = ()


def shared_claim(
    pod: Pod,
    node: Node,
    allocated: Iterable[ResourceClaim],
    node_pods: Callable[[], Sequence[Pod]],
    devices: Callable[[], Mapping[DeviceID, Device]],
    features: Features,
) -> str | None:
    """Filter's loop over the allocated claims: the first one available on the node that another
    pod may not share (its sharing check runs after the node selector's, which skips the claim).

    1.36: other pods on the node record the claim in their status; 1.37 (``second_api``): the
    claim holds a mapped device and is reserved for someone else."""
    second_api, group_claims = features.node_allocatable_second_api, features.workload_resource_claims
    for claim in allocated:
        selector = claim.allocation.node_selector if claim.allocation is not None else None
        if selector is not None and not selector.matches(node.name, node.labels):
            continue
        if second_api:
            problem = sharing_problem_137(pod, claim, devices(), group_claims=group_claims)
        else:
            problem = sharing_problem(pod, claim.name, node_pods())
        if problem is not None:
            return problem
    return None


def judge(
    pod: Pod,
    node: Node,
    allocations: Mapping[str, Mapping[str, Any]],
    devices: Mapping[DeviceID, Device],
    node_pods: Callable[[], Sequence[Pod]],
    requests: NodeRequests | None = None,
    allocated: Iterable[ResourceClaim] = (),
    second_api: bool = False,
) -> Verdict:
    """calculateAndCheckNodeAllocatableResources on ``node``: this cycle's new ``allocations``
    (claim name -> ``status.allocation``), and with 1.37's API (``second_api``) the stored
    allocations of the pod's ``allocated`` claims too. :class:`NodeAllocatableError` is Filter's
    error."""

    def lookup(*key: str) -> Device | None:
        return devices.get(DeviceID(*key))

    entries = pod_entries(pod)
    if second_api:
        stored = {c.name: c.allocation.raw for c in allocated if c.allocation is not None}
        statuses = claim_statuses_137(pod, entries, {**stored, **allocations}, lookup, on_node(node))
    else:
        statuses = claim_statuses(pod, entries, allocations, lookup)
    if not statuses:
        return Verdict()
    return check(pod, node, statuses, node_pods(), requests, second_api=second_api)


def on_node(node: Node) -> Callable[[Device], bool]:
    """getDeviceFromSlices' per-device check: a device that names its nodes must name this one."""

    def matches(device: Device) -> bool:
        if device.node_name is None and not device.all_nodes and device.node_selector is None:
            return True  # the slice's nodes hold (it was gathered for this node)
        try:
            return device_on_node(device, node.name, node.labels)
        except NodeSelectorError:
            return False

    return matches


def pod_entries(pod: Pod) -> dict[str, str]:
    """The pod's claim entry name -> claim name (foreachPodResourceClaim's names)."""
    out = {}
    for ref in pod.claims:
        name = ref.resource_claim_name or pod.claim_statuses.get(ref.name)
        if name:
            out[ref.name] = name
    return out


def sharing_problem(pod: Pod, claim_name: str, node_pods: Iterable[Pod]) -> str | None:
    """validateNodeAllocatableDRAClaimSharing: the claim is recorded by other pods on the node."""
    consumers = {
        p.uid
        for p in node_pods
        if p.namespace == pod.namespace  # NodeAllocatableDRAClaimStates are keyed by namespace/name
        and not p.terminal  # not in kube-scheduler's cache
        and any(s.claim == claim_name for s in p.node_allocatable)
    }
    if len(consumers) > 1:
        return f"node allocatable resource claim {claim_name} shared by multiple pods"
    if len(consumers) == 1 and pod.uid not in consumers:
        return f"node allocatable resource claim {claim_name} is already used by another pod"
    return None


def claim_statuses(
    pod: Pod,
    entries: Mapping[str, str],
    allocations: Mapping[str, Mapping[str, Any]],
    device: DeviceLookup,
) -> tuple[ClaimResources, ...]:
    """buildNodeAllocatableDRAInfo over the claims whose new allocation holds a mapped device.

    ``entries``: the pod's claim entry name -> claim name; ``allocations``: claim name -> the
    ``status.allocation`` this cycle gives it. Sorted by claim name, as upstream.
    """
    out = []
    for claim, allocation in allocations.items():
        found = results_with_devices(allocation, device)
        if not any(d is not None and d.node_allocatable for _, d in found):
            continue
        resources: dict[str, Quantity] = {}
        for result, dev in found:
            if dev is None:
                raise NodeAllocatableError(
                    f"claim {pod.namespace}/{claim}, device {result.get('device')}: device "
                    f"{result.get('device')} not found in pool {result.get('pool')}"
                )
            if not dev.node_allocatable:
                continue
            for name, mapping in dev.node_allocatable.items():
                where = f"{pod.namespace}/{claim}"
                key, multiplier = mapping.capacity_key, mapping.multiplier
                amount = (
                    consumed_amount(where, result, name, key, multiplier, "NodeAllocatableResourceMappings")
                    if key
                    else multiplier
                )
                if amount is not None:
                    resources[name] = add_quantities(resources.get(name), amount)
        if not resources:
            continue  # no mapping applied (hasNodeAllocatableClaims stays false upstream)
        users = tuple(c.name for c in pod.containers for ref in c.claims if entries.get(ref) == claim)
        out.append(ClaimResources(claim, users, resources))
    return tuple(sorted(out, key=lambda s: s.claim))


def check(
    pod: Pod,
    node: Node,
    statuses: Sequence[ClaimResources],
    node_pods: Iterable[Pod],
    requests: NodeRequests | None = None,
    *,
    second_api: bool = False,
) -> Verdict:
    """The rest of calculateAndCheckNodeAllocatableResources once the statuses are known."""
    demand = pod_requests(pod, pod_level=True, node_allocatable=statuses)
    if second_api:
        problem = pod_level_problem(pod, statuses)
        if problem is not None:
            return Verdict(problem)
    else:
        for status in statuses:
            if not status.containers:
                return Verdict(
                    f"claim {status.claim}: node-allocatable resource claim not referenced by any "
                    "container within the pod"
                )
    if pod.pod_requests and not second_api:
        covered = pod_requests(pod, node_allocatable=statuses)
        for name, amount in demand.items():
            if name in covered and covered[name] > amount:
                return Verdict(
                    f"pod level request for {name} is insufficient to cover the aggregated container "
                    "and node-allocatable DRA requests"
                )
    reasons, unresolvable = _insufficient(demand, node, (requests or NodeRequests()).of(node_pods))
    if reasons:
        return Verdict(", ".join(reasons), resolvable=not unresolvable)
    return Verdict(statuses=tuple(statuses))


class NodeRequests:
    """NodeInfo.Requested of a node's pods (PodInfo.CalculateResource, with in-place resizes,
    pod-level resources and node-allocatable claim statuses): cpu in millicores, the rest in
    units, each pod's amount rounded up as resource.Quantity's MilliValue/Value do. Each pod's
    share is kept while the pod record is the same (a new record is a new version)."""

    def __init__(self, limit: int = 100_000) -> None:
        #: (uid, resourceVersion, node) -> the pod's share: a pod of this extender's binds carries
        #: its node (and claim statuses) before the API server's version does.
        self._shares: dict[tuple[str, str, str], dict[str, int]] = {}
        self._limit = limit

    def of(self, pods: Iterable[Pod]) -> dict[str, int]:
        total: dict[str, int] = {}
        for pod in pods:
            if pod.terminal:
                continue  # kube-scheduler's pod informer leaves Succeeded and Failed pods out
            for name, value in self._pod(pod).items():
                total[name] = total.get(name, 0) + value
        return total

    def _pod(self, pod: Pod) -> dict[str, int]:
        version = str((pod.raw.get("metadata") or {}).get("resourceVersion") or "")
        key = (pod.uid, version, pod.node_name)
        hit = self._shares.get(key) if version else None
        if hit is not None:
            return hit
        if len(self._shares) >= self._limit:
            self._shares.clear()
        amounts = pod_requests(pod, use_status=True, pod_level=True, node_allocatable=pod.node_allocatable)
        units = {name: _units(name, value) for name, value in amounts.items()}
        if version:
            self._shares[key] = units
        return units


def _units(name: str, value: Fraction) -> int:
    return math.ceil(value * 1000) if name == "cpu" else math.ceil(value)


def _insufficient(demand: Requests, node: Node, used: Mapping[str, int]) -> tuple[list[str], bool]:
    """nodeFitsResources: cpu, memory, ephemeral-storage, then hugepages (in name order)."""
    reasons: list[str] = []
    unresolvable = False
    names = ["cpu", "memory", "ephemeral-storage"]
    names += sorted(n for n in demand if n.startswith("hugepages-"))
    for name in names:
        want = _units(name, demand.get(name, Fraction(0)))
        if want <= 0 and not name.startswith("hugepages-"):
            continue
        capacity = _allocatable(node, name)
        if want > capacity - used.get(name, 0):
            reasons.append(f"Insufficient {name}")
            unresolvable = unresolvable or want > capacity
    return reasons, unresolvable


def _allocatable(node: Node, name: str) -> int:
    text = node.allocatable.get(name)
    if text is None:
        return 0
    try:
        return _units(name, parse_quantity(text).value)
    except QuantityError:
        return 0


def status_patch(statuses: Sequence[ClaimResources] | None) -> dict[str, Any]:
    """The pod status patch PreBind sends (None: Unreserve's clearing)."""
    return {"nodeAllocatableResourceClaimStatuses": [s.to_dict() for s in statuses] if statuses else None}


# --- 1.37's second API (kubernetes#140009) -----------------------------------------------------
# Read in nodeallocatabledynamicresources.go at the pull request's merge commit af7eeeb2 (the
# v1.37.0 code of that file; no copy at the tag was stored) and resourcehelper in
# component-helpers:
#
# - a device's ``nodeAllocatableResources`` give per resource a ``mapping`` (``capacityKey`` times
#   ``capacityMultiplier``, or ``deviceMultiplier`` per device) and an ``overhead`` (``perPod``,
#   ``perContainer``), summed over the claim's devices;
# - claims that are already allocated count too, claims no container uses are allowed (their
#   ``perContainer`` counts nothing), and only a claim with a *mapped* device is refused to a pod
#   it is not reserved for (an overhead-only claim may be shared);
# - pod-level requests and limits must cover the containers' with the claims' amounts.

#: Resources pod-level requests may name (IsSupportedPodLevelResource), besides hugepages-*.
_POD_LEVEL = frozenset({"cpu", "memory"})


def sharing_problem_137(
    pod: Pod, claim: ResourceClaim, devices: Mapping[DeviceID, Device], *, group_claims: bool
) -> str | None:
    """validateNodeAllocatableDRAClaimSharing: a claim holding a device with a ``mapping`` may be
    used by one pod only (or by one PodGroup, with DRAWorkloadResourceClaims)."""
    if claim.allocation is None or not _has_mapped_device(claim, devices):
        return None
    if not claim.reserved_for:
        return None
    if claim.reserved_for_uid(pod.uid):
        return None
    if group_claims and pod.pod_group and claim.reserved_for_group(pod.pod_group):
        return None
    return (
        f"node allocatable resource claim {claim.name} has a mapped device and cannot be shared across pods"
    )


def _has_mapped_device(claim: ResourceClaim, devices: Mapping[DeviceID, Device]) -> bool:
    assert claim.allocation is not None
    for result in claim.allocation.devices:
        device = devices.get(result.id)
        if device is not None and any(m.mapped for m in device.node_allocatable_resources.values()):
            return True
    return False


def results_with_devices(
    allocation: Mapping[str, Any], device: DeviceLookup
) -> list[tuple[Mapping[str, Any], Device | None]]:
    """An allocation's results, each with its published device (None: not on this node)."""
    results = [r for r in ((allocation.get("devices") or {}).get("results") or []) if isinstance(r, Mapping)]
    return [(r, device(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))) for r in results]


def claim_statuses_137(
    pod: Pod,
    entries: Mapping[str, str],
    allocations: Mapping[str, Mapping[str, Any]],
    device: DeviceLookup,
    on_node: Callable[[Device], bool] = lambda d: True,
) -> tuple[ClaimResources, ...]:
    """buildNodeAllocatableDRAInfo: one entry per claim whose devices back node resources.

    ``entries``: the pod's claim entry name -> claim name; ``allocations``: claim name -> its
    ``status.allocation`` (this cycle's, else the stored one); ``on_node``: whether a device
    of a perDeviceNodeSelection slice may be used on the node. Sorted by claim name; the mapping
    and overhead lists by resource name.
    """
    out = []
    for claim, allocation in allocations.items():
        found = results_with_devices(allocation, device)
        if not any(d is not None and d.node_allocatable_resources for _, d in found):
            continue
        where = f"{pod.namespace}/{claim}"
        mapping: dict[str, Quantity] = {}
        per_pod: dict[str, Quantity] = {}
        per_container: dict[str, Quantity] = {}
        for result, dev in found:
            name, pool, driver = result.get("device"), result.get("pool"), result.get("driver")
            if dev is None:
                raise NodeAllocatableError(
                    f"claim {where}, device {name}, driver {driver}: device {name} not found in pool "
                    f"{pool} for driver {driver}"
                )
            if not on_node(dev):
                raise NodeAllocatableError(
                    f"claim {where}, device {name}, driver {driver}: device {name} does not match node"
                )
            for resource, entry in dev.node_allocatable_resources.items():
                key = entry.capacity_key
                if key is not None:
                    amount = consumed_amount(
                        where, result, resource, key, entry.multiplier, "NodeAllocatableResources"
                    )
                else:
                    amount = entry.device_multiplier
                _accumulate(mapping, resource, amount)
                _accumulate(per_pod, resource, entry.per_pod)
                _accumulate(per_container, resource, entry.per_container)
        if not mapping and not per_pod and not per_container:
            continue
        users = tuple(c.name for c in pod.containers for ref in c.claims if entries.get(ref) == claim)
        overhead = {
            name: Overhead(per_pod.get(name), per_container.get(name))
            for name in sorted(set(per_pod) | set(per_container))
        }
        out.append(ClaimResources(claim, users, {}, dict(sorted(mapping.items())), overhead, second_api=True))
    return tuple(sorted(out, key=lambda s: s.claim))


def _accumulate(into: dict[str, Quantity], name: str, amount: Quantity | None) -> None:
    if amount is not None:
        into[name] = add_quantities(into.get(name), amount)


def pod_level_problem(pod: Pod, statuses: Sequence[ClaimResources]) -> str | None:
    """validatePodLevelResourcesCoverDRA: pod-level requests must cover the containers' requests
    with the claims' amounts (``spec.overhead`` left out), pod-level hugepages limits the
    containers' limits with them, and each other pod-level limit every regular container's
    limit plus what the claims it uses add."""
    if not statuses or not (pod.pod_requests or pod.pod_limits):
        return None
    if pod.pod_requests:
        aggregated = pod_requests(pod, node_allocatable=statuses, overhead=False)
        for name, q in pod.pod_requests.items():
            if _pod_level(name) and name in aggregated and aggregated[name] > q.value:
                return (
                    f"pod level request for {name} is insufficient to cover the aggregated container and "
                    "node-allocatable DRA requests"
                )
    if pod.pod_limits:
        limits = _container_limits(pod, statuses)
        for name, q in pod.pod_limits.items():
            if name.startswith("hugepages-") and name in limits and limits[name] > q.value:
                return (
                    f"pod level limit for {name} is insufficient to cover the aggregated container and "
                    "node-allocatable DRA limits"
                )
        for c in pod.containers:
            if c.init:
                continue
            extra = _container_amounts(c.name, statuses)
            for name, limit in c.limits.items():
                pod_limit = pod.pod_limits.get(name)
                if name.startswith("hugepages-") or pod_limit is None:
                    continue
                if limit.value + extra.get(name, Fraction(0)) > pod_limit.value:
                    return (
                        f"pod level limit for {name} is insufficient to cover the limit and DRA overhead "
                        f"for container {c.name}"
                    )
    return None


def _pod_level(name: str) -> bool:
    return name in _POD_LEVEL or name.startswith("hugepages-")


def _container_limits(pod: Pod, statuses: Iterable[ClaimResources]) -> dict[str, Fraction]:
    """AggregateContainerLimits with the claims' amounts (hugepages always count)."""
    as_requests = replace(
        pod, containers=tuple(replace(c, requests=c.limits, effective=None) for c in pod.containers)
    )
    return pod_requests(as_requests, node_allocatable=statuses, overhead=False)


def _container_amounts(container: str, statuses: Iterable[ClaimResources]) -> dict[str, Fraction]:
    """GetContainerDRAAllocations: each mapped amount, perPod and perContainer of the claims the
    container uses."""
    out: dict[str, Fraction] = {}
    for status in statuses:
        if container not in status.containers:
            continue
        for name, q in status.mapping.items():
            out[name] = out.get(name, Fraction(0)) + q.value
        for name, o in status.overhead.items():
            for part in (o.per_pod, o.per_container):
                if part is not None:
                    out[name] = out.get(name, Fraction(0)) + part.value
    return out
