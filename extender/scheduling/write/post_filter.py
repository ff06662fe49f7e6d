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

from collections.abc import Coroutine, Sequence
from typing import Any

from extender.cluster.api import ClusterAPI
from extender.cluster.state import ClusterState
from extender.model.core import Node, Pod
from extender.model.dra import ResourceClaim
from extender.model.scheduling import PodGroup
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.prefilter import PodClaims, reserved_for_pod
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.inflight.tracker import Tracker
from extender.scheduling.write import stale_claims

Work = Coroutine[Any, Any, None]


def post_filter(
    api: ClusterAPI,
    state: ClusterState,
    config: EngineConfig,
    tracker: Tracker,
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    nodes: Sequence[Node],
    *,
    now: float,
) -> Work | None:
    """The write upstream's PostFilter would make for ``pod`` (None: none). ``now``: seconds
    since the epoch (binding timeouts are counted from the claims' allocation timestamps)."""
    if pod.node_name or pod.uid in tracker.binds:
        return None
    # A Binding of the pod that went unanswered may still land: its claims stay, unless
    # no node their devices are on exists any more (such a Binding binds the pod to a node
    # that is gone, which the pod garbage collector deletes; nothing can use the devices).
    may_land = tracker.binding_may_land(pod)
    stale = claims.extended.existing if claims.extended is not None else None
    if stale is not None:
        # Filter rejected every node for it ("cannot schedule extended resource claim"),
        # before looking at any other claim: upstream PostFilter deletes it.
        if not may_land and not any(r.pod_uid != pod.uid for r in tracker.assumed.of(stale.key)):
            return stale_claims.delete_if_unbound(api, pod, stale)
        return None
    unavailable = _unavailable(state, tracker, snapshot, claims, nodes, now, stranded_only=may_land)
    for claim in unavailable:
        if [e.get("uid") for e in claim.reserved_for] in ([], [pod.uid]):
            return stale_claims.deallocate_if_unbound(api, pod, claim)
    if may_land or not config.features.workload_resource_claims or pod.pod_group is None:
        return None
    group = state.pod_groups.get((pod.namespace, pod.pod_group))
    if group is None or group_busy(state, tracker, pod, group):
        return None  # upstream: ScheduledPodsCount() > 0, the group still needs its claims

    def busy() -> bool:  # asked again once the API server has answered
        return group_busy(state, tracker, pod, group)

    if config.release.deallocates_pod_group_claims:
        for claim in unavailable:
            if [e.get("uid") for e in claim.reserved_for] == [group.uid]:
                return stale_claims.deallocate_for_group(api, pod, group, claim, busy)
    reserved = _reserved_group_claims(state, config, pod, group)
    if reserved:
        return stale_claims.unreserve_group(api, pod, group, reserved, busy)
    return None


def _unavailable(
    state: ClusterState,
    tracker: Tracker,
    snapshot: Snapshot,
    claims: PodClaims,
    nodes: Sequence[Node],
    now: float,
    *,
    stranded_only: bool,
) -> list[ResourceClaim]:
    """The pod's allocated claims Filter found unavailable on some candidate node (its
    nodeSelector, or its binding conditions failed or timed out: upstream unavailableClaims),
    that no write of this extender is settling."""
    out = []
    for claim in claims.allocated:
        if stranded_only and not _stranded(state, claim):
            continue
        if all(snapshot.claim_unavailable(claim, n, now) is None for n in nodes):
            continue
        if not tracker.assumed.of(claim.key):
            out.append(claim)
    return out


def _stranded(state: ClusterState, claim: ResourceClaim) -> bool:
    """The claim is allocated to devices of nodes that no longer exist: no Node the cache
    knows matches its allocation's node selector (None: any node, never stranded)."""
    allocation = claim.allocation
    selector = allocation.node_selector if allocation is not None else None
    if selector is None:
        return False
    return not any(selector.matches(n.name, n.labels) for n in state.nodes.values())


def group_busy(state: ClusterState, tracker: Tracker, pod: Pod, group: PodGroup) -> bool:
    """A pod of the group may be scheduled as far as this extender knows: bound in the cache
    (and not finished), being bound here, passed a filter recently, or a claim write for the
    group is not settled. The API server is asked too before anything is written."""
    if tracker.groups.recent(pod.namespace, group.name, tracker.clock()):
        return True
    if any(r.consumer is not None and r.consumer.get("uid") == group.uid for r in tracker.assumed):
        return True
    binding = {entry.pod_key for entry in tracker.binds.values()}
    for other in state.pods.values():
        if other.namespace != pod.namespace or other.pod_group != group.name or other.uid == pod.uid:
            continue
        if (other.node_name and not other.terminal) or other.key in binding:
            return True
    return False


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
