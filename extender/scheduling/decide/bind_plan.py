"""What a bind writes, decided before the first write (the in-tree plugin's Reserve, and the
plan its PreBind carries out).

Extenders have no CycleState between verbs, so a bind decides again on the current snapshot with
the same pure functions the filter used, and turns the decision into a :class:`BindPlan`: which
claims to allocate and reserve, in the pod's order (upstream PreBind ``bindClaim``, v1.37.0
pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go), the extended-resource claim
to create, the claims a preemption is still releasing, and whether to wait for binding conditions.
The write room (:mod:`extender.scheduling.write.binder`) carries the plan out and nothing else.

Pure: a snapshot in, a plan out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from extender.allocator import Features
from extender.cluster.state import Key
from extender.model.core import Node, Pod
from extender.model.dra import DeviceID, ResourceClaim, parse_allocation
from extender.model.reader import Reader
from extender.scheduling.decide import extended as er
from extender.scheduling.decide import what_if
from extender.scheduling.decide.binding import allocation_waits, binding_problem, claim_waits
from extender.scheduling.decide.decision import NodeDecision
from extender.scheduling.decide.prefilter import PodClaims, reserved_for_pod
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.decide.what_if import NodeAdjustment


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """One claim's PreBind write: allocated (when ``allocation`` is set) and reserved."""

    claim: ResourceClaim
    #: The raw ``status.allocation`` to write; None: allocated already, only reserve it.
    allocation: dict[str, Any] | None
    #: Whom to reserve it for: its PodGroup (DRAWorkloadResourceClaims), or None for the pod.
    consumer: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class ExtendedClaim:
    """The pod's extended-resource claim to create, allocate and reserve."""

    #: Its name (derived from the pod's UID: a lost create, retried, finds its own claim).
    name: str
    #: The object to create.
    body: dict[str, Any]
    #: Its raw ``status.allocation``.
    allocation: dict[str, Any]
    #: The node's copy of the claim, its requests and container mappings.
    node: er.NodeExtendedClaim


@dataclass(frozen=True, slots=True)
class BindPlan:
    decision: NodeDecision
    #: The claims to write, in the pod's order (a claim listed twice: once, the first time).
    writes: tuple[ClaimWrite, ...] = ()
    #: Claims reserved for the pod's group already: read fresh before relying on them.
    reserved_for_group: tuple[ResourceClaim, ...] = ()
    extended: ExtendedClaim | None = None
    #: Claims a preemption of the pod is releasing on the node: their devices are in the
    #: decision, so nothing is written until the cache shows them released.
    releasing: tuple[ResourceClaim, ...] = ()
    #: Some claim is (or is now being) allocated to a device with binding conditions.
    awaits_binding: bool = False
    #: The pod's claims, in its order (whose binding conditions a wait reads).
    claim_keys: tuple[Key, ...] = ()
    #: The pod's status names an extended-resource claim this node does not need: cleared.
    clears_extended_mapping: bool = False
    #: When it does not fit: the pod's claims whose binding failed or timed out (freed at once,
    #: so that kube-scheduler's retry allocates afresh).
    stale_bindings: tuple[Key, ...] = ()

    @property
    def fits(self) -> bool:
        return self.decision.fits


def plan(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    node_name: str,
    node: Node | None,
    adjustment: NodeAdjustment,
    *,
    timeout: float | None,
    now: float,
    binding_timeout: float,
) -> BindPlan:
    """The plan for binding ``pod`` to ``node_name`` (``node`` None: a bound pod whose node is
    gone, where only reservations of allocated claims can be repaired). ``now``: seconds since
    the epoch (binding timeouts count from the claims' allocation timestamps)."""
    features = snapshot.features
    if pod.node_name:
        claims = replace(claims, extended=None)  # bound already: its extended-resource claim is what it is
    releasing: tuple[ResourceClaim, ...] = ()
    if node is not None:
        # Reserve: the devices the pods nominated ahead keep are taken; a preemptor on its
        # nominated node may use its victims' claims being released.
        decision, releasing = what_if.decide_with_release(snapshot, claims, node, adjustment, timeout=timeout)
    else:
        decision = NodeDecision(node_name, not (claims.reason or claims.error), claims.reason, claims.error)
    if not decision.fits:
        stale: tuple[Key, ...] = ()
        if features.device_binding:
            stale = tuple(c.key for c in claims.allocated if binding_problem(c, now, binding_timeout))
        return BindPlan(decision, stale_bindings=stale)
    writes, reserved_for_group = _claim_writes(pod, claims, decision, features)
    extended = None
    if decision.extended is not None:
        name = er.claim_name(pod)
        extended = ExtendedClaim(
            name,
            er.claim_object(pod, decision.extended.requests, name=name),
            decision.allocations[er.IN_MEMORY_NAME],
            decision.extended,
        )
    awaits = features.device_binding and (
        any(claim_waits(c) for c in claims.allocated)
        or any(allocation_waits(a) for a in decision.allocations.values())
    )
    return BindPlan(
        decision,
        writes,
        reserved_for_group,
        extended,
        releasing,
        awaits,
        claim_keys=tuple(c.key for c in claims.ordered),
        clears_extended_mapping=claims.extended is not None and decision.extended is None,
    )


def _claim_writes(
    pod: Pod, claims: PodClaims, decision: NodeDecision, features: Features
) -> tuple[tuple[ClaimWrite, ...], tuple[ResourceClaim, ...]]:
    """The claims to write in the pod's order, and those reserved for its group already."""
    writes: list[ClaimWrite] = []
    group: list[ResourceClaim] = []
    seen: set[Key] = set()
    for claim in claims.ordered:
        if claim.key in seen:
            continue  # a claim the pod lists twice is written once, with its first allocation
        seen.add(claim.key)
        if reserved_for_pod(claim, pod, features):
            if not claim.reserved_for_uid(pod.uid) and pod.pod_group:
                group.append(claim)
            continue
        allocation = decision.allocations.get(claim.name) if claim.allocation is None else None
        writes.append(ClaimWrite(claim, allocation, claims.consumers.get(claim.key)))
    return tuple(writes), tuple(group)


def taken_meanwhile(claims: Mapping[Key, ResourceClaim], plan: BindPlan) -> str | None:
    """After a bind waited for the claims its preemption (or make room) releases: a device of
    its decision that the cache now shows allocated to another claim (None: none). Another
    scheduler, or a pod created with ``nodeName`` and a claim allocated by hand, may have taken
    it meanwhile; the API server does not stop two claims naming one device, so the bind must
    not write it (kube-scheduler tries the pod again, decided anew)."""
    mine = {w.claim.key for w in plan.writes}
    wanted: set[DeviceID] = set()
    for write in plan.writes:
        if write.allocation is not None:
            wanted.update(parse_allocation(Reader(write.allocation, "allocation")).exclusive)
    if not wanted:
        return None
    for claim in claims.values():
        if claim.key in mine or claim.allocation is None:
            continue
        taken = wanted.intersection(claim.allocation.exclusive)
        if taken:
            device = "/".join(sorted(taken)[0])
            return (
                f"device {device} was allocated to claim {claim.namespace}/{claim.name} while the bind "
                "waited for the claims being released; not written (the pod is scheduled again)"
            )
    return None
