"""Claims allocated and reserved for pods that are not bound: the devices a bind holds between
its claim writes and the pod's Binding. That window is normally milliseconds (or, with binding
conditions, up to the binding timeout); a claim that stays in it holds devices nobody uses.
"""

from __future__ import annotations

from collections.abc import Collection, MutableMapping
from dataclasses import dataclass

from extender.cluster.state import ClusterState, Key


@dataclass(frozen=True, slots=True)
class HeldClaims:
    count: int = 0
    #: Seconds the longest-held one has been held (0 when there is none).
    oldest_seconds: float = 0.0


def held_claims(
    state: ClusterState,
    scheduler_names: Collection[str],
    now: float,
    first_seen: MutableMapping[Key, float],
) -> HeldClaims:
    """Claims allocated and reserved for an existing, unbound pod of one of ``scheduler_names``,
    and for no pod that is bound (a shared claim a running pod uses is in use, not held).

    A claim's age runs from its ``allocationTimestamp`` when it has one, else from when it was
    first found held (``first_seen``, wall-clock seconds kept by the caller between calls: claims
    no longer held are dropped from it). ``now`` is wall-clock seconds.
    """
    held: dict[Key, float] = {}
    for key, claim in state.claims.items():
        allocation = claim.allocation
        if allocation is None or not claim.reserved_for:
            continue
        waiting = False
        for entry in claim.reserved_for:
            if entry.get("resource") != "pods":
                waiting = False  # a PodGroup's claim: its pods come and go
                break
            pod = state.pods.get((key[0], str(entry.get("name") or "")))
            if pod is None or pod.uid != entry.get("uid"):
                continue
            if pod.node_name:
                waiting = False  # a consumer runs: the devices are in use
                break
            waiting = waiting or pod.scheduler_name in scheduler_names
        if waiting:
            since = allocation.allocation_timestamp or first_seen.get(key, now)
            held[key] = min(since, now)
    for key in [k for k in first_seen if k not in held]:
        del first_seen[key]
    for key, since in held.items():
        first_seen.setdefault(key, since)
    oldest = min(held.values(), default=now)
    return HeldClaims(len(held), now - oldest)
