"""The mover's bounds and checks (issue 52; :mod:`extender.scheduling.make_room_mover` carries
plans out): how many evictions a minute, which workloads rest after a move, which budgets a
move shares with an earlier one, and whether a plan still holds on the snapshot.

Pure: the clock is injected; a snapshot and a plan in, a reason (or None) out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence

from extender.model.core import Pod
from extender.model.policy import PodDisruptionBudget
from extender.model.timestamps import parse_timestamp
from extender.scheduling.decide import what_if
from extender.scheduling.decide.decision import DEFAULT_NODE_TIMEOUT
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.nominated import Nominations, VictimsOf, adjustments

#: The window the eviction rate is counted over (seconds).
RATE_WINDOW = 60.0


class EvictionRate:
    """At most ``per_minute`` evictions in any :data:`RATE_WINDOW` (a sliding window; every
    eviction asked counts, answered or not)."""

    def __init__(self, per_minute: float, clock: Callable[[], float]) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._at: deque[float] = deque()

    def wait(self) -> float:
        """Seconds until one more eviction is allowed (0: now)."""
        now = self.clock()
        while self._at and now - self._at[0] >= RATE_WINDOW:
            self._at.popleft()
        if self.per_minute <= 0:
            return RATE_WINDOW
        if len(self._at) < self.per_minute:
            return 0.0
        return RATE_WINDOW - (now - self._at[0])

    def spend(self) -> None:
        self._at.append(self.clock())


class Cooldown:
    """Workloads (controller UIDs) moved less than ``seconds`` ago: their pods stay."""

    def __init__(self, seconds: float, clock: Callable[[], float]) -> None:
        self.seconds = seconds
        self.clock = clock
        self._moved: dict[str, float] = {}
        self._resting: frozenset[str] = frozenset()

    def moved(self, workload: str) -> None:
        if workload:
            self._moved[workload] = self.clock()
            self._resting = self._resting | {workload}

    def resting(self) -> frozenset[str]:
        """The workloads that may not move now (a new frozenset whenever it changes)."""
        now = self.clock()
        over = [w for w, at in self._moved.items() if now - at >= self.seconds]
        if over:
            for workload in over:
                del self._moved[workload]
            self._resting = frozenset(self._moved)
        return self._resting


def waiting_since(pod: Pod) -> float | None:
    """When the pod began waiting (seconds since the epoch): its PodScheduled condition's last
    change to False, as kube-scheduler's first failure set it; else its creation. None: it does
    not wait (scheduled), or it cannot be told."""
    status = pod.raw.get("status") or {}
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "PodScheduled":
            if condition.get("status") != "False":
                return None
            at = condition.get("lastTransitionTime")
            if isinstance(at, str) and (since := parse_timestamp(at)) is not None:
                return since
    created = (pod.raw.get("metadata") or {}).get("creationTimestamp")
    return parse_timestamp(created) if isinstance(created, str) else None


def budgets_of(pod: Pod, pdbs: Iterable[PodDisruptionBudget]) -> frozenset[tuple[str, str]]:
    """The PodDisruptionBudgets the Eviction API checks for ``pod`` (policy/v1 selectors: ``{}``
    selects every pod of the namespace), as (namespace, name)."""
    mine = (pdb for pdb in pdbs if pdb.protects(pod.namespace, pod.labels, as_policy_v1=True))
    return frozenset((pdb.namespace, pdb.name) for pdb in mine)


def target_fits(
    snapshot: Snapshot,
    target: Pod,
    node: str,
    nominations: Nominations,
    victims_of: VictimsOf,
    *,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> str | None:
    """Why the plan no longer holds for ``target`` on ``node`` (None: it does): the target's
    claims must fit there with the moved pods' claims free (released or being released) and
    the devices of the pods held for or nominated ahead of it taken, as its filter and bind
    judge it (:func:`what_if.decide_with_release`)."""
    host = snapshot.state.nodes.get(node)
    if host is None:
        return f"node {node} is gone"
    claims = snapshot.claims_of(target)
    if claims.error is not None or claims.reason is not None:
        return claims.error or claims.reason
    adjusted = adjustments(snapshot, target, claims, [node], nominations, victims_of)
    decision, _ = what_if.decide_with_release(
        snapshot, claims, host, adjusted.get(node, what_if.UNCHANGED), timeout=timeout
    )
    if decision.fits:
        return None
    return f"it no longer fits on {node} with the moved pods gone: {decision.reason or 'does not fit'}"


def moved_pod_changed(snapshot: Snapshot, node: str, pods: Sequence[Pod]) -> str | None:
    """Why a pod still to be moved is no longer the one planned (None: each is, or is gone)."""
    for pod in pods:
        now = snapshot.state.pods.get(pod.key)
        if now is None or now.uid != pod.uid:
            continue  # gone: what it held is being released anyway
        if now.node_name != node:
            return f"{pod.namespace}/{pod.name} is no longer on {node}"
    return None
