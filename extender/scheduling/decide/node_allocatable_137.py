"""DRANodeAllocatableResources' second alpha (1.37, kubernetes#140009) at Filter: the parts that
differ from 1.36 (:mod:`extender.scheduling.decide.node_allocatable` has the rest and the fit itself).

Read in nodeallocatabledynamicresources.go at the pull request's merge commit af7eeeb2 (the
v1.37.0 code of that file; no copy at the tag was stored) and resourcehelper in
component-helpers:

- a device's ``nodeAllocatableResources`` give per resource a ``mapping`` (``capacityKey`` times
  ``capacityMultiplier``, or ``deviceMultiplier`` per device) and an ``overhead`` (``perPod``,
  ``perContainer``), summed over the claim's devices;
- claims that are already allocated count too, claims no container uses are allowed (their
  ``perContainer`` counts nothing), and only a claim with a *mapped* device is refused to a pod
  it is not reserved for (an overhead-only claim may be shared);
- pod-level requests and limits must cover the containers' with the claims' amounts.

Pure: the caller hands in the allocations and a device lookup.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from extender.model.core import Pod
from extender.model.dra import Device, DeviceID, ResourceClaim
from extender.model.node_allocatable import (
    ClaimResources,
    NodeAllocatableError,
    Overhead,
    add_quantities,
    consumed_amount,
)
from extender.model.requests import pod_requests
from extender.quantity import Quantity

#: (driver, pool, device) -> the published device on this node, if any.
DeviceLookup = Callable[[str, str, str], Device | None]

#: Resources pod-level requests may name (IsSupportedPodLevelResource), besides hugepages-*.
_POD_LEVEL = frozenset({"cpu", "memory"})


def sharing_problem(
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


def claim_statuses(
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
