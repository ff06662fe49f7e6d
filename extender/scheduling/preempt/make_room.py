"""Make room: which running pods to move off one node so that a pending pod's devices fit there,
and where each of them goes (issue 51, the planner; read-only: nothing here evicts).

It mirrors DefaultPreemption's ``SelectVictimsOnNode`` (v1.37.0,
pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go), as
:mod:`extender.scheduling.preempt.victims` does for the preempt verb, and shares its pieces: the
running pods of a node most important first (:func:`victims.running_pods`, upstream
``MoreImportantPod``), what their going frees (a claim only when every pod reserving it goes:
:func:`what_if.freed_allocations`), and the PodDisruptionBudget count (:func:`victims.pdb_violating`,
upstream ``filterPodsWithPDBViolation``: each matching pod not in ``disruptedPods`` uses one
allowed disruption, the plan's own evictions counted together). Like upstream, a node is a
candidate only if the pending pod fits once every movable pod there is gone, and the greedy
search reprieves pods most important first, PDB-protected ones first.

Where it departs, because moved pods are recreated by their controllers, not killed:

* A moved pod must fit elsewhere, after every earlier move of the plan (its devices freed on the
  node being freed, the devices it gets held on its new node), checked by the allocator filter
  uses (:func:`what_if.decide`), never on the node being freed. Upstream's victims disappear.
* Budgets are hard (the Eviction API refuses past ``disruptionsAllowed``); upstream only prefers
  nodes with fewer violations.
* Priority is a ceiling, not "lower than": pods of the target's priority may move (for a shape,
  :attr:`Rules.max_priority`). Only pods a controller recreates move (:func:`movable.unmovable`).
* The objective is fewest pods moved, then fewest devices moved, then lowest priorities (the
  highest, then the sum, as ``pickOneNodeForPreemption`` ranks them), then the fewest nodes the
  plan leaves partly free. It is searched exactly over the subsets of a node's movable pods up
  to :attr:`Rules.exact_up_to` of them, greedily (upstream's reprieve) beyond; the plan says which.
* Bounded by moves, nodes tried and time (an injected clock): "no plan within the bounds" is
  told apart from "impossible" (no node fits even with every movable pod gone).

The search on one node (which subset, where each moved pod goes, what a plan costs) is
:mod:`extender.scheduling.preempt.make_room_search`; here, the targets, the answer and the order
nodes are searched in.

Pure: a snapshot, a target, rules and clocks in; a :class:`Plan` or :class:`NoPlan` out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from extender.model.core import Node, Pod
from extender.model.dra import DeviceID, parse_resource_claim
from extender.scheduling.config import Rules
from extender.scheduling.decide.decision import DEFAULT_NODE_TIMEOUT, NodeDecision, node_info
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.make_room_search import (
    Found,
    Move,
    NodeSearch,
    Search,
    device_names,
    devices_needed,
    exact,
    greedy,
)
from extender.scheduling.preempt.movable import Unit, movable_units

__all__ = ["Move", "NoPlan", "Plan", "Rules", "Shape", "plan", "shape_claims"]


@dataclass(frozen=True, slots=True)
class Shape:
    """``count`` devices of ``device_class`` on one node (``constraints``: the claim's, raw)."""

    device_class: str
    count: int
    constraints: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """Free ``node`` by ``moves`` (in order), then place the target there on ``devices``.
    ``search`` "none": the target fits without a move."""

    node: str
    moves: tuple[Move, ...]
    devices: tuple[str, ...]
    search: Search

    @property
    def needs_moves(self) -> bool:
        return bool(self.moves)

    def explain(self) -> str:
        if not self.moves:
            return f"fits on {self.node} without moving a pod"
        return f"fits on {self.node} after moving {len(self.moves)} pod{'s' * (len(self.moves) > 1)}"


@dataclass(frozen=True, slots=True)
class NoPlan:
    """No plan: ``impossible`` (no node fits even with every movable pod gone) or ``bounds``
    (none found within the rules' bounds); per node, why (``""``: the target itself)."""

    kind: Literal["impossible", "bounds"]
    reasons: Mapping[str, str]

    def explain(self) -> list[str]:
        return [f"{node}: {why}" if node else why for node, why in sorted(self.reasons.items())]


# --- The target -------------------------------------------------------------------------------


def shape_claims(snapshot: Snapshot, shape: Shape) -> PodClaims:
    """A claim for ``shape``, as a pending pod's would be."""
    if shape.device_class not in snapshot.state.classes:
        return PodClaims(reason=f"DeviceClass {shape.device_class} not found")
    devices: dict[str, Any] = {
        "requests": [
            {
                "name": "req-0",
                "exactly": {
                    "deviceClassName": shape.device_class,
                    "allocationMode": "ExactCount",
                    "count": shape.count,
                },
            }
        ]
    }
    if shape.constraints:
        devices["constraints"] = [dict(c) for c in shape.constraints]
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "make-room-shape", "namespace": "", "uid": "make-room-shape"},
        "spec": {"devices": devices},
    }
    claim = parse_resource_claim(raw)
    return PodClaims(to_allocate=[claim], ordered=[claim])


