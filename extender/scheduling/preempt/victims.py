"""Device-aware preemption: which pods on a node to evict so that a preemptor's claims fit there.

DefaultPreemption's ``SelectVictimsOnNode`` (pkg/scheduler/framework/plugins/defaultpreemption)
with devices in place of CPU and memory:

1. Every running pod on the node with a lower priority than the preemptor is a potential victim.
2. The node is a candidate only if the preemptor's claims allocate there once all of them are
   gone. A claim is freed only when *every* pod it is reserved for is gone: the resourceclaim
   controller deallocates a claim when its last reservation goes. So a claim shared with a pod
   of equal or higher priority (or a pod elsewhere that is not a victim) is never freed.
3. Then, most important first (higher priority, then earlier start), the pods whose eviction
   would violate a PodDisruptionBudget and then the others, each pod is reprieved if the
   preemptor still fits with it back. What is left are the victims: a minimal set, lowest
   priorities first to go, listed most important first as upstream sorts them.

Every what-if also keeps the devices of pods nominated to the node ahead of the preemptor
(:mod:`extender.scheduling.preempt.nominated`), as upstream's filters do for nominated pods.

Pure: a snapshot in, victims out; the allocator decides each what-if on the snapshot with the
freed claims' devices counted out (:meth:`Snapshot.what_if`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.cluster.state import ClusterState
from extender.model.core import Node, Pod
from extender.model.dra import Allocation
from extender.model.policy import PodDisruptionBudget
from extender.scheduling.decide import what_if
from extender.scheduling.decide.decision import DEFAULT_NODE_TIMEOUT
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.decide.what_if import NodeAdjustment
from extender.scheduling.preempt import nominated
from extender.scheduling.preempt.nominated import Nominations, importance

#: Added to filter's reason where evicting lower-priority pods would make room (Unschedulable, not
#: Unresolvable: kube-scheduler's preemption may try the node).
MAY_HELP = "; preemption may help: lower-priority pods hold devices it could use"
#: Added where the filter budget ran out before that was checked (the preempt verb checks).
NOT_CHECKED = "; preemption not ruled out: the DRA extender's filter time budget ran out"


@dataclass(frozen=True, slots=True)
class Candidate:
    """One node of a preempt request or answer: the victims' UIDs and their PDB violations."""

    uids: tuple[str, ...]
    pdb_violations: int = 0


@dataclass(frozen=True, slots=True)
class NodeVictims:
    """The pods to evict from ``node`` (most important first, as upstream lists them) and how
    many of them a PodDisruptionBudget protects."""

    node: str
    pods: tuple[Pod, ...]
    pdb_violations: int = 0


def running_pods(state: ClusterState, node_name: str) -> list[Pod]:
    """The pods on the node that hold what they hold (not finished), most important first:
    preemption's victims and make-room's movers are chosen among them."""
    on_node = state.pods_by_node.get(node_name, {}).values()
    return sorted((p for p in on_node if not p.terminal), key=importance)


def potential_victims(state: ClusterState, preemptor: Pod, node_name: str) -> list[Pod]:
    """The running pods on the node with a lower priority than ``preemptor``, most important first."""
    return [p for p in running_pods(state, node_name) if p.priority < preemptor.priority]


def pdb_violating(
    pods: Sequence[Pod], pdbs: Iterable[PodDisruptionBudget], *, as_policy_v1: bool = False
) -> set[str]:
    """UIDs of the pods whose eviction, in this order, would violate a PodDisruptionBudget
    (upstream ``filterPodsWithPDBViolation``: each matching pod not already in the budget's
    disruptedPods uses up one of its allowed disruptions; past zero, the pod violates it)."""
    budgets = list(pdbs)
    allowed = [pdb.disruptions_allowed for pdb in budgets]
    out: set[str] = set()
    for pod in pods:
        for i, pdb in enumerate(budgets):
            protected = pdb.protects(pod.namespace, pod.labels, as_policy_v1=as_policy_v1)
            if not protected or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                out.add(pod.uid)
    return out


