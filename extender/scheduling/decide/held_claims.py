"""Claims allocated and reserved for pods that are not bound: the devices a bind holds between
its claim writes and the pod's Binding. That window is normally milliseconds (or, with binding
conditions, up to the binding timeout); a claim that stays in it holds devices nobody uses.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, MutableMapping
from dataclasses import dataclass

from extender.cluster.state import ClusterState, Key
from extender.model.dra import ResourceClaim


@dataclass(frozen=True, slots=True)
class HeldClaims:
    count: int = 0
    #: Seconds the longest-held one has been held (0 when there is none).
    oldest_seconds: float = 0.0


#: Claims looked at per step on the engine's loop (about a millisecond: the verbs run in between).
STEP = 1000


def held_claim_steps(
    state: ClusterState,
    scheduler_names: Collection[str],
    now: float,
    first_seen: MutableMapping[Key, float],
) -> Generator[None, None, HeldClaims]:
    """Claims allocated and reserved for an existing, unbound pod of one of ``scheduler_names``,
    and for no pod that is bound (a shared claim a running pod uses is in use, not held);
    yields every :data:`STEP` claims (run on the engine's loop in slices, as the capacity is).

    A claim's age runs from its ``allocationTimestamp`` when it has one, else from when it was
    first found held (``first_seen``, wall-clock seconds kept by the caller between calls: claims
    no longer held are dropped from it). ``now`` is wall-clock seconds.
    """
    held: dict[Key, float] = {}
    for n, (key, claim) in enumerate(list(state.claims.items()), 1):
        allocation = claim.allocation
        if allocation is not None and _waits_for_unbound_pod(state, key[0], claim, scheduler_names):
            held[key] = min(allocation.allocation_timestamp or first_seen.get(key, now), now)
        if n % STEP == 0:
            yield
    for key in [k for k in first_seen if k not in held]:
        del first_seen[key]
    for key, since in held.items():
        first_seen.setdefault(key, since)
    return HeldClaims(len(held), now - min(held.values(), default=now))


def _waits_for_unbound_pod(
    state: ClusterState, namespace: str, claim: ResourceClaim, scheduler_names: Collection[str]
) -> bool:
    if any(entry.get("resource") != "pods" for entry in claim.reserved_for):
        return False  # a PodGroup's claim: its pods come and go
    users = [
        pod
        for entry in claim.reserved_for
        if (pod := state.pods.get((namespace, str(entry.get("name") or "")))) is not None
        and pod.uid == entry.get("uid")
    ]
    return not any(pod.node_name for pod in users) and any(
        pod.scheduler_name in scheduler_names for pod in users
    )
