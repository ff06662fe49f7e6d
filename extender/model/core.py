"""core/v1 records: Node and Pod, as far as DRA scheduling reads them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from extender.model.errors import ObjectError
from extender.model.labels import Labels
from extender.model.node_allocatable import ClaimResources, parse_claim_resources
from extender.model.reader import Reader
from extender.model.timestamps import parse_timestamp
from extender.quantity import Quantity

#: The node-declared feature (``status.declaredFeatures``) a kubelet lists when it can skip
#: NodePrepareResources/NodeUnprepareResources for devices whose slices say so.
OPTIONAL_NODE_OPERATIONS = "DRAOptionalNodeOperations"


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: dict[str, str]
    #: status.allocatable (extended resources served by device plugins show up here).
    allocatable: dict[str, str]
    raw: dict[str, Any]
    #: status.declaredFeatures: what the node's kubelet supports (KEP-5328), e.g.
    #: ``DRAOptionalNodeOperations``.
    declared_features: frozenset[str] = frozenset()

    @property
    def optional_node_operations(self) -> bool:
        return OPTIONAL_NODE_OPERATIONS in self.declared_features


def parse_node(obj: dict[str, Any]) -> Node:
    meta = Reader(obj.get("metadata"), "metadata")
    status = Reader(obj.get("status"), "status")
    name = meta.string("name")
    if not name:
        raise ObjectError("metadata.name is required")
    return Node(
        name=name,
        labels=Labels({str(k): str(v) for k, v in meta.mapping("labels").items()}),
        allocatable={str(k): str(v) for k, v in status.mapping("allocatable").items()},
        raw=obj,
        declared_features=frozenset(status.strings("declaredFeatures")),
    )


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    """One ``spec.resourceClaims`` entry."""

    name: str
    resource_claim_name: str | None
    resource_claim_template_name: str | None


@dataclass(frozen=True, slots=True)
class Container:
    """A container's resource requests, as scheduling reads them (``initContainers`` first)."""

    name: str
    #: ``resources.requests``, defaulted from ``resources.limits`` as the API server does.
    requests: dict[str, Quantity]
    init: bool = False
    #: An init container with ``restartPolicy: Always`` (a sidecar: it runs alongside the others).
    sidecar: bool = False
    #: ``resources.claims[].name``: the pod's claim entries this container uses.
    claims: tuple[str, ...] = ()
    #: What an in-place resize makes of ``requests`` (InPlacePodVerticalScaling: the larger of
    #: spec, actuated and allocated; None: its status says nothing, ``requests`` hold).
    effective: dict[str, Quantity] | None = None
    #: ``resources.limits``.
    limits: dict[str, Quantity] = field(default_factory=dict)

    @property
    def long_lived(self) -> bool:
        return not self.init or self.sidecar


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    node_name: str
    scheduler_name: str
    claims: tuple[PodClaimRef, ...]
    #: status.resourceClaimStatuses: entry name -> generated claim name (None: no claim needed).
    claim_statuses: dict[str, str | None]
    raw: dict[str, Any]
    #: ``initContainers`` then ``containers`` (the order extended-resource requests are named in).
    containers: tuple[Container, ...] = ()
    #: ``spec.overhead`` (RuntimeClass), part of the pod's requests.
    overhead: dict[str, Quantity] = field(default_factory=dict)
    #: ``spec.priority`` (set from the PriorityClass at admission; 0 without one).
    priority: int = 0
    #: ``spec.preemptionPolicy``: ``PreemptLowerPriority`` (the default) or ``Never``.
    preemption_policy: str = "PreemptLowerPriority"
    #: ``metadata.labels`` (PodDisruptionBudgets select pods by them).
    labels: dict[str, str] = field(default_factory=dict)
    #: ``status.nominatedNodeName``: where an earlier preemption made room for the pod.
    nominated_node_name: str = ""
    #: ``metadata.deletionTimestamp`` is set: the pod is terminating.
    deleting: bool = False
    #: ``status.phase`` is Succeeded or Failed.
    terminal: bool = False
    #: ``status.startTime`` in seconds since the epoch (None: not started).
    start_time: float | None = None
    #: ``spec.schedulingGroup.podGroupName``: the PodGroup the pod belongs to (None: none).
    pod_group: str | None = None
    #: ``spec.resources.requests`` (PodLevelResources), and what an in-place resize makes of
    #: them (None: the spec's hold).
    pod_requests: dict[str, Quantity] = field(default_factory=dict)
    pod_effective: dict[str, Quantity] | None = None
    #: ``spec.resources.limits`` (PodLevelResources).
    pod_limits: dict[str, Quantity] = field(default_factory=dict)
    #: ``status.nodeAllocatableResourceClaimStatuses`` (DRANodeAllocatableResources).
    node_allocatable: tuple[ClaimResources, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


def claim_refs(spec: Reader) -> tuple[PodClaimRef, ...]:
    """``spec.resourceClaims`` of a Pod or a PodGroup (the same three fields)."""
    return tuple(
        PodClaimRef(
            c.string("name"), c.opt_string("resourceClaimName"), c.opt_string("resourceClaimTemplateName")
        )
        for c in spec.readers("resourceClaims")
    )


def claim_statuses(status: Reader) -> dict[str, str | None]:
    """``status.resourceClaimStatuses`` of a Pod or a PodGroup: entry name -> generated claim."""
    return {
        s.string("name"): s.opt_string("resourceClaimName") for s in status.readers("resourceClaimStatuses")
    }


def _same_spec(spec: dict[str, Any], previous: Pod | None) -> bool:
    """``spec`` is ``previous``'s but for ``nodeName`` (what a Binding changes), and nothing
    ``previous`` read from its spec depended on its status (no container was resized)."""
    if previous is None:
        return False
    before = previous.raw.get("spec")
    if before is None:
        before = {}
    if not isinstance(before, dict) or any(c.effective is not None for c in previous.containers):
        return False
    return {**spec, "nodeName": None} == {**before, "nodeName": None}


def parse_pod(obj: dict[str, Any], previous: Pod | None = None) -> Pod:
    """``previous``: a record :func:`parse_pod` made of the same pod before (the cache's). When
    the spec is the same but for ``nodeName`` (a watch's update: the Binding, a status change),
    what the record reads from it is reused, not read again: equal input, equal output."""
    meta = Reader(obj.get("metadata"), "metadata")
    spec = Reader(obj.get("spec"), "spec")
    status = Reader(obj.get("status"), "status")
    statuses = claim_statuses(status)
    infeasible = any(
        c.string("type") == "PodResizePending" and c.string("reason") == "Infeasible"
        for c in status.readers("conditions")
    )
    resized = {
        s.string("name"): s
        for key in ("initContainerStatuses", "containerStatuses")
        for s in status.readers(key)
        if s.has("resources")
    }
    pod_requests: dict[str, Quantity]
    if not resized and _same_spec(spec.data, previous):
        assert previous is not None
        claims, containers, overhead = previous.claims, previous.containers, previous.overhead
        scheduler_name, priority = previous.scheduler_name, previous.priority
        preemption_policy, pod_group = previous.preemption_policy, previous.pod_group
        pod_requests, pod_limits = previous.pod_requests, previous.pod_limits
    else:
        claims = claim_refs(spec)
        inits = [_container(c, True, resized, infeasible) for c in spec.readers("initContainers")]
        containers = (
            *inits,
            *(_container(c, False, resized, infeasible) for c in spec.readers("containers")),
        )
        overhead = spec.quantities("overhead")
        scheduler_name = spec.string("schedulerName", "default-scheduler")
        priority = spec.integer("priority")
        preemption_policy = spec.string("preemptionPolicy", "PreemptLowerPriority")
        pod_group = spec.sub("schedulingGroup").opt_string("podGroupName")
        pod_requests = spec.sub("resources").quantities("requests")
        pod_limits = spec.sub("resources").quantities("limits")
    return Pod(
        namespace=meta.string("namespace", "default"),
        name=meta.string("name"),
        uid=meta.string("uid"),
        node_name=spec.string("nodeName"),
        scheduler_name=scheduler_name,
        claims=claims,
        claim_statuses=statuses,
        raw=obj,
        containers=containers,
        overhead=overhead,
        priority=priority,
        preemption_policy=preemption_policy,
        labels={str(k): str(v) for k, v in meta.mapping("labels").items()},
        nominated_node_name=status.string("nominatedNodeName"),
        deleting=meta.has("deletionTimestamp"),
        terminal=status.string("phase") in ("Succeeded", "Failed"),
        start_time=_timestamp(status.opt_string("startTime")),
        pod_group=pod_group,
        pod_requests=pod_requests,
        pod_effective=_effective(pod_requests, status, infeasible) if status.has("resources") else None,
        pod_limits=pod_limits,
        node_allocatable=parse_claim_resources(status),
    )


def _timestamp(text: str | None) -> float | None:
    return parse_timestamp(text) if text else None


def _container(reader: Reader, init: bool, resized: dict[str, Reader], infeasible: bool) -> Container:
    resources = reader.sub("resources")
    requests = resources.quantities("requests")
    limits = resources.quantities("limits")
    for name, limit in limits.items():
        requests.setdefault(name, limit)  # SetDefaults_Container: requests default to limits
    name = reader.string("name")
    sidecar = init and reader.string("restartPolicy") == "Always"
    status = resized.get(name)
    return Container(
        name=name,
        requests=requests,
        init=init,
        sidecar=sidecar,
        claims=tuple(c.string("name") for c in resources.readers("claims")),
        # Of init containers only sidecars have their resizes counted (AggregateContainerRequests).
        effective=_effective(requests, status, infeasible) if status and (sidecar or not init) else None,
        limits=limits,
    )


def _effective(spec: dict[str, Quantity], status: Reader, infeasible: bool) -> dict[str, Quantity]:
    """resourcehelper determineEffectiveRequests (v1.36.3): the largest of spec, actuated
    (``resources.requests``) and allocated (``allocatedResources``) per resource; without the
    spec when the resize is infeasible."""
    out: dict[str, Quantity] = {}
    for source in ([] if infeasible else [spec]) + [
        status.sub("resources").quantities("requests"),
        status.quantities("allocatedResources"),
    ]:
        for name, q in source.items():
            if name not in out or q.compare(out[name]) > 0:
                out[name] = q
    return out
