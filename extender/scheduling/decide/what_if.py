"""A node judged with some devices taken and some freed: what nominations change there.

kube-scheduler's framework adds the pods nominated to a node with at least the filtered pod's
priority before running the filters (``RunFilterPluginsWithNominatedPods``, v1.37.0
pkg/scheduler/framework/runtime/framework.go), so their CPU and memory count as taken. For
devices the extender does the same with device preemption on: the preempt room
(:mod:`extender.scheduling.preempt.nominated`) says who waits on a node and what a preemption
is releasing there, as a :class:`NodeAdjustment`; this module allocates with it.

* The devices the pods nominated ahead keep are taken: each waiting pod's claims are allocated
  in turn, most important first, with the devices of those before it taken (:func:`kept`).
* The devices of the claims a pod's own preemption is releasing (its victims', not released
  yet) are free for that pod on its nominated node, and only when it does not fit without them
  (:func:`decide_with_release`): the bind writes once they are released.

Pure: a snapshot and an adjustment in, decisions out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.cluster.state import Key
from extender.model.core import Node, Pod
from extender.model.dra import Allocation, ResourceClaim, parse_allocation
from extender.model.reader import Reader
from extender.scheduling.decide import extended as er
from extender.scheduling.decide.decision import DEFAULT_NODE_TIMEOUT, Assessment, NodeDecision
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Waiting:
    """A pod nominated to the node ahead of the one judged."""

    pod: Pod
    #: The pods its own preemption is evicting on the node: what they hold is free for it.
    gone: tuple[Pod, ...] = ()
    #: Kept by make room's mover (its pods are moved off the node for it), not by a nomination.
    made_room: bool = False
    #: Claims being released for it whatever the cache shows of their pods (make room's).
    freeing: tuple[ResourceClaim, ...] = ()

    @property
    def name(self) -> str:
        """``namespace/name``, for the reason a node is refused."""
        return f"{self.pod.namespace}/{self.pod.name}"


@dataclass(frozen=True, slots=True)
class NodeAdjustment:
    """What nominations change on one node for one pod."""

    #: Pods nominated to the node ahead of it, most important first: their devices are taken.
    waiting: tuple[Waiting, ...] = ()
    #: Claims the pod's own preemption is releasing on the node (its nominated node): free for
    #: it when it does not fit without them.
    releasing: tuple[ResourceClaim, ...] = ()

    def freed(self) -> list[Allocation]:
        return [c.allocation for c in self.releasing if c.allocation is not None]


def kept_for(waiting: Sequence[Waiting]) -> str:
    """Why a node's devices are kept for the pods in ``waiting`` (a node's reason)."""
    nominated = ", ".join(w.name for w in waiting if not w.made_room)
    made_room = ", ".join(w.name for w in waiting if w.made_room)
    parts = []
    if nominated:
        parts.append(f"devices here are kept for {nominated}, nominated to this node by a preemption")
    if made_room:
        parts.append(f"devices here are kept for {made_room}, for whom pods are being moved off this node")
    return "; ".join(parts)


#: Nothing changes: the node is judged as the snapshot shows it.
UNCHANGED = NodeAdjustment()


def kept(
    snapshot: Snapshot,
    node: Node,
    waiting: Sequence[Waiting],
    *,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> list[Allocation]:
    """The devices the pods in ``waiting`` keep on ``node``, each allocated with the devices of
    those before it taken and those its own preemption frees free."""
    held: list[Allocation] = []
    for waiting_pod in waiting:
        claims = snapshot.claims_of(waiting_pod.pod)
        if claims.error is not None or claims.reason is not None or not claims.allocates:
            continue  # nothing to keep: it cannot be allocated anyway, or it holds its devices already
        gone, freeing = waiting_pod.gone, waiting_pod.freeing
        keep = {c.key for c in claims.ordered}
        freed = [c.allocation for c in freeing if c.allocation is not None and c.key not in keep]
        keep.update(c.key for c in freeing)
        freed += freed_allocations(snapshot.claims, gone, {p.uid for p in gone}, keep)
        with snapshot.what_if(freed=freed, held=held):
            decision = snapshot.decide(claims, node, timeout=timeout)
        if decision.fits:
            held.extend(parse_allocation(Reader(a, "allocation")) for a in decision.allocations.values())
    return held


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
    claims: Mapping[Key, ResourceClaim],
    pods: Iterable[Pod],
    evicted: Collection[str],
    keep: Collection[Key] = (),
    held: Mapping[str, Sequence[ResourceClaim]] | None = None,
) -> list[Allocation]:
    """The allocations that evicting ``evicted`` (UIDs, ``pods`` among them) would release: the
    claims those pods hold that are reserved for nobody else. The resourceclaim controller
    deallocates a claim when its last reservation goes, so a claim shared with a pod that stays
    keeps its devices. ``keep``: claims that stay whoever goes (the pod that asks uses them: it
    is not in their ``reservedFor`` before its bind, and evicting the others would deallocate
    them under it). ``held``: each pod's claims (UID -> claims) where the caller found them
    already."""
    out: list[Allocation] = []
    seen: set[Key] = set(keep)
    for pod in pods:
        for claim in held_claims(claims, pod) if held is None else held[pod.uid]:
            if claim.key in seen or claim.allocation is None:
                continue
            seen.add(claim.key)
            if all(entry.get("uid") in evicted for entry in claim.reserved_for):
                out.append(claim.allocation)
    return out


def decide(
    snapshot: Snapshot,
    claims: PodClaims,
    node: Node,
    adjustment: NodeAdjustment = UNCHANGED,
    *,
    freed: Sequence[Allocation] = (),
    held: Sequence[Allocation] | None = None,
    gone: Collection[str] = (),
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> NodeDecision:
    """:meth:`Snapshot.decide` with the devices the waiting pods keep taken (``held``: those,
    when the caller has them already) and those of ``freed`` free (``gone``: the pods whose
    eviction frees them; their node resources are free too). The adjustment's releasing claims
    are not used here (:func:`decide_with_release`)."""
    return _judge(snapshot, claims, node, adjustment, freed, held, gone, timeout, summarize=False)[0]


def assess(
    snapshot: Snapshot,
    claims: PodClaims,
    node: Node,
    adjustment: NodeAdjustment,
    *,
    released: bool = False,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> Assessment:
    """Filter's and prioritize's answer for a node an adjustment changes: like
    :meth:`Snapshot.summarize`, with the kept devices taken (free devices left counted too) and,
    if ``released``, the devices of the claims being released free."""
    freed = adjustment.freed() if released else ()
    _, assessment = _judge(snapshot, claims, node, adjustment, freed, None, (), timeout, summarize=True)
    assert assessment is not None
    return assessment


def decide_with_release(
    snapshot: Snapshot,
    claims: PodClaims,
    node: Node,
    adjustment: NodeAdjustment,
    *,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> tuple[NodeDecision, tuple[ResourceClaim, ...]]:
    """A bind's decision: as :func:`decide`; when the pod does not fit and its preemption is
    releasing claims on the node, with their devices free, and those claims (the bind writes
    once they are released). Otherwise no claims."""
    decision = decide(snapshot, claims, node, adjustment, timeout=timeout)
    if decision.fits or not adjustment.releasing or claims.reason or claims.error:
        return decision, ()
    released = decide(snapshot, claims, node, adjustment, freed=adjustment.freed(), timeout=timeout)
    return (released, adjustment.releasing) if released.fits else (decision, ())


def _judge(
    snapshot: Snapshot,
    claims: PodClaims,
    node: Node,
    adjustment: NodeAdjustment,
    freed: Sequence[Allocation],
    held: Sequence[Allocation] | None,
    gone: Collection[str],
    timeout: float | None,
    *,
    summarize: bool,
) -> tuple[NodeDecision, Assessment | None]:
    if held is None:
        held = kept(snapshot, node, adjustment.waiting, timeout=timeout) if claims.allocates else []
    if not freed and not held and not gone:
        decision = snapshot.decide(claims, node, timeout=timeout)
        return decision, snapshot.summarize(claims, node, decision) if summarize else None
    with snapshot.what_if(freed=freed, held=held, gone=gone):
        decision = snapshot.decide(claims, node, timeout=timeout)
        assessment = snapshot.summarize(claims, node, decision) if summarize else None
    if (
        held
        and adjustment.waiting
        and not decision.fits
        and decision.reason
        and _fits_unheld(snapshot, claims, node, freed, timeout)
    ):
        decision.reason = f"{decision.reason} ({kept_for(adjustment.waiting)})"
        if assessment is not None:
            assessment = Assessment(
                False,
                decision.reason,
                decision.error,
                timed_out=decision.timed_out,
                resolvable=decision.resolvable,
            )
    return decision, assessment


def _fits_unheld(
    snapshot: Snapshot, claims: PodClaims, node: Node, freed: Sequence[Allocation], timeout: float | None
) -> bool:
    with snapshot.what_if(freed=freed):
        return snapshot.decide(claims, node, timeout=timeout).fits