class _WhatIf:
    """Does the preemptor fit on the node with a given set of its pods gone? (None: the
    allocation ran out of time, so it cannot be told.) The devices pods nominated ahead of it
    keep are computed once per node."""

    def __init__(
        self,
        snapshot: Snapshot,
        preemptor: Pod,
        claims: PodClaims,
        node: Node,
        nominations: Nominations | None,
        timeout: float | None,
        nominated_here: NodeAdjustment | None = None,
    ) -> None:
        """``nominated_here``: what nominations change on the node (the pods nominated there
        ahead of the preemptor), when the caller knows it already (:func:`nominated.adjustments`)."""
        self.snapshot, self.preemptor, self.claims, self.node = snapshot, preemptor, claims, node
        self.nominations, self.timeout = nominations, timeout
        self.on_node = {p.uid: p for p in snapshot.state.pods_by_node.get(node.name, {}).values()}
        self.own = {c.key for c in claims.ordered}
        self._nominated = nominated_here
        self._held: list[Allocation] | None = None

    def freed(self, gone: Collection[str], pods: Iterable[Pod] | None = None) -> list[Allocation]:
        """What evicting ``gone`` releases (never a claim the preemptor uses)."""
        if pods is None:
            pods = [self.on_node[uid] for uid in gone if uid in self.on_node]
        return what_if.freed_allocations(self.snapshot.claims, pods, gone, self.own)

    def fits(self, gone: Collection[str], freed: Sequence[Allocation] | None = None) -> bool | None:
        """``freed``: what their eviction releases, when the caller knows it already."""
        if self._nominated is None:  # the pods nominated to the node ahead of the preemptor
            name = self.node.name
            self._nominated = nominated.adjustments(
                self.snapshot,
                self.preemptor,
                self.claims,
                [name],
                self.nominations,
                nominated.no_victims,
                releasing=False,
            ).get(name, what_if.UNCHANGED)
        if self._held is None:  # the devices they keep
            self._held = what_if.kept(self.snapshot, self.node, self._nominated.waiting, timeout=self.timeout)
        decision = what_if.decide(
            self.snapshot,
            self.claims,
            self.node,
            self._nominated,
            freed=self.freed(gone) if freed is None else freed,
            held=self._held,
            gone=gone,
            timeout=self.timeout,
        )
        return None if decision.timed_out else decision.fits


def may_preempt(state: ClusterState, pod: Pod, claims: PodClaims) -> bool:
    """Whether preemption could make room for the pod's devices anywhere: it may preempt, its
    claims resolve and need devices, and some running pod is less important. The last is the
    common ``False`` and costs a ``min`` over the distinct running priorities."""
    if pod.preemption_policy == "Never" or claims.error or claims.reason or not claims.allocates:
        return False
    lowest = state.lowest_bound_priority()
    return lowest is not None and lowest < pod.priority


def where_it_may_help(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    rejected: Mapping[str, Node],
    *,
    nominations: Nominations | None = None,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    groups: Mapping[str, Hashable] | None = None,
    adjustments: Mapping[str, NodeAdjustment] | None = None,
) -> dict[str, str]:
    """Of the nodes filter rejected, those where preemption may help, each with what to add to
    its reason: :data:`MAY_HELP`, or :data:`NOT_CHECKED` once ``deadline`` has passed (the
    preempt verb then judges them). Everywhere else preemption cannot help: the in-tree
    plugin's Unresolvable stays.

    ``groups``: the filter's groups of look-alike nodes (:meth:`Snapshot.node_groups`: equal
    devices, equal devices in use). Two nodes of a group whose evictions would free the devices
    at the same positions get the same answer, so it is computed once per call.
    ``adjustments``: what nominations change on the filter's nodes, as the filter found it
    (:func:`nominated.adjustments`; None: found here, per node).
    """
    state = snapshot.state
    if not may_preempt(state, pod, claims):
        return {}
    out: dict[str, str] = {}
    answers: dict[Hashable, bool] = {}
    for name, node in rejected.items():
        if name not in state.pods_by_node:
            continue
        lower = potential_victims(state, pod, name)
        if not lower:
            continue
        here = None if adjustments is None else adjustments.get(name, what_if.UNCHANGED)
        trial = _WhatIf(snapshot, pod, claims, node, nominations, timeout, here)
        gone = {p.uid for p in lower}
        freed = trial.freed(gone, lower)
        if not freed:
            continue
        if deadline is not None and clock() > deadline:
            out[name] = NOT_CHECKED
            continue
        held_back = nominations is not None and name in state.nominated  # nominations: judged alone
        key = None if held_back else _look_alike_key(snapshot, node, groups, freed)
        found = answers.get(key) if key is not None else None
        if found is None:
            fits = trial.fits(gone, freed)
            found = bool(fits)
            if key is not None and fits is not None:
                answers[key] = found
        if found:
            out[name] = MAY_HELP
    return out


def _look_alike_key(
    snapshot: Snapshot, node: Node, groups: Mapping[str, Hashable] | None, freed: Sequence[Allocation]
) -> Hashable | None:
    """(group, the positions of the devices the eviction frees): equal keys, equal answers. None
    where that does not hold or cannot be told: no group, a share (capacity is not positional),
    a device held by more than one allocation, a device not among the node's own."""
    group = groups.get(node.name) if groups is not None else None
    if group is None or isinstance(group, (str, tuple)):
        return None  # judged alone (not in the cache, pools shared with other nodes, nominations)
    positions = snapshot.inventory.device_positions(node.name, node.labels)
    if positions is None:
        return None
    held = snapshot.allocated.dedicated
    spots: list[int] = []
    for allocation in freed:
        if allocation.shares:
            return None
        for device in allocation.exclusive:
            spot = positions.get(device)
            if spot is None or held.get(device) != 1:
                return None
            spots.append(spot)
    return (group, tuple(sorted(spots)))


