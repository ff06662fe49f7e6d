"""The pod's claims, as kube-scheduler's DynamicResources PreFilter finds and checks them.

Follows ``PreFilter`` of pkg/scheduler/framework/plugins/dynamicresources (1.37) and the
``foreachPodResourceClaim`` / ``validateDeviceClass`` helpers it calls, in the same order, with
the same split between "unschedulable" (``reason``: the pod waits for a cluster change) and
"error" (``error``: scheduling the pod is aborted and retried with backoff).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from extender.allocator import Features
from extender.cluster.state import Key
from extender.model.core import Pod
from extender.model.dra import DeviceClass, ResourceClaim
from extender.model.scheduling import SCHEDULING_GROUP, PodGroup
from extender.scheduling.decide.extended import ExtendedResources

#: resourceapi.ResourceClaimReservedForMaxSize: a claim cannot be reserved for more consumers.
RESERVED_FOR_MAX = 256


@dataclass(slots=True)
class PodClaims:
    """The pod's claims, resolved: or why they cannot be (``reason``: unschedulable, ``error``)."""

    allocated: list[ResourceClaim] = field(default_factory=list)
    to_allocate: list[ResourceClaim] = field(default_factory=list)
    #: Both, in the pod's order (the order claims are written in). A claim the pod references
    #: twice is here twice, as upstream's claim store holds it (and allocates it twice).
    ordered: list[ResourceClaim] = field(default_factory=list)
    reason: str | None = None
    error: str | None = None
    #: Extended resources a DeviceClass backs (the synthesized claim is allocated last).
    extended: ExtendedResources | None = None
    #: DRAWorkloadResourceClaims: claim -> the ``reservedFor`` entry it gets, where that is the
    #: pod's PodGroup (upstream ``podResourceClaimBindings``); claims not here are the pod's.
    consumers: dict[Key, dict[str, str]] = field(default_factory=dict)
    #: The pod (DRANodeAllocatableResources reads its containers and requests at Filter).
    pod: Pod | None = None
    #: :meth:`key` and :meth:`content_key`, once asked: a filter asks each several times, and
    #: nothing changes a PodClaims once :func:`resolve_claims` returned it (a changed one is a
    #: copy, ``dataclasses.replace``, whose keys are made again).
    _key: tuple[Any, ...] | None = field(default=None, init=False, repr=False, compare=False)
    _content_key: tuple[Any, ...] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        return (
            not self.allocated
            and not self.to_allocate
            and self.reason is None
            and self.error is None
            and self.extended is None
        )

    @property
    def allocates(self) -> bool:
        """Some node may have to allocate devices for the pod (its own claims or extended resources)."""
        return bool(self.to_allocate) or self.extended is not None

    def content_key(self) -> tuple[Any, ...]:
        """What a node's answer depends on, without the names of the claims to allocate: pods
        asking for the same devices (one Deployment's) can share a node's *fitting* answer (an
        unschedulable one names its claims, so it stays the pod's own)."""
        if self._content_key is None:
            specs = tuple(
                orjson.dumps(c.raw.get("spec"), option=orjson.OPT_SORT_KEYS) for c in self.to_allocate
            )
            allocated = tuple((c.namespace, c.name, c.uid, c.resource_version) for c in self.allocated)
            extended = self.extended.key() if self.extended is not None else None
            self._content_key = ("content", specs, allocated, extended)
        return self._content_key

    def key(self) -> tuple[Any, ...]:
        """Identity of the claims as allocation sees them (changes with every claim update)."""
        if self._key is None:
            claims = [*self.to_allocate, *self.allocated]
            key = tuple((c.namespace, c.name, c.uid, c.resource_version) for c in claims)
            self._key = key if self.extended is None else (*key, self.extended.key())
        return self._key


def resolve_claims(
    pod: Pod,
    claims: Mapping[Key, ResourceClaim],
    broken: Mapping[Key, str],
    classes: Mapping[str, DeviceClass],
    features: Features,
    pending: Callable[[ResourceClaim], bool] | None = None,
    extended: Callable[[Pod], ExtendedResources | None] | None = None,
    pod_groups: Mapping[Key, PodGroup] | None = None,
) -> PodClaims:
    """``podResourceClaims``, ``preFilterExtendedResources``, ``podResourceClaimBindings`` (with
    DRAWorkloadResourceClaims), then the per-claim checks.

    ``pending``: another bind is allocating the claim; ``extended``: the extended-resource
    PreFilter (None: DRAExtendedResource off); ``pod_groups``: the cache's PodGroups.
    """
    groups = features.workload_resource_claims
    out = _find(pod, claims, broken, groups)
    out.pod = pod
    if out.reason is None and out.error is None:
        if extended is not None:
            out.extended = extended(pod)
        if groups:
            _bindings(pod, out, claims, pod_groups or {})
        if out.reason is None:
            _check(pod, out, classes, features, pending)
    return out


