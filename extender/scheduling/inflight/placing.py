"""Pods this extender bound that the cache does not show bound yet, as kube-scheduler's assumed
pods (DRANodeAllocatableResources): on their node, with the claim statuses their bind recorded,
so that the node resources they take are counted before the watch delivers them."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from extender.cluster.state import ClusterState
from extender.model.core import Pod
from extender.model.node_allocatable import ClaimResources

#: Seconds an entry is kept at most (a pod the watch never shows bound).
PLACING_TTL = 60.0


class Placing:
    def __init__(self) -> None:
        self._pods: dict[str, tuple[Pod, float]] = {}

    def add(self, pod: Pod, node: str, statuses: Sequence[ClaimResources], now: float) -> None:
        placed = dataclasses.replace(pod, node_name=node, node_allocatable=tuple(statuses))
        self._pods[pod.uid] = (placed, now)

    def __len__(self) -> int:
        return len(self._pods)

    def discard(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def pods_on(self, node: str, state: ClusterState, binding: Collection[str], now: float) -> list[Pod]:
        """The cache's pods on ``node``, and ours it does not show there yet. An entry ends once
        the cache shows the pod bound, replaced or deleted (or after :data:`PLACING_TTL`), unless
        its bind is still running (``binding``: their UIDs)."""
        cached = state.pods_by_node.get(node, {})
        out = list(cached.values())
        shown = {p.uid for p in out}
        for uid, (placed, since) in list(self._pods.items()):
            current = state.pods.get(placed.key)
            # Shown bound, replaced or deleted; a pod the cache has not seen yet (the bind read it
            # from the API server) stays until it shows up or the TTL ends.
            settled = uid in state.deleted_pods or (
                current is not None and (current.uid != uid or bool(current.node_name))
            )
            if (settled or now - since > PLACING_TTL) and uid not in binding:
                del self._pods[uid]
            elif placed.node_name == node and uid not in shown:
                out.append(placed)
        return out