def select_victims(
    snapshot: Snapshot,
    preemptor: Pod,
    node: Node,
    *,
    claims: PodClaims | None = None,
    pdbs: Iterable[PodDisruptionBudget] = (),
    as_policy_v1: bool = False,
    nominations: Nominations | None = None,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
    evicted: frozenset[str] = frozenset(),
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> NodeVictims | None:
    """The victims on ``node`` that make room for ``preemptor``'s claims, or None when evicting
    every lower-priority pod there would still not be enough, or when that cannot be told in
    time (an allocation ran out of its time, or ``deadline`` passed): better no candidate than
    more victims than needed.

    ``evicted``: UIDs of pods kube-scheduler already chose (for CPU, memory...): gone in every
    what-if, never reprieved, and not among the returned pods."""
    claims = claims if claims is not None else snapshot.claims_of(preemptor)
    everyone = potential_victims(snapshot.state, preemptor, node.name)
    lower = [p for p in everyone if p.uid not in evicted]
    trial = _WhatIf(snapshot, preemptor, claims, node, nominations, timeout)
    victims = {*evicted, *(p.uid for p in lower)}
    if not trial.fits(victims):
        return None
    violating = pdb_violating(everyone, pdbs, as_policy_v1=as_policy_v1)
    chosen: list[Pod] = []
    violations = 0
    for pod in [*(p for p in lower if p.uid in violating), *(p for p in lower if p.uid not in violating)]:
        if deadline is not None and clock() > deadline:
            return None
        victims.discard(pod.uid)
        fits = trial.fits(victims)
        if fits is None:
            return None
        if fits:
            continue  # reprieved
        victims.add(pod.uid)
        chosen.append(pod)
        violations += pod.uid in violating
    return NodeVictims(node.name, tuple(sorted(chosen, key=importance)), violations)


def preempt(
    snapshot: Snapshot,
    preemptor: Pod,
    candidates: Mapping[str, Candidate],
    *,
    claims: PodClaims | None = None,
    nominations: Nominations | None = None,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
    budget: float = 3.0,
    clock: Callable[[], float] = time.monotonic,
    pdb_selectors_as_policy_v1: bool = False,
) -> dict[str, Candidate]:
    """The preempt verb's answer: per candidate node, kube-scheduler's victims and the pods the
    preemptor's claims need gone, most important first; a node where no set of lower-priority
    pods frees enough is dropped (kube-scheduler's way to reject a candidate).

    A pod that needs no devices gets the candidates back unchanged (no opinion); one whose
    claims cannot be resolved (a missing claim or class) gets none: no eviction helps it.
    Nodes not judged within ``budget`` seconds are dropped too (the answer must arrive within
    the scheduler's timeout). PodDisruptionBudgets are the cache's (``snapshot.state.pdbs``).
    ``claims``: the preemptor's, as the caller's PreFilter resolved them.
    ``pdb_selectors_as_policy_v1``: kube-scheduler 1.38+ (a budget's ``{}`` selector protects
    every pod of its namespace, and unlabelled pods are matched too).
    """
    claims = claims if claims is not None else snapshot.claims_of(preemptor)
    if claims.error is None and claims.reason is None and not claims.allocates:
        return dict(candidates)
    if claims.error is not None or claims.reason is not None:
        return {}
    state = snapshot.state
    pdbs = list(state.pdbs.values())
    deadline = clock() + budget
    out: dict[str, Candidate] = {}
    for name, proposed in candidates.items():
        node = state.nodes.get(name)
        if node is None or clock() > deadline:
            continue
        found = select_victims(
            snapshot,
            preemptor,
            node,
            claims=claims,
            pdbs=pdbs,
            as_policy_v1=pdb_selectors_as_policy_v1,
            nominations=nominations,
            timeout=timeout,
            evicted=frozenset(proposed.uids),
            deadline=deadline,
            clock=clock,
        )
        if found is not None:
            out[name] = Candidate(
                _most_important_first(state, name, proposed.uids, found.pods),
                proposed.pdb_violations + found.pdb_violations,
            )
    return out


def _most_important_first(
    state: ClusterState, node: str, proposed: Sequence[str], found: Sequence[Pod]
) -> tuple[str, ...]:
    """kube-scheduler's victims and ours in one list, most important first (upstream scores a
    candidate by its first victim's priority). Victims the cache does not know stay in front,
    in the scheduler's order."""
    on_node = {p.uid: p for p in state.pods_by_node.get(node, {}).values()}
    unknown = [uid for uid in proposed if uid not in on_node]
    known = sorted([*(on_node[uid] for uid in proposed if uid in on_node), *found], key=importance)
    return (*unknown, *dict.fromkeys(p.uid for p in known))
