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
from extender.scheduling.extended import ExtendedResources

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
        specs = tuple(orjson.dumps(c.raw.get("spec"), option=orjson.OPT_SORT_KEYS) for c in self.to_allocate)
        allocated = tuple((c.namespace, c.name, c.uid, c.resource_version) for c in self.allocated)
        return ("content", specs, allocated, self.extended.key() if self.extended is not None else None)

    def key(self) -> tuple[Any, ...]:
        """Identity of the claims as allocation sees them (changes with every claim update)."""
        claims = [*self.to_allocate, *self.allocated]
        key = tuple((c.namespace, c.name, c.uid, c.resource_version) for c in claims)
        return key if self.extended is None else (*key, self.extended.key())


def resolve_claims(
    pod: Pod,
    claims: Mapping[Key, ResourceClaim],
    broken: Mapping[Key, str],
    classes: Mapping[str, DeviceClass],
    features: Features,
    pending: Callable[[ResourceClaim], bool] | None = None,
    extended: Callable[[Pod], ExtendedResources | None] | None = None,
) -> PodClaims:
    """``podResourceClaims``, ``preFilterExtendedResources``, then the per-claim checks.

    ``pending``: another bind is allocating the claim; ``extended``: the extended-resource
    PreFilter (None: DRAExtendedResource off).
    """
    out = _find(pod, claims, broken)
    if out.reason is None and out.error is None:
        if extended is not None:
            out.extended = extended(pod)
        _check(pod, out, classes, features, pending)
    return out


def _find(pod: Pod, claims: Mapping[Key, ResourceClaim], broken: Mapping[Key, str]) -> PodClaims:
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
        if owned and claim.controller_uid != pod.uid:
            out.reason = (
                f"ResourceClaim {pod.namespace}/{name} was not created for Pod "
                f"{pod.namespace}/{pod.name} (Pod is not owner)"
            )
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
            if len(claim.reserved_for) >= RESERVED_FOR_MAX and not claim.reserved_for_uid(pod.uid):
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
