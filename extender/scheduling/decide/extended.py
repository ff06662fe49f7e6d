"""DRA-backed extended resources (KEP-5004, GA and locked on in 1.37), as kube-scheduler does them.

A pod may request an extended resource (``example.com/gpu: 1``) that a DeviceClass names
(``spec.extendedResourceName``, or implicitly ``deviceclass.resource.kubernetes.io/<class>``).
On a node that does not advertise it in ``status.allocatable`` the DynamicResources plugin
allocates it through DRA: it synthesizes one claim for the pod (one ExactCount request per
container and resource), allocates it together with the pod's own claims and, when binding,
creates it and records the container -> request mapping in ``pod.status.extendedResourceClaimStatus``.

Follows pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go (1.37):
``preFilterExtendedResources``, ``filterExtendedResources`` and ``createRequestsAndMappings``,
the class resolver of dynamic-resource-allocation ``deviceclass/extendedresourcecache`` and
``IsDRAExtendedResourceName`` of pkg/scheduler/util. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import ceil
from typing import Any

from extender.model.core import Container, Node, Pod
from extender.model.dra import DeviceClass, ResourceClaim, parse_resource_claim
from extender.model.requests import pod_requests
from extender.model.timestamps import parse_timestamp
from extender.names import qualified_name
from extender.quantity import QuantityError, parse_quantity

#: resourceapi.ExtendedResourceClaimAnnotation: marks the claim the scheduler creates for a pod.
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
#: resourceapi.ResourceDeviceClassPrefix: every class's implicit extended resource name.
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
#: specialClaimInMemName: the in-memory claim's name (deliberately not a valid object name).
IN_MEMORY_NAME = "<extended-resources>"
#: names.SimpleNameGenerator: a generated name is the base cut to 58 characters plus 5 more.
_BASE_MAX, _SUFFIX = 58, 5
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

CANNOT_SCHEDULE_CLAIM = "cannot schedule extended resource claim"
CANNOT_FIT = "cannot fit resource"


def is_extended_resource_name(name: str) -> bool:
    """v1helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not qualified_name("requests." + name)


def is_dra_extended_resource_name(name: str) -> bool:
    """schedutil.IsDRAExtendedResourceName."""
    return is_extended_resource_name(name) or name.startswith(IMPLICIT_PREFIX)


def may_request(pod: Pod) -> bool:
    """Cheap pre-check: does any container (or the overhead) name a DRA-capable resource?"""
    names = [n for c in pod.containers for n in c.requests]
    names += list(pod.overhead)
    return any("/" in n and is_dra_extended_resource_name(n) for n in names)