def _bindings(
    pod: Pod, out: PodClaims, claims: Mapping[Key, ResourceClaim], pod_groups: Mapping[Key, PodGroup]
) -> None:
    """podResourceClaimBindings -> resourceclaim.BindTo (v1.36.3): a pod claim that matches an
    entry of its PodGroup exactly (name, claim name, template name) is reserved for the group."""
    if pod.pod_group is None:
        return
    group = pod_groups.get((pod.namespace, pod.pod_group))
    if group is None:
        out.reason = f'podgroup.scheduling.k8s.io "{pod.pod_group}" not found'
        return
    for ref in pod.claims:
        for entry in group.claims:
            if entry.resource_claim_name is None and entry.resource_claim_template_name is None:
                out.reason = (
                    f"PodGroup {group.namespace}/{group.name} claim {entry.name}: "
                    "none of the supported fields are set"
                )
                return
            if entry == ref:
                name = ref.resource_claim_name or pod.claim_statuses.get(ref.name)
                if name is not None and (pod.namespace, name) in claims:
                    out.consumers[(pod.namespace, name)] = group.consumer()
                break


def _owned(pod: Pod, claim: ResourceClaim, groups: bool) -> str | None:
    """resourceclaim.IsForPod: why a template claim is not the pod's to use (None: it is)."""
    if claim.controller_uid == pod.uid:
        return None
    where = f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod {pod.namespace}/{pod.name}"
    if groups and pod.pod_group is not None:
        controller = claim.controller
        if (
            controller is not None
            and controller[1] == "PodGroup"
            and controller[2] == pod.pod_group
            and controller[0].startswith(f"{SCHEDULING_GROUP}/")  # any version of the group
        ):
            return None
        return f"{where} (neither Pod nor PodGroup {pod.pod_group} is the owner)"
    # A pod outside any group: v1.36.3 dereferences the missing group (a panic, kubernetes#139844).
    return f"{where} (Pod is not owner)"


def _find(
    pod: Pod, claims: Mapping[Key, ResourceClaim], broken: Mapping[Key, str], groups: bool
) -> PodClaims:
    """foreachPodResourceClaim: every failure is "unschedulable" with its error text."""
    out = PodClaims()
    for ref in pod.claims:
        if ref.resource_claim_name:
            name = ref.resource_claim_name
            owned = False
        elif ref.resource_claim_template_name:
            if ref.name not in pod.claim_statuses:
                out.reason = f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
                return out
            generated = pod.claim_statuses[ref.name]
            if generated is None:
                continue  # the controller decided no claim is needed
            name, owned = generated, True
        else:
            out.reason = (
                f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{ref.name}": '
                "none of the supported fields are set"
            )
            return out
        key = (pod.namespace, name)
        if key in broken:
            # Ours, not upstream's: the cache holds an object it cannot read.
            out.error = f"resourceclaim {pod.namespace}/{name} cannot be read: {broken[key]}"
            return out
        claim = claims.get(key)
        if claim is None:
            out.reason = f'resourceclaim.resource.k8s.io "{name}" not found'
            return out
        if claim.deleting:
            out.reason = f'resourceclaim "{name}" is being deleted'
            return out
        if owned and (problem := _owned(pod, claim, groups)) is not None:
            out.reason = problem
            return out
        (out.allocated if claim.allocation is not None else out.to_allocate).append(claim)
        out.ordered.append(claim)
    return out


def _check(
    pod: Pod,
    out: PodClaims,
    classes: Mapping[str, DeviceClass],
    features: Features,
    pending: Callable[[ResourceClaim], bool] | None,
) -> None:
    """PreFilter's loop over the claims, first failure wins."""
    for claim in out.ordered:
        where = f"{claim.namespace}/{claim.name}"
        if claim.allocation is not None:
            if len(claim.reserved_for) >= RESERVED_FOR_MAX and not reserved_for_pod(claim, pod, features):
                out.reason = "resourceclaim in use"  # resourceclaim.CanBeReserved is false
                return
            selector = claim.allocation.node_selector
            if selector is not None and selector.error is not None:
                out.error = selector.error  # nodeaffinity.NewNodeSelector failed: statusError
                return
            continue
        if pending is not None and pending(claim):
            out.reason = f"resource claim {where} is in the process of being allocated"
            return
        for request in claim.spec.requests:
            if request.exactly is not None:
                problem = _validate_class(request.exactly.device_class_name, request.name, classes)
            elif request.first_available:
                if not features.prioritized_list:
                    out.reason = (
                        f"resource claim {where}, request {request.name}: has subrequests, "
                        "but the DRAPrioritizedList feature is disabled"
                    )
                    return
                problem = None
                for sub in request.first_available:
                    problem = _validate_class(sub.device_class_name, f"{request.name}/{sub.name}", classes)
                    if problem is not None:
                        break
            else:
                problem = ("reason", f"resource claim {where}, request {request.name}: unknown request type")
            if problem is not None:
                kind, message = problem
                if kind == "error":
                    out.error = message
                else:
                    out.reason = message
                return


def reserved_for_pod(claim: ResourceClaim, pod: Pod, features: Features) -> bool:
    """resourceclaim.IsReservedForPod: the pod, or (DRAWorkloadResourceClaims) its PodGroup."""
    if claim.reserved_for_uid(pod.uid):
        return True
    return (
        features.workload_resource_claims
        and pod.pod_group is not None
        and claim.reserved_for_group(pod.pod_group)
    )


def _validate_class(
    class_name: str, request_name: str, classes: Mapping[str, DeviceClass]
) -> tuple[str, str] | None:
    """validateDeviceClass: ("error" | "reason", message), or None when the class exists."""
    if not class_name:
        return ("error", f"request {request_name}: unsupported request type")
    if class_name not in classes:
        # Unschedulable: the pod waits for a DeviceClass event.
        return ("reason", f"request {request_name}: device class {class_name} does not exist")
    return None
