"""What kube-scheduler's DynamicResources PostFilter writes when no node fits the pod.

Extenders have no PostFilter hook; the filter verb runs this when it passed no node. One write
at most per call, as upstream:

1. A claim of the pod that Filter found unavailable and that nobody but the pod uses is
   deallocated (``deallocateOrDeletePodClaims``; upstream picks one at random, we take the first
   in the pod's order). A stale extended-resource claim is deleted instead.
2. With DRAWorkloadResourceClaims, when no pod of the pod's PodGroup is scheduled: 1.37 first
   deallocates such a claim reserved for nothing but the group (``deallocatePodGroupClaims``,
   kubernetes#139864); both releases then remove the group's reservation from the first group
   claim reserved for it (``unreservePodGroupClaims``, v1.36.3 dynamicresources.go), so a later
   attempt can deallocate it.

Each write is sent only while the API server (not the cache) shows the pod, and for a group
every member the cache knows, unbound.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from extender.cluster.api import ClusterAPI
from extender.cluster.state import ClusterState, Key
from extender.model.core import Node, Pod
from extender.model.dra import ResourceClaim
from extender.model.scheduling import PodGroup
from extender.scheduling import stale_claims
from extender.scheduling.assumed import AssumedClaims
from extender.scheduling.config import EngineConfig
from extender.scheduling.decision import Snapshot
from extender.scheduling.prefilter import PodClaims, reserved_for_pod

Work = Coroutine[Any, Any, None]


class Bind(Protocol):
    """A bind in flight (``binder.InFlight``)."""

    @property
    def pod_key(self) -> Key: ...


class Binder(Protocol):
    """What PostFilter reads of the write path (``binder.Binder``)."""

    state: ClusterState
    api: ClusterAPI
    config: EngineConfig
    assumed: AssumedClaims
    wall_clock: Callable[[], float]
    fence: Callable[[], str | None]

    @property
    def in_flight(self) -> Mapping[str, Bind]: ...

    def binding_may_land(self, pod: Pod) -> bool: ...


def post_filter(
    binder: Binder, snapshot: Snapshot, pod: Pod, claims: PodClaims, nodes: Sequence[Node]
) -> Work | None:
    """The write upstream's PostFilter would make for ``pod`` (None: none)."""
    if pod.node_name or pod.uid in binder.in_flight or binder.fence() is not None:
        return None
    # A Binding of the pod that went unanswered may still land: its claims stay, unless
    # no node their devices are on exists any more (such a Binding binds the pod to a node
    # that is gone, which the pod garbage collector deletes; nothing can use the devices).
    may_land = binder.binding_may_land(pod)
    stale = claims.extended.existing if claims.extended is not None else None
    if stale is not None:
        # Filter rejected every node for it ("cannot schedule extended resource claim"),
        # before looking at any other claim: upstream PostFilter deletes it.
        if not may_land and not any(r.pod_uid != pod.uid for r in binder.assumed.of(stale.key)):
            return stale_claims.delete_if_unbound(binder.api, pod, stale)
        return None
    unavailable = _unavailable(binder, snapshot, claims, nodes, stranded_only=may_land)
    for claim in unavailable:
        if [e.get("uid") for e in claim.reserved_for] in ([], [pod.uid]):
            return stale_claims.deallocate_if_unbound(binder.api, pod, claim)
    if may_land or not binder.config.features.workload_resource_claims or pod.pod_group is None:
        return None
    group = binder.state.pod_groups.get((pod.namespace, pod.pod_group))
    if group is None:
        return None
    members = _members(binder, pod, group)
    if members is None:
        return None  # upstream: ScheduledPodsCount() > 0, the group still needs its claims
    if binder.config.release.deallocates_pod_group_claims:
        for claim in unavailable:
            if [e.get("uid") for e in claim.reserved_for] == [group.uid]:
                return stale_claims.deallocate_for_group(binder.api, pod, members, claim)
    reserved = _reserved_group_claim(binder, pod, group)
    if reserved is not None:
        return stale_claims.unreserve_group(binder.api, pod, members, reserved, group)
    return None


def _unavailable(
    binder: Binder, snapshot: Snapshot, claims: PodClaims, nodes: Sequence[Node], *, stranded_only: bool
) -> list[ResourceClaim]:
    """The pod's allocated claims Filter found unavailable on some candidate node (its
    nodeSelector, or its binding conditions failed or timed out: upstream unavailableClaims),
    that no write of this extender is settling."""
    now = binder.wall_clock()
    out = []
    for claim in claims.allocated:
        if stranded_only and not _stranded(binder, claim):
            continue
        if all(snapshot.claim_unavailable(claim, n, now) is None for n in nodes):
            continue
        if not binder.assumed.of(claim.key):
            out.append(claim)
    return out


def _stranded(binder: Binder, claim: ResourceClaim) -> bool:
    """The claim is allocated to devices of nodes that no longer exist: no Node the cache
    knows matches its allocation's node selector (None: any node, never stranded)."""
    allocation = claim.allocation
    selector = allocation.node_selector if allocation is not None else None
    if selector is None:
        return False
    return not any(selector.matches(n.name, n.labels) for n in binder.state.nodes.values())


def _members(binder: Binder, pod: Pod, group: PodGroup) -> list[Pod] | None:
    """The group's other pods the cache knows, or None when one of them is scheduled (bound and
    not finished, or being bound here), or a write for the group is not settled yet."""
    if any(r.consumer is not None and r.consumer.get("uid") == group.uid for r in binder.assumed):
        return None
    binding = {entry.pod_key for entry in binder.in_flight.values()}
    members = []
    for other in binder.state.pods.values():
        if other.namespace != pod.namespace or other.pod_group != group.name or other.uid == pod.uid:
            continue
        if (other.node_name and not other.terminal) or other.key in binding:
            return None
        members.append(other)
    return members


def _reserved_group_claim(binder: Binder, pod: Pod, group: PodGroup) -> ResourceClaim | None:
    """unreservePodGroupClaims' pick (v1.36.3): the first of the group's claims that is the
    group's (a template claim it controls, by UID), allocated, and reserved for the pod or its
    group. A claim not created yet or not in the cache ends the walk (upstream: an error)."""
    features = binder.config.features
    for entry in group.claims:
        if entry.resource_claim_name is not None:
            name: str | None = entry.resource_claim_name
        elif entry.name in group.claim_statuses:
            name = group.claim_statuses[entry.name]
            if name is None:
                continue  # the controller decided no claim is needed
        else:
            return None
        claim = binder.state.claims.get((pod.namespace, name or ""))
        if claim is None:
            return None
        if entry.resource_claim_name is None and claim.controller_uid != group.uid:
            continue  # IsForPodGroup: metav1.IsControlledBy
        if claim.allocation is not None and reserved_for_pod(claim, pod, features):
            return claim
    return None
