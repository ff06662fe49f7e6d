"""Who may move to make room (:mod:`extender.scheduling.preempt.make_room`): the rules, the
pods a controller recreates elsewhere, and the units they move in (pods sharing a claim go
together: the claim is freed only when all of them go, as preemption's victims free it).

Pure: a pod, the rules and the time in; a reason or None out.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, replace

from extender.model.core import Pod
from extender.model.dra import Allocation, DeviceID, ResourceClaim
from extender.model.reader import Reader
from extender.scheduling.config import Rules
from extender.scheduling.decide import what_if
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.victims import running_pods

#: Our own opt-out: a pod annotated so is never moved.
OPT_OUT_ANNOTATION = "dra.extender.io/make-room"
OPT_OUT_VALUE = "never"
#: The cluster autoscaler's opt-out, honoured too.
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
#: Priorities at or above this are system-critical (upstream ``SystemCriticalPriority``).
SYSTEM_CRITICAL = 2_000_000_000


def unmovable(pod: Pod, priority: int, rules: Rules, now: float) -> str | None:
    """Why ``pod`` may not move to make room for a target of ``priority`` (None: it may), in
    the words of a node's reason ("held by pods <why>")."""
    if pod.priority > priority:
        return "with a higher priority than the target"
    meta = Reader(pod.raw.get("metadata"), "metadata")
    spec = Reader(pod.raw.get("spec"), "spec")
    annotations = meta.mapping("annotations")
    if pod.deleting:
        return "that are terminating"
    if MIRROR_ANNOTATION in annotations:
        return "that are static (mirror pods)"
    if pod.priority >= SYSTEM_CRITICAL or spec.string("priorityClassName").startswith("system-"):
        return "that are system-critical"
    if pod.pod_group is not None:
        return "of a PodGroup"
    if annotations.get(SAFE_TO_EVICT) == "false" or annotations.get(OPT_OUT_ANNOTATION) == OPT_OUT_VALUE:
        return "that opt out by annotation"
    kinds = [r.string("kind") for r in meta.readers("ownerReferences")]
    if "DaemonSet" in kinds:
        return "of a DaemonSet"
    if not any(kind in rules.controller_kinds for kind in kinds):
        return "that no controller recreates"
    if rules.resting and workload_of(pod) in rules.resting:
        return "of a workload moved within the cooldown"
    if any(v.has("emptyDir") or v.has("hostPath") for v in spec.readers("volumes")):
        return "with local storage"
    if Reader(pod.raw.get("status"), "status").string("phase") != "Running":
        # The Eviction API deletes a Pending pod without checking its budgets.
        return "that are not running"
    if pod.start_time is None or now - pod.start_time < rules.min_age:
        return "younger than the minimum age"
    return None


def workload_of(pod: Pod) -> str:
    """The UID of the pod's controller (its ownerReference with ``controller: true``), '' if none:
    the workload the mover's cooldown counts moves of."""
    for ref in Reader(pod.raw.get("metadata"), "metadata").readers("ownerReferences"):
        if ref.raw("controller") is True:
            return ref.string("uid")
    return ""


@dataclass(frozen=True)
class Unit:
    """Pods that move together: those sharing a claim (freed only when all of them go)."""

    pods: tuple[Pod, ...]
    freed: tuple[Allocation, ...]
    #: Their claims as they hold them (allocated), without those the target keeps.
    held: tuple[ResourceClaim, ...]
    devices: int  # devices their going frees (admin access frees none)

    @functools.cached_property
    def claims(self) -> PodClaims:
        """Their claims, unallocated: what the recreated pods ask (built for the units of the
        nodes searched, not of every node bounded)."""
        claims = [_unallocated(c) for c in self.held]
        return PodClaims(to_allocate=claims, ordered=claims, pod=self.pods[0])

    @functools.cached_property
    def uids(self) -> frozenset[str]:
        return frozenset(p.uid for p in self.pods)

    @property
    def top(self) -> int:
        return max(p.priority for p in self.pods)


def movable_units(
    snapshot: Snapshot, node: str, priority: int, rules: Rules, now: float, keep: Iterable[tuple[str, str]]
) -> tuple[list[Unit], dict[str, set[DeviceID]]]:
    """The node's movable units, and per reason the devices held by pods that may not move."""
    running = running_pods(snapshot.state, node)
    by_uid = {p.uid: p for p in running}
    held = {p.uid: what_if.held_claims(snapshot.claims, p) for p in running}
    why = {p.uid: unmovable(p, priority, rules, now) for p in running}
    # Pods sharing a claim join one unit (union-find over the claims' reservations).
    parent = {uid: uid for uid in by_uid}

    def root(uid: str) -> str:
        while parent[uid] != uid:
            uid = parent[uid]
        return uid

    for uid, claims in held.items():
        for claim in claims:
            for entry in claim.reserved_for:
                other = entry.get("uid")
                if other in parent:
                    parent[root(other)] = root(uid)
                elif why[uid] is None:
                    why[uid] = "sharing a claim with a pod that stays"
    groups: dict[str, list[Pod]] = {}
    for pod in running:
        groups.setdefault(root(pod.uid), []).append(pod)
    units: list[Unit] = []
    stuck: dict[str, set[DeviceID]] = {}
    kept = set(keep)
    for pods in groups.values():
        reasons = [why[p.uid] for p in pods if why[p.uid] is not None]
        uids = {p.uid for p in pods}
        freed = what_if.freed_allocations(snapshot.claims, pods, uids, kept, held)
        devices = sum(len(a.exclusive) + len(a.shares) for a in freed)
        if reasons:
            ids = stuck.setdefault(str(reasons[0]), set())
            ids.update(d for a in freed for d in (*a.exclusive, *(r.id for r in a.shares)))
            continue
        if not devices:
            continue  # frees nothing: moving it never helps
        asked = {c.key: c for p in pods for c in held[p.uid] if c.key not in kept}
        units.append(Unit(tuple(pods), tuple(freed), tuple(asked.values()), devices))
    return units, stuck


def _unallocated(claim: ResourceClaim) -> ResourceClaim:
    """The claim as its recreated pod asks it: not allocated, reserved for nobody."""
    return replace(claim, allocation=None, reserved_for=())