def extended_resource_classes(classes: Mapping[str, DeviceClass]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass that backs it (the ExtendedResourceCache).

    Every class backs its implicit name. Of several classes naming the same
    ``extendedResourceName`` the newest (``creationTimestamp``) wins, the lower name on a tie.
    Computed from all classes at once, so a deleted or changed winner never lingers (the
    incremental upstream cache could, k/k#141110).
    """
    out = {IMPLICIT_PREFIX + name: name for name in classes}
    winners: dict[str, DeviceClass] = {}
    for cls in classes.values():
        name = cls.extended_resource_name
        if not name:
            continue
        best = winners.get(name)
        if best is None or _wins(cls, best):
            winners[name] = cls
    for name, cls in winners.items():
        out.setdefault(name, cls.name)  # validation keeps explicit names off the implicit prefix
    return out


def _wins(a: DeviceClass, b: DeviceClass) -> bool:
    ta, tb = parse_timestamp(a.created) or 0.0, parse_timestamp(b.created) or 0.0
    return ta > tb or (ta == tb and a.name < b.name)


def allocatable_value(node: Node, name: str) -> int | None:
    """The node's allocatable ``name`` as scheduling counts it (Quantity.Value), None if absent."""
    text = node.allocatable.get(name)
    if text is None:
        return None
    try:
        return ceil(parse_quantity(str(text)).value)
    except QuantityError:
        return 0


def claim_name(pod: Pod) -> str:
    """The name the extended-resource claim of ``pod`` is created under.

    Upstream creates it with ``generateName`` (``<pod>-extended-resources-`` plus five random
    characters). We keep that shape but derive the five characters from the pod's UID: a create
    whose answer is lost, retried, then finds its own claim instead of making a second one.
    """
    base = f"{pod.name}-extended-resources-"[:_BASE_MAX]
    digest = hashlib.sha256(pod.uid.encode()).digest()
    return base + "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:_SUFFIX])


def claim_object(
    pod: Pod, requests: Iterable[Mapping[str, Any]], name: str = IN_MEMORY_NAME
) -> dict[str, Any]:
    """The claim as upstream builds it in PreFilter (``name``: the in-memory one by default)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": pod.namespace,
            "generateName": f"{pod.name}-extended-resources-",
            "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
            ],
        },
        "spec": {"devices": {"requests": [dict(r) for r in requests]}},
    }


def is_extended_claim_of(claim: ResourceClaim, pod: Pod) -> bool:
    """findExtendedResourceClaim's test: the annotation, and the pod as controller owner."""
    return claim.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true" and claim.controller_uid == pod.uid


# --- request synthesis (createRequestsAndMappings) ----------------------------------------------


def mapping(container: str, resource: str, request: str) -> dict[str, str]:
    """One ``ContainerExtendedResourceRequest``."""
    return {"containerName": container, "resourceName": resource, "requestName": request}


def _container_request(
    index: int,
    container: Container,
    resource: str,
    class_name: str,
    reusable: Iterable[dict[str, Any] | None] = (),
) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """createResourceRequestAndMappings: the container's request for ``resource`` (None when it
    needs none of its own, e.g. it reuses later long-lived containers' devices) and mappings."""
    quantity = container.requests.get(resource)
    if quantity is None:
        return None, []
    wanted = quantity.as_int64()
    if not wanted:
        return None, []
    maps: list[dict[str, str]] = []
    have = 0
    for other in reusable:
        if other is not None:
            have += other["exactly"]["count"]
            maps.append(mapping(container.name, resource, other["name"]))
            if have >= wanted:
                return None, maps
    # j: the resource's index among all of the container's (sorted) request names.
    j = sorted(container.requests).index(resource)
    name = f"container-{index}-request-{j}"
    request = {
        "name": name,
        "exactly": {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": wanted - have},
    }
    maps.append(mapping(container.name, resource, name))
    return request, maps


def synthesize(
    pod: Pod, resources: Iterable[str], classes: Mapping[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The claim's requests (sorted by name) and the mappings, for the resources going through DRA.

    Long-lived containers (regular ones and sidecars) get one request each. A plain init
    container first reuses the requests of long-lived containers after it and asks only for
    the rest; of those init requests only the largest is kept and the others map to it.
    """
    containers = pod.containers
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        class_name = classes.get(resource)
        if class_name is None:
            continue
        long_lived: list[dict[str, Any] | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i, c in enumerate(containers):
            if c.long_lived:
                long_lived[i], maps = _container_request(i, c, resource, class_name)
                long_maps += maps
        largest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_maps: list[dict[str, str]] = []
        for i, c in enumerate(containers):
            if c.long_lived:
                continue
            request, maps = _container_request(i, c, resource, class_name, long_lived[i:])
            if request is not None:
                short_names.add(request["name"])
                if largest is None or largest["exactly"]["count"] < request["exactly"]["count"]:
                    largest = request
            short_maps += maps
        if largest is not None and len(short_names) > 1:
            replaced = short_names - {largest["name"]}
            for m in short_maps:
                if m["requestName"] in replaced:
                    m["requestName"] = largest["name"]
        if largest is not None:
            requests.append(largest)
        requests += [r for r in long_lived if r is not None]
        mappings += long_maps + short_maps
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings


# --- PreFilter and Filter -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeExtendedClaim:
    """The pod's extended-resource claim as one node needs it (Filter's node-specific copy)."""

    #: The resources allocated through DRA on this node.
    resources: frozenset[str]
    #: The in-memory claim (name ``<extended-resources>``) with this node's requests.
    claim: ResourceClaim
    requests: tuple[dict[str, Any], ...]
    #: ``pod.status.extendedResourceClaimStatus.requestMappings``.
    mappings: tuple[dict[str, str], ...]


@dataclass(slots=True)
class ExtendedResources:
    """PreFilter's result for a pod requesting extended resources that a DeviceClass backs."""

    pod: Pod
    #: DRA-capable resource names the pod requests (PodRequests, non-zero) -> amount.
    requested: dict[str, int]
    #: Of those, the ones a DeviceClass backs -> the class.
    classes: dict[str, str]
    #: The claim created for the pod in an earlier attempt, if any (Filter rejects it).
    existing: ResourceClaim | None = None
    _per_set: dict[frozenset[str], NodeExtendedClaim] = field(default_factory=dict)
    _names: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._names = sorted(self.requested)

    def key(self) -> tuple[Any, ...]:
        """What allocation outcomes depend on (pods of one Deployment share it)."""
        containers = tuple(
            (c.long_lived, tuple(sorted((n, q.canonical()) for n, q in c.requests.items())))
            for c in self.pod.containers
        )
        existing = None if self.existing is None else (self.existing.uid, self.existing.resource_version)
        return (containers, tuple(sorted(self.classes.items())), existing)

    def all_resources(self) -> NodeExtendedClaim:
        """The claim for every backed resource: what any node's claim can ask of a device."""
        return self.claim_for(frozenset(self.classes))

    def for_node(self, node: Node) -> tuple[str | None, NodeExtendedClaim | None]:
        """filterExtendedResources: (unschedulable reason, or the node's claim; None: no DRA here)."""
        if self.existing is not None:
            # From an earlier cycle: its requests are fixed, so it is deleted and the pod retried.
            return CANNOT_SCHEDULE_CLAIM, None
        via_dra = []
        for name in self._names:
            allocatable = allocatable_value(node, name)
            if name in self.classes and not allocatable:
                via_dra.append(name)
            elif allocatable is None:
                return f"{CANNOT_FIT}: {name} (the node does not offer it and no DeviceClass backs it)", None
        if not via_dra:
            return None, None  # served by device plugins here (NodeResourcesFit checks them)
        return None, self.claim_for(frozenset(via_dra))

    def claim_for(self, resources: frozenset[str]) -> NodeExtendedClaim:
        found = self._per_set.get(resources)
        if found is None:
            requests, mappings = synthesize(self.pod, resources, self.classes)
            claim = parse_resource_claim(claim_object(self.pod, requests))
            found = NodeExtendedClaim(resources, claim, tuple(requests), tuple(mappings))
            self._per_set[resources] = found
        return found


def prefilter(
    pod: Pod, classes: Mapping[str, str], claims_by_owner: Mapping[str, ResourceClaim]
) -> ExtendedResources | None:
    """preFilterExtendedResources: None unless the pod requests a resource a class backs.

    ``classes``: :func:`extended_resource_classes`; ``claims_by_owner``: extended-resource
    claims by their controller's UID.
    """
    requested: dict[str, int] = {}
    for name, value in pod_requests(pod).items():
        if value > 0 and is_dra_extended_resource_name(name):
            requested[name] = ceil(value)
    backed = {name: classes[name] for name in requested if name in classes}
    if not backed:
        return None
    existing = claims_by_owner.get(pod.uid)
    if existing is not None and not is_extended_claim_of(existing, pod):
        existing = None
    return ExtendedResources(pod, requested, backed, existing)


def claims_by_owner(claims: Iterable[ResourceClaim]) -> dict[str, ResourceClaim]:
    """Extended-resource claims by their controller's UID (the first by name when several)."""
    marked = [
        c for c in claims if c.annotations.get(EXTENDED_CLAIM_ANNOTATION) == "true" and c.controller_uid
    ]
    out: dict[str, ResourceClaim] = {}
    for claim in sorted(marked, key=lambda c: (c.namespace, c.name)):
        assert claim.controller_uid is not None
        out.setdefault(claim.controller_uid, claim)
    return out
