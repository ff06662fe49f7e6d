"""Which pods on a node to evict so that a preemptor's claims fit there (issue 15, first part).

DefaultPreemption's ``SelectVictimsOnNode`` (pkg/scheduler/framework/plugins/defaultpreemption)
with devices in place of CPU and memory:

1. Every pod on the node with a lower priority than the preemptor is a potential victim.
2. The node is a candidate only if the preemptor's claims allocate there once all of them are
   gone. A claim is freed only when *every* pod it is reserved for is gone: the resourceclaim
   controller deallocates a claim when its last reservation goes. So a claim shared with a pod
   of equal or higher priority (or a pod elsewhere that is not a victim) is never freed.
3. Then, most important first (higher priority, then earlier start), the pods whose eviction
   would violate a PodDisruptionBudget and then the others, each pod is reprieved if the
   preemptor still fits with it back. What is left are the victims: a minimal set, lowest
   priorities first to go.

Pure: a snapshot in, victims out; the allocator decides fits, on a what-if snapshot whose
claims are the snapshot's minus those the victims' eviction would free.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from extender.model.core import Node, Pod
from extender.model.dra import ResourceClaim
from extender.scheduling.decision import DEFAULT_NODE_TIMEOUT, Snapshot

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One node of a preempt request or answer: the victims' UIDs and their PDB violations."""

    uids: tuple[str, ...]
    pdb_violations: int = 0


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """The pods to evict from ``node`` (in the order DefaultPreemption picks them) and how many
    of them a PodDisruptionBudget protects."""

    node: str
    pods: tuple[Pod, ...]
    pdb_violations: int = 0


def importance(pod: Pod) -> tuple[int, str, str, str]:
    """Sort key, most important first: higher priority, then earlier start (upstream's
    ``MoreImportantPod``), then name (a stable order for equal pods)."""
    status = pod.raw.get("status") if isinstance(pod.raw.get("status"), dict) else {}
    started = str((status or {}).get("startTime") or "~")  # not started: least important
    return (-pod.priority, started, pod.namespace, pod.name)


def select_victims(
    snapshot: Snapshot,
    preemptor: Pod,
    node: Node,
    *,
    violates_pdb: Callable[[Pod], bool] = lambda pod: False,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
    evicted: frozenset[str] = frozenset(),
) -> NodeVictims | None:
    """The victims on ``node`` that make room for ``preemptor``'s claims, or None when evicting
    every lower-priority pod there would still not be enough.

    ``evicted``: UIDs of pods kube-scheduler already chose (for CPU, memory...): gone in every
    what-if, never reprieved, and not among the returned pods."""
    on_node = (p for p in snapshot.state.pods.values() if p.node_name == node.name)
    lower = sorted(
        (p for p in on_node if p.priority < preemptor.priority and p.uid not in evicted), key=importance
    )
    if not _fits(snapshot, preemptor, node, {*evicted, *(p.uid for p in lower)}, timeout):
        return None
    victims = {*evicted, *(p.uid for p in lower)}
    protected = [p for p in lower if violates_pdb(p)]
    others = [p for p in lower if not violates_pdb(p)]
    chosen: list[Pod] = []
    violations = 0
    for pod in [*protected, *others]:
        victims.discard(pod.uid)
        if _fits(snapshot, preemptor, node, victims, timeout):
            continue  # reprieved
        victims.add(pod.uid)
        chosen.append(pod)
        violations += pod in protected
    return NodeVictims(node.name, tuple(chosen), violations)


def freed_claims(claims: Mapping[Key, ResourceClaim], evicted: set[str]) -> set[Key]:
    """The allocated claims whose every reservation belongs to an evicted pod (by UID)."""
    return {
        key
        for key, claim in claims.items()
        if claim.allocation is not None
        and claim.reserved_for
        and all(entry.get("uid") in evicted for entry in claim.reserved_for)
    }


def _fits(snapshot: Snapshot, preemptor: Pod, node: Node, evicted: set[str], timeout: float | None) -> bool:
    freed = freed_claims(snapshot.claims, evicted)
    if freed:
        remaining = {key: claim for key, claim in snapshot.claims.items() if key not in freed}
        snapshot = Snapshot(
            snapshot.state, snapshot.features, snapshot.cel, claims=remaining, inventory=snapshot.inventory
        )
    return snapshot.decide(snapshot.claims_of(preemptor), node, timeout=timeout).fits


def preempt(
    snapshot: Snapshot,
    preemptor: Pod,
    candidates: Mapping[str, Candidate],
    *,
    violates_pdb: Callable[[Pod], bool] = lambda pod: False,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
    budget: float = 3.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Candidate]:
    """The preempt verb's answer: per candidate node, kube-scheduler's victims followed by the
    pods the preemptor's claims need gone; a node where no set of lower-priority pods frees
    enough is dropped (kube-scheduler's way to reject a candidate).

    A pod that needs no devices gets the candidates back unchanged (no opinion); one whose
    claims cannot be resolved (a missing claim or class) gets none: no eviction helps it.
    Nodes not judged within ``budget`` seconds are dropped too (the answer must arrive within
    the scheduler's timeout).
    """
    claims = snapshot.claims_of(preemptor)
    if claims.error is None and claims.reason is None and not claims.allocates:
        return dict(candidates)
    if claims.error is not None or claims.reason is not None:
        return {}
    deadline = clock() + budget
    out: dict[str, Candidate] = {}
    for name, proposed in candidates.items():
        node = snapshot.state.nodes.get(name)
        if node is None or clock() > deadline:
            continue
        found = select_victims(
            snapshot,
            preemptor,
            node,
            violates_pdb=violates_pdb,
            timeout=timeout,
            evicted=frozenset(proposed.uids),
        )
        if found is not None:
            out[name] = Candidate(
                (*proposed.uids, *(p.uid for p in found.pods)), proposed.pdb_violations + found.pdb_violations
            )
    return out
