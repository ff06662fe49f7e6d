"""Devices a preemption made room for stay with the pod that preempted (kube-scheduler's
nominated pods, for devices).

After a preemption kube-scheduler sets the preemptor's ``status.nominatedNodeName`` and deletes
the victims; when their claims are released, the freed devices must go to the preemptor, not to
whichever pod is filtered first. kube-scheduler keeps CPU and memory for nominated pods this way
(``RunFilterPluginsWithNominatedPods`` adds every pod nominated to the node with at least the
filtered pod's priority before running the filters). The in-tree DynamicResources plugin has no
``PreFilterExtensions`` (it returns nil), so in-tree devices are not kept: there is no
device-aware preemption in-tree through 1.37. With device preemption on, the extender keeps them.

What a nominated pod keeps is decided by allocating its claims on the node as if its victims
were gone already: the victims the preempt verb named for it on that node (if this replica
answered that preemption) and the lower-priority pods there that are terminating. Its devices
then count as taken for every pod of lower or equal priority. Pure: a snapshot in, decisions out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from extender.cluster.state import ClusterState, Key
from extender.model.core import Node, Pod
from extender.model.dra import Allocation, ResourceClaim, parse_allocation
from extender.model.reader import Reader
from extender.scheduling import extended as er
from extender.scheduling.decision import DEFAULT_NODE_TIMEOUT, NodeDecision, Snapshot
from extender.scheduling.prefilter import PodClaims

#: (preemptor UID, node name) -> UIDs of the victims the preempt verb named for it there.
VictimsOf = Callable[[str, str], frozenset[str]]


def no_victims(uid: str, node: str) -> frozenset[str]:
    return frozenset()


def importance(pod: Pod) -> tuple[int, float, str, str]:
    """Sort key, most important first: higher priority, then earlier start (upstream's
    ``MoreImportantPod``: a pod not started counts as starting now, the latest), then name."""
    started = pod.start_time if pod.start_time is not None else float("inf")
    return (-pod.priority, started, pod.namespace, pod.name)


def nominated_here(state: ClusterState, pod: Pod, node_name: str) -> list[Pod]:
    """Pods nominated to ``node_name`` that ``pod`` must leave room for: not bound, not
    terminating, not ``pod`` itself, priority at least ``pod``'s (upstream ``addGENominatedPods``),
    most important first."""
    waiting = state.nominated.get(node_name)
    if not waiting:
        return []
    return sorted(
        (
            q
            for q in waiting.values()
            if q.uid != pod.uid and q.priority >= pod.priority and not q.deleting and not q.node_name
        ),
        key=importance,
    )


def held_claims(claims: Mapping[Key, ResourceClaim], pod: Pod) -> list[ResourceClaim]:
    """The claims reserved for ``pod``: those its ``spec.resourceClaims`` name and its
    extended-resource claim."""
    names = [ref.resource_claim_name or pod.claim_statuses.get(ref.name) for ref in pod.claims]
    status = pod.raw.get("status") if isinstance(pod.raw.get("status"), dict) else None
    extended = (status or {}).get("extendedResourceClaimStatus")
    recorded = extended.get("resourceClaimName") if isinstance(extended, dict) else None
    if isinstance(recorded, str) and recorded:
        names.append(recorded)
    elif er.may_request(pod):
        names.append(er.claim_name(pod))  # created by a bind whose status patch did not land
    out: list[ResourceClaim] = []
    for name in dict.fromkeys(n for n in names if n):
        claim = claims.get((pod.namespace, name))
        if claim is not None and claim.reserved_for_uid(pod.uid):
            out.append(claim)
    return out


def freed_allocations(
    claims: Mapping[Key, ResourceClaim], pods: Iterable[Pod], evicted: frozenset[str] | set[str]
) -> list[Allocation]:
    """The allocations that evicting ``evicted`` (UIDs, ``pods`` among them) would release: the
    claims those pods hold that are reserved for nobody else. The resourceclaim controller
    deallocates a claim when its last reservation goes, so a claim shared with a pod that stays
    keeps its devices."""
    out: list[Allocation] = []
    seen: set[Key] = set()
    for pod in pods:
        for claim in held_claims(claims, pod):
            if claim.key in seen or claim.allocation is None:
                continue
            seen.add(claim.key)
            if all(entry.get("uid") in evicted for entry in claim.reserved_for):
                out.append(claim.allocation)
    return out


def reservations(
    snapshot: Snapshot,
    pod: Pod,
    node: Node,
    *,
    victims_of: VictimsOf,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> list[Allocation]:
    """The devices the pods nominated to ``node`` ahead of ``pod`` keep there, most important
    pod first (each allocated with the devices of those before it taken)."""
    held: list[Allocation] = []
    state = snapshot.state
    for waiting in nominated_here(state, pod, node.name):
        claims = snapshot.claims_of(waiting)
        if claims.error is not None or claims.reason is not None or not claims.allocates:
            continue  # nothing to keep: it cannot be allocated anyway, or it holds its devices already
        named = victims_of(waiting.uid, node.name)
        gone = [
            p
            for p in state.pods_by_node.get(node.name, {}).values()
            if p.uid in named or (p.deleting and p.priority < waiting.priority)
        ]
        freed = freed_allocations(snapshot.claims, gone, {p.uid for p in gone})
        with snapshot.what_if(freed=freed, held=held):
            decision = snapshot.decide(claims, node, timeout=timeout)
        if decision.fits:
            held.extend(parse_allocation(Reader(a, "allocation")) for a in decision.allocations.values())
    return held


def decide(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    node: Node,
    *,
    victims_of: VictimsOf | None,
    freed: Sequence[Allocation] = (),
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> NodeDecision:
    """:meth:`Snapshot.decide` with the devices of ``freed`` free and those that pods nominated
    to the node ahead of ``pod`` keep taken (``victims_of`` None: nominations are ignored, as
    the in-tree plugin does)."""
    held = (
        reservations(snapshot, pod, node, victims_of=victims_of, timeout=timeout)
        if victims_of is not None and claims.allocates
        else []
    )
    if not held and not freed:
        return snapshot.decide(claims, node, timeout=timeout)
    with snapshot.what_if(freed=freed, held=held):
        decision = snapshot.decide(claims, node, timeout=timeout)
    kept = bool(held) and not decision.fits and bool(decision.reason)
    if kept and _fits_unheld(snapshot, claims, node, freed, timeout):
        waiting = ", ".join(f"{q.namespace}/{q.name}" for q in nominated_here(snapshot.state, pod, node.name))
        decision.reason = (
            f"{decision.reason} (devices here are kept for {waiting}, nominated to this node by a preemption)"
        )
    return decision


def _fits_unheld(
    snapshot: Snapshot, claims: PodClaims, node: Node, freed: Sequence[Allocation], timeout: float | None
) -> bool:
    with snapshot.what_if(freed=freed):
        return snapshot.decide(claims, node, timeout=timeout).fits