def _lower_bound(units: Sequence[Unit], deficit: int) -> int | None:
    """The fewest pods whose devices could cover ``deficit`` (None: all of them cannot)."""
    if deficit <= 0:
        return 1
    covered = 0
    pods = 0
    for unit in sorted(units, key=lambda u: -u.devices / len(u.pods)):
        covered += unit.devices
        pods += len(unit.pods)
        if covered >= deficit:
            return pods
    return None


def _stuck_reason(
    snapshot: Snapshot,
    claims: PodClaims,
    node: Node,
    stuck: Mapping[str, set[DeviceID]],
    decision: NodeDecision | None,
) -> str:
    """Why the target does not fit on ``node`` even with every movable pod gone, explain-style:
    of the node's devices the target's requests select, how many pods that may not move hold,
    per reason ("3 of 8 devices held by pods with a higher priority than the target"), or the
    allocator's reason."""
    selected = {d.id for d, _ in snapshot.allocator.matching(node_info(node), claims.to_allocate)}
    if not selected:  # a claim that cannot be prepared here: every device of the node
        selected = {d.id for d in snapshot.inventory.node_devices(node.name, node.labels)}
    counted = {why: len(ids & selected) for why, ids in stuck.items()}
    held = [
        f"{n} of {len(selected)} devices held by pods {why}"
        for why, n in sorted(counted.items(), key=lambda i: (-i[1], i[0]))
        if n
    ]
    if held:
        return "; ".join(held)
    if decision is None:
        return "too few devices even with every movable pod gone"
    return decision.reason or decision.error or "does not fit even with every movable pod gone"


def plan(
    snapshot: Snapshot,
    target: Pod | Shape,
    rules: Rules,
    *,
    now: float,
    clock: Callable[[], float],
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
    targets: Collection[str] | None = None,
) -> Plan | NoPlan:
    """The cheapest plan found that makes room for ``target`` on one node (see the module).

    Nodes are visited by how many devices they lack, fewest first; a node whose lower bound is
    one move is searched at once (a one-move plan ends the search), the others after every
    node was bounded, by bound. So plans are compared on the rest of the objective (devices,
    priorities, fragmentation) only between nodes searched before the fewest moves were found.

    ``now``: the wall-clock time pods' ages are measured at; ``clock``: the clock the time
    budget is measured by; ``targets``: the nodes the target may be placed on (those
    kube-scheduler's own filters passed, as a filter request names them; None: every node),
    while moved pods may go to any node. The snapshot is left as it was."""
    state = snapshot.state
    if isinstance(target, Shape):
        claims, priority, keep = shape_claims(snapshot, target), rules.max_priority, []
    else:
        claims, priority = snapshot.claims_of(target), target.priority
        keep = [c.key for c in claims.ordered]
    if claims.error is not None or claims.reason is not None:
        return NoPlan("impossible", {"": claims.error or claims.reason or ""})
    start = clock()

    def spent() -> bool:
        return clock() - start > rules.budget

    nodes = sorted(state.nodes.values(), key=lambda n: n.name)
    free = {node.name: snapshot.free_devices(node) for node in nodes}
    need = devices_needed(claims)
    if targets is not None:
        nodes = [n for n in nodes if n.name in targets]
    # Nothing to move: it fits somewhere already (never where too few are free).
    fitting = _first_fitting(snapshot, claims, [n for n in nodes if free[n.name] >= need], timeout)
    if fitting is not None:
        decision = snapshot.decide(claims, fitting, timeout=timeout)
        return Plan(fitting.name, (), tuple(device_names(decision)), "none")
    run = _Run(NodeSearch(snapshot, claims, rules, list(state.pdbs.values()), free, timeout), spent)
    later: list[tuple[int, int, str, list[Unit], dict[str, set[DeviceID]]]] = []
    for node in sorted(nodes, key=lambda n: -free[n.name]):  # then by name: the sort is stable
        if run.best is not None and run.best[1].cost[0] == 1:
            break  # one move: no node can do with fewer
        if spent():
            run.cut = True
            run.reasons.setdefault(node.name, run.unsearched())
            continue
        units, stuck = movable_units(snapshot, node.name, priority, rules, now, keep)
        bound = _lower_bound(units, need - free[node.name])
        if bound is None:
            run.reasons[node.name] = _stuck_reason(snapshot, claims, node, stuck, None)
        elif bound == 1 and (run.best is None or run.best[1].cost[0] > 1):
            run.node(node, units, stuck, bound)
        else:
            later.append((bound, -free[node.name], node.name, units, stuck))
    later.sort(key=lambda r: r[:3])
    for bound, _, name, units, stuck in later:
        if run.best is not None and run.best[1].cost[0] <= bound:
            break  # no later node can move fewer pods
        run.node(state.nodes[name], units, stuck, bound)
    if run.best is not None:
        name, found, how = run.best
        return Plan(name, found.moves, found.devices, how)
    return NoPlan("bounds" if run.possible or run.cut else "impossible", run.reasons)


