"""What kube-scheduler's DynamicResources PostFilter releases when no node fits the pod.

Extenders have no PostFilter hook; the filter verb decides this when it passed no node, and the
write room carries it out (:mod:`extender.scheduling.write.post_filter`). One release at most per
call, as upstream (v1.37.0 pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go,
``PostFilter``):

1. A claim of the pod that Filter found unavailable and that nobody but the pod uses is
   deallocated (``deallocateOrDeletePodClaims``; upstream picks one at random, we take the first
   in the pod's order). A stale extended-resource claim is deleted instead.
2. Beyond upstream: a claim a failed bind left behind. When the pod still has a claim to
   allocate, one of its allocated claims reserved for the pod alone was written by a bind that
   did not finish (all of a bind's claims are written before its Binding): the in-tree plugin's
   own Unreserve would have removed that reservation, but a replica the store fence refused
   cannot (issue 50: a deposed leader stored claim 1 of a two-claim pod, claim 2 was refused,
   and claim 1 held its device for the unbound pod). Upstream's rule 1 reaches such a claim only
   when it is unavailable on some candidate node; with its node the only candidate (or where the
   pod fits nowhere else either) it would hold the device until the pod is deleted. It is
   deallocated, as rule 1 deallocates, at the pod's first attempt after the failed bind.
3. With DRAWorkloadResourceClaims, when no pod of the pod's PodGroup is scheduled: 1.37 first
   deallocates such a claim reserved for nothing but the group (``deallocatePodGroupClaims``,
   kubernetes#139864); both releases then remove the group's reservation from the first group
   claim reserved for it (``unreservePodGroupClaims``, v1.36.3 dynamicresources.go), so a later
   attempt can deallocate it.

What this extender has in flight for the pod (:class:`InFlight`) comes from the tracker, read
before deciding. Pure: a snapshot and that record in, a :class:`Release` out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from extender.cluster.state import ClusterState, Key
from extender.model.core import Node, Pod
from extender.model.dra import ResourceClaim
from extender.model.scheduling import PodGroup
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.prefilter import PodClaims, reserved_for_pod
from extender.scheduling.decide.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class InFlight:
    """What this extender has in flight for one pod, as the tracker shows it."""

    #: Its bind is being carried out here.
    binding: bool = False
    #: A Binding of it went unanswered recently and could still land: its claims stay, unless no
    #: node their devices are on exists any more.
    may_land: bool = False
    #: The pod's claims (allocated, and its existing extended-resource claim) with a write of
    #: this extender the cache does not show yet.
    settling: frozenset[Key] = frozenset()
    #: Of those, claims with such a write for another pod.
    settling_for_others: frozenset[Key] = frozenset()
    #: A pod of its PodGroup may be scheduled as far as this extender knows (bound, being bound,
    #: passed a filter recently, or a group write not settled).
    group_busy: bool = False


class Kind(Enum):
    DELETE_EXTENDED = "delete the stale extended-resource claim"
    DEALLOCATE = "deallocate the pod's unavailable claim"
    DEALLOCATE_LEFT_BEHIND = "deallocate the claim a failed bind left reserved for the pod"
    DEALLOCATE_FOR_GROUP = "deallocate the group's unavailable claim"
    UNRESERVE_GROUP = "remove the group's reservation"


#: The releases of the pod's own claims (the others are its PodGroup's).
POD_KINDS = (Kind.DELETE_EXTENDED, Kind.DEALLOCATE, Kind.DEALLOCATE_LEFT_BEHIND)


@dataclass(frozen=True, slots=True)
class Release:
    """PostFilter's one write: what to do to which claims (for a group: in order, the first that
    takes it)."""

    kind: Kind
    claims: tuple[ResourceClaim, ...]
    group: PodGroup | None = None

    def __post_init__(self) -> None:
        if not self.claims:
            raise ValueError(f"{self.kind.value}: no claim")
        if (self.group is None) != (self.kind in POD_KINDS):
            raise ValueError(f"{self.kind.value}: a pod group exactly when the release is the group's")


def release(
    state: ClusterState,
    config: EngineConfig,
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    nodes: Sequence[Node],
    in_flight: InFlight,
    *,
    now: float,
) -> Release | None:
    """The release upstream's PostFilter would make for ``pod`` (None: none). ``now``: seconds
    since the epoch (binding timeouts are counted from the claims' allocation timestamps)."""
    if pod.node_name or in_flight.binding:
        return None
    stale = claims.extended.existing if claims.extended is not None else None
    if stale is not None:
        # Filter rejected every node for it ("cannot schedule extended resource claim"),
        # before looking at any other claim: upstream PostFilter deletes it.
        if not in_flight.may_land and stale.key not in in_flight.settling_for_others:
            return Release(Kind.DELETE_EXTENDED, (stale,))
        return None
    unavailable = _unavailable(state, snapshot, claims, nodes, now, in_flight)
    for claim in unavailable:
        if [e.get("uid") for e in claim.reserved_for] in ([], [pod.uid]):
            return Release(Kind.DEALLOCATE, (claim,))
    left_behind = _left_behind(pod, claims, in_flight)
    if left_behind is not None:
        return Release(Kind.DEALLOCATE_LEFT_BEHIND, (left_behind,))
    if in_flight.may_land or not config.features.workload_resource_claims or pod.pod_group is None:
        return None
    group = state.pod_groups.get((pod.namespace, pod.pod_group))
    if group is None or in_flight.group_busy:
        return None  # upstream: ScheduledPodsCount() > 0, the group still needs its claims
    if config.release.deallocates_pod_group_claims:
        for claim in unavailable:
            if [e.get("uid") for e in claim.reserved_for] == [group.uid]:
                return Release(Kind.DEALLOCATE_FOR_GROUP, (claim,), group)
    reserved = _reserved_group_claims(state, config, pod, group)
    return Release(Kind.UNRESERVE_GROUP, tuple(reserved), group) if reserved else None


def _unavailable(
    state: ClusterState,
    snapshot: Snapshot,
    claims: PodClaims,
    nodes: Sequence[Node],
    now: float,
    in_flight: InFlight,
) -> list[ResourceClaim]:
    """The pod's allocated claims Filter found unavailable on some candidate node (its
    nodeSelector, or its binding conditions failed or timed out: upstream unavailableClaims),
    that no write of this extender is settling (with a Binding that may land: only those
    stranded on nodes that are gone)."""
    out = []
    for claim in claims.allocated:
        if in_flight.may_land and not _stranded(state, claim):
            continue
        if all(snapshot.claim_unavailable(claim, n, now) is None for n in nodes):
            continue
        if claim.key not in in_flight.settling:
            out.append(claim)
    return out


def _left_behind(pod: Pod, claims: PodClaims, in_flight: InFlight) -> ResourceClaim | None:
    """The first of the pod's allocated claims reserved for the pod alone that a bind left
    behind: the pod still has a claim to allocate (a finished bind allocated them all), no
    Binding of ours may land, and no write of ours to the claim is settling. A claim reserved
    for the pod's PodGroup is the group's (rule 3)."""
    if not claims.to_allocate or in_flight.may_land:
        return None
    for claim in claims.allocated:
        if claim.key in claims.consumers or claim.key in in_flight.settling:
            continue
        if [e.get("uid") for e in claim.reserved_for] == [pod.uid]:
            return claim
    return None


def _stranded(state: ClusterState, claim: ResourceClaim) -> bool:
    """The claim is allocated to devices of nodes that no longer exist: no Node the cache
    knows matches its allocation's node selector (None: any node, never stranded)."""
    allocation = claim.allocation
    selector = allocation.node_selector if allocation is not None else None
    if selector is None:
        return False
    return not any(selector.matches(n.name, n.labels) for n in state.nodes.values())


def _reserved_group_claims(
    state: ClusterState, config: EngineConfig, pod: Pod, group: PodGroup
) -> list[ResourceClaim]:
    """unreservePodGroupClaims' candidates (v1.36.3), in the group's order: its claims that are
    the group's (a template claim it controls, by UID), allocated, and reserved for the pod or its
    group; the patch goes to the first that takes it. A claim not created yet or not in the cache
    ends the walk (upstream: an error)."""
    features = config.features
    out = []
    for entry in group.claims:
        if entry.resource_claim_name is not None:
            name: str | None = entry.resource_claim_name
        elif entry.name in group.claim_statuses:
            name = group.claim_statuses[entry.name]
            if name is None:
                continue  # the controller decided no claim is needed
        else:
            break
        claim = state.claims.get((pod.namespace, name or ""))
        if claim is None:
            break
        if entry.resource_claim_name is None and claim.controller_uid != group.uid:
            continue  # IsForPodGroup: metav1.IsControlledBy
        if claim.allocation is not None and reserved_for_pod(claim, pod, features):
            out.append(claim)
    return out
