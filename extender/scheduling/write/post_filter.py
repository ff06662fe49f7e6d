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
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.decision import Snapshot
from extender.scheduling.decide.prefilter import PodClaims, reserved_for_pod
from extender.scheduling.inflight.assumed import AssumedClaims
from extender.scheduling.write import stale_claims

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
    clock: Callable[[], float]
    fence: Callable[[], str | None]
    group_activity: GroupActivity

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
    if group is None or group_busy(binder, pod, group):
        return None  # upstream: ScheduledPodsCount() > 0, the group still needs its claims

    def busy() -> bool:  # asked again once the API server has answered
        return group_busy(binder, pod, group)

    if binder.config.release.deallocates_pod_group_claims:
        for claim in unavailable:
            if [e.get("uid") for e in claim.reserved_for] == [group.uid]:
                return stale_claims.deallocate_for_group(binder.api, pod, group, claim, busy)
    reserved = _reserved_group_claims(binder, pod, group)
    if reserved:
        return stale_claims.unreserve_group(binder.api, pod, group, reserved, busy)
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


#: Seconds a group member that passed a filter counts as scheduled: kube-scheduler may have
#: assumed it (Reserve, Permit, other plugins' PreBind) before its bind reaches the extender.
PASSED_FILTER_GRACE = 30.0


class GroupActivity:
    """When a pod of each PodGroup last passed a filter here, by (namespace, group)."""

    def __init__(self) -> None:
        self._passed: dict[Key, float] = {}

    def passed(self, namespace: str, group: str, now: float) -> None:
        self._passed[(namespace, group)] = now
        if len(self._passed) > 10_000:  # forget the oldest half
            for key, _ in sorted(self._passed.items(), key=lambda kv: kv[1])[:5_000]:
                del self._passed[key]

    def recent(self, namespace: str, group: str, now: float) -> bool:
        since = self._passed.get((namespace, group))
        return since is not None and now - since < PASSED_FILTER_GRACE


def group_busy(binder: Binder, pod: Pod, group: PodGroup) -> bool:
    """A pod of the group may be scheduled as far as this extender knows: bound in the cache
    (and not finished), being bound here, passed a filter recently, or a claim write for the
    group is not settled. The API server is asked too before anything is written."""
    if binder.group_activity.recent(pod.namespace, group.name, binder.clock()):
        return True
    if any(r.consumer is not None and r.consumer.get("uid") == group.uid for r in binder.assumed):
        return True
    binding = {entry.pod_key for entry in binder.in_flight.values()}
    for other in binder.state.pods.values():
        if other.namespace != pod.namespace or other.pod_group != group.name or other.uid == pod.uid:
            continue
        if (other.node_name and not other.terminal) or other.key in binding:
            return True
    return False


def _reserved_group_claims(binder: Binder, pod: Pod, group: PodGroup) -> list[ResourceClaim]:
    """unreservePodGroupClaims' candidates (v1.36.3), in the group's order: its claims that are
    the group's (a template claim it controls, by UID), allocated, and reserved for the pod or its
    group; the patch goes to the first that takes it. A claim not created yet or not in the cache
    ends the walk (upstream: an error)."""
    features = binder.config.features
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
        claim = binder.state.claims.get((pod.namespace, name or ""))
        if claim is None:
            break
        if entry.resource_claim_name is None and claim.controller_uid != group.uid:
            continue  # IsForPodGroup: metav1.IsControlledBy
        if claim.allocation is not None and reserved_for_pod(claim, pod, features):
            out.append(claim)
    return out