@dataclass
class _Run:
    """One plan's search over nodes: the best found, and why each other node lost."""

    search: NodeSearch
    spent: Callable[[], bool]
    best: tuple[str, Found, Search] | None = None
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    tried: int = 0
    #: Some node fits the target with every movable pod gone (no plan is then "bounds").
    possible: bool = False
    #: A bound stopped the search before every node was judged.
    cut: bool = False

    def unsearched(self) -> str:
        rules = self.search.rules
        return f"not searched (at most {rules.max_nodes} nodes, {rules.budget:g} s)"

    def node(self, node: Node, units: list[Unit], stuck: Mapping[str, set[DeviceID]], bound: int) -> None:
        search, rules, name = self.search, self.search.rules, node.name
        if self.tried >= rules.max_nodes or self.spent():
            self.cut = True
            self.reasons[name] = self.unsearched()
            return
        self.tried += 1
        everything = search.target_fits(node, units)
        if not everything.fits:
            self.reasons[name] = _stuck_reason(search.snapshot, search.claims, node, stuck, everything)
            return
        self.possible = True
        movable = [u for u in units if search.movable_alone(node, u)]
        if len(movable) < len(units) and not search.target_fits(node, movable).fits:
            self.reasons[name] = "the pods that would have to move fit on no other node"
            return
        if bound > rules.max_moves:
            self.reasons[name] = f"needs at least {bound} moves (at most {rules.max_moves})"
            return
        how: Search = "exact" if len(movable) <= rules.exact_up_to else "greedy"
        found = (
            exact(search, node, movable, bound, self.spent)
            if how == "exact"
            else greedy(search, node, movable, self.spent)
        )
        if found is None and self.spent():
            self.cut = True
            self.reasons[name] = self.unsearched()
        elif found is None:
            self.reasons[name] = (
                f"no set of at most {rules.max_moves} moves both frees enough and fits elsewhere"
                if how == "exact"
                else "the greedy choice of pods to move does not fit elsewhere"
            )
        elif self.best is None or found.cost < self.best[1].cost:
            self.best = (name, found, how)


def _first_fitting(
    snapshot: Snapshot, claims: PodClaims, nodes: Sequence[Node], timeout: float | None
) -> Node | None:
    """The first of ``nodes`` the claims fit on as the snapshot is, judged as filter judges:
    look-alike nodes (:meth:`Snapshot.node_groups`) get one answer, so on a snapshot filter
    used, a lookup per node and an allocation per group not judged yet."""
    if not nodes:
        return None
    assess = snapshot.assessor(claims, timeout=timeout)
    groups: Sequence[Hashable] | None = snapshot.node_groups(claims, [n.name for n in nodes])
    if groups is None:
        return next((n for n in nodes if assess(n).fits), None)
    answers: dict[Hashable, bool] = {}
    for node, group in zip(nodes, groups, strict=True):
        fits = answers.get(group)
        if fits is None:
            answer = assess(node)
            fits = answer.fits
            if not answer.timed_out:  # judged again on the next node, as each was before
                answers[group] = fits
        if fits:
            return node
    return None
