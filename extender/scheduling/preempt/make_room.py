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

Pure: a snapshot, a target, rules and clocks in; a :class:`Plan` or :class:`NoPlan` out.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from extender.model.core import Node, Pod
from extender.model.dra import Allocation, parse_allocation, parse_resource_claim
from extender.model.policy import PodDisruptionBudget
from extender.model.reader import Reader
from extender.scheduling.config import Rules
from extender.scheduling.decide import what_if
from extender.scheduling.decide.decision import DEFAULT_NODE_TIMEOUT, Assessment, NodeDecision
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.movable import Unit, movable_units
from extender.scheduling.preempt.nominated import importance
from extender.scheduling.preempt.victims import pdb_violating

__all__ = ["Move", "NoPlan", "Plan", "Rules", "Shape", "plan", "shape_claims"]

Search = Literal["none", "exact", "greedy"]


@dataclass(frozen=True, slots=True)
class Shape:
    """``count`` devices of ``device_class`` on one node (``constraints``: the claim's, raw)."""

    device_class: str
    count: int
    constraints: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Move:
    """One pod moved off the freed node, with the node and devices it would get."""

    pod: str  # namespace/name
    uid: str
    to_node: str
    devices: tuple[str, ...]  # driver/pool/device
    priority: int


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


def _need(claims: PodClaims) -> int:
    """A lower bound on the free devices the claims take (0 where it cannot be told cheaply)."""
    total = 0
    for claim in claims.to_allocate:
        spec = claim.raw.get("spec") or {}
        for request in (spec.get("devices") or {}).get("requests") or []:
            options = [request["exactly"]] if "exactly" in request else request.get("firstAvailable") or []
            total += min((_count(o) for o in options), default=0)
    return total


def _count(request: Mapping[str, Any]) -> int:
    if request.get("adminAccess"):
        return 0
    if request.get("allocationMode", "ExactCount") == "All":
        return 1
    count = request.get("count", 1)
    return count if isinstance(count, int) else 0


# --- The search -------------------------------------------------------------------------------


@dataclass
class _Search:
    snapshot: Snapshot
    claims: PodClaims
    rules: Rules
    pdbs: list[PodDisruptionBudget]
    free: dict[str, int]  # free devices per node, as the snapshot has them
    timeout: float | None
    #: unit uids -> can it move alone (None: unknown yet).
    alone: dict[frozenset[str], bool] = dataclasses.field(default_factory=dict)
    #: unit uids -> its claims judged on a node as the snapshot has it (look-alike nodes share
    #: one answer, as in filter).
    as_is: dict[frozenset[str], Callable[[Node], Assessment]] = dataclasses.field(default_factory=dict)
    #: node name -> whether only its own devices decide what fits there (see :meth:`refused`).
    own: dict[str, bool] = dataclasses.field(default_factory=dict)

    def target_fits(self, node: Node, gone: Sequence[Unit], held: Sequence[Allocation] = ()) -> NodeDecision:
        freed = [a for u in gone for a in u.freed]
        uids = {uid for u in gone for uid in u.uids}
        return what_if.decide(
            self.snapshot, self.claims, node, freed=freed, held=held, gone=uids, timeout=self.timeout
        )

    @functools.cached_property
    def by_free(self) -> list[tuple[int, str]]:
        """(free devices, name) of the nodes with a free device, fewest first: destinations in
        best-fit order, sorted once per plan."""
        return sorted((f, n) for n, f in self.free.items() if f > 0)

    def replace(self, node: Node, units: Sequence[Unit]) -> tuple[list[Move], list[Allocation]] | None:
        """Each unit onto another node, largest first, onto the fullest node it fits (best fit),
        with the earlier moves' devices freed here and held there; None if one fits nowhere."""
        moves: list[Move] = []
        held: list[Allocation] = []
        freed: list[Allocation] = []
        gone: set[str] = set()
        changed: dict[str, int] = {}  # free devices of the nodes earlier moves went to
        for unit in sorted(units, key=lambda u: (-u.devices, importance(u.pods[0]))):
            freed.extend(unit.freed)
            gone.update(unit.uids)
            placed = self._place(node.name, unit, freed, held, gone, changed)
            if placed is None:
                return None
            dest, decision = placed
            allocations = [parse_allocation(Reader(a, "allocation")) for a in decision.allocations.values()]
            held.extend(allocations)
            names = tuple(_device_names(decision))
            changed[dest] = changed.get(dest, self.free.get(dest, 0)) - len(names)
            moves.extend(
                Move(f"{p.namespace}/{p.name}", p.uid, dest, names, p.priority)
                for p in sorted(unit.pods, key=importance)
            )
        return moves, held

    def _place(
        self,
        source: str,
        unit: Unit,
        freed: Sequence[Allocation],
        held: Sequence[Allocation],
        gone: set[str],
        changed: Mapping[str, int],
    ) -> tuple[str, NodeDecision] | None:
        """The first of the fullest nodes (at most ``max_destinations``, by free devices then
        name, ``changed`` overriding the snapshot's counts) where ``unit`` fits."""
        need = max(_need(unit.claims), 1)
        state = self.snapshot.state
        ids = [d for a in (*freed, *held) for d in (*a.exclusive, *(r.id for r in a.shares))]
        touched = self.snapshot.inventory.nodes_of(ids)  # None: a device other nodes may see
        touched = None if touched is None else touched | {source, *changed}
        by_free = self.by_free
        unchanged = (
            item
            for item in itertools.islice(by_free, bisect.bisect_left(by_free, (need,)), None)
            if item[1] != source and item[1] not in changed
        )
        moved = sorted((f, n) for n, f in changed.items() if f >= need and n != source)
        order = heapq.merge(unchanged, moved)
        for _, name in itertools.islice(order, self.rules.max_destinations):
            node = state.nodes.get(name)
            if node is None:
                continue
            if touched is not None and name not in touched and self.refused(unit, node):
                continue  # the moves so far change nothing there: it would refuse the unit as it is
            decision = what_if.decide(
                self.snapshot, unit.claims, node, freed=freed, held=held, gone=gone, timeout=self.timeout
            )
            if decision.fits:
                return name, decision
        return None

    def refused(self, unit: Unit, node: Node) -> bool:
        """Whether ``unit`` does not fit on ``node`` as the snapshot has it (no time-out), judged
        as filter judges (one allocation per look-alike node). Only where the node's own devices
        decide it: never with pools other nodes' devices complete or share counters with, which
        the caller's moves could change without touching the node's devices."""
        own = self.own.get(node.name)
        if own is None:
            inventory = self.snapshot.inventory
            pools = inventory.pools_for(node.name, node.labels)
            own = self.own[node.name] = inventory.gather_error(node.name, node.labels) is None and not any(
                p.incomplete or any(s.shared_counters for s in p.all_slices) for p in pools
            )
        if not own:
            return False
        assess = self.as_is.get(unit.uids)
        if assess is None:
            assess = self.as_is[unit.uids] = self.snapshot.assessor(unit.claims, timeout=self.timeout)
        answer = assess(node)
        return not answer.fits and not answer.timed_out

    def movable_alone(self, node: Node, unit: Unit) -> bool:
        found = self.alone.get(unit.uids)
        if found is None:
            found = self.alone[unit.uids] = self.replace(node, [unit]) is not None
        return found

    def within_budgets(self, units: Iterable[Unit]) -> bool:
        pods = sorted((p for u in units for p in u.pods), key=importance)
        return not pdb_violating(pods, self.pdbs)


@dataclass(frozen=True, slots=True)
class _Found:
    cost: tuple[int, int, int, int, int]
    moves: tuple[Move, ...]
    devices: tuple[str, ...]


def _cost(units: Sequence[Unit]) -> tuple[int, int, int, int]:
    pods = [p for u in units for p in u.pods]
    return (
        len(pods),
        sum(u.devices for u in units),
        max((p.priority for p in pods), default=0),
        sum(p.priority for p in pods),
    )


def _device_names(decision: NodeDecision) -> list[str]:
    return [
        f"{r['driver']}/{r['pool']}/{r['device']}"
        for a in decision.allocations.values()
        for r in a.get("devices", {}).get("results", [])
    ]


def _fragments(search: _Search, node: str, units: Sequence[Unit], moves: Sequence[Move], placed: int) -> int:
    """How many nodes the plan touches are left partly free (fewer is better)."""
    delta = {node: sum(u.devices for u in units) - placed}
    for move in moves:
        delta[move.to_node] = delta.get(move.to_node, 0) - len(move.devices)
    return sum(1 for n, d in delta.items() if search.free.get(n, 0) + d > 0)


def _try(search: _Search, node: Node, units: Sequence[Unit]) -> _Found | None:
    """The plan moving ``units`` off ``node``, if every step checks."""
    if not search.within_budgets(units):
        return None
    if not search.target_fits(node, units).fits:
        return None
    replaced = search.replace(node, units)
    if replaced is None:
        return None
    moves, held = replaced
    final = search.target_fits(node, units, held)  # the target last, every move made
    if not final.fits:
        return None
    devices = tuple(_device_names(final))
    cost = (*_cost(units), _fragments(search, node.name, units, moves, len(devices)))
    return _Found(cost, tuple(moves), devices)


def _exact(
    search: _Search, node: Node, units: list[Unit], bound: int, deadline: Callable[[], bool]
) -> _Found | None:
    """The cheapest plan over all subsets of ``units`` with at most ``max_moves`` pods."""
    subsets = [
        combo
        for k in range(1, len(units) + 1)
        for combo in itertools.combinations(units, k)
        if bound <= sum(len(u.pods) for u in combo) <= search.rules.max_moves
    ]
    subsets.sort(key=lambda c: (_cost(c), [p.name for u in c for p in u.pods]))
    best: _Found | None = None
    for combo in subsets:
        if best is not None and _cost(combo) > best.cost[:4]:
            break  # only ties (on fragmentation) are left to beat it
        if deadline():
            break
        found = _try(search, node, combo)
        if found is not None and (best is None or found.cost < best.cost):
            best = found
    return best


def _greedy(search: _Search, node: Node, units: list[Unit], deadline: Callable[[], bool]) -> _Found | None:
    """Upstream's reprieve: all units gone, then each put back, PDB-protected ones first and
    most important first, if the target still fits without it."""
    ordered = sorted(units, key=lambda u: importance(max(u.pods, key=lambda p: p.priority)))
    pods = sorted((p for u in ordered for p in u.pods), key=importance)
    violating = pdb_violating(pods, search.pdbs)
    ordered.sort(key=lambda u: not (u.uids & violating))
    gone = list(ordered)
    for unit in ordered:
        if deadline():
            return None
        trial = [u for u in gone if u is not unit]
        if search.target_fits(node, trial).fits:
            gone = trial
    if sum(len(u.pods) for u in gone) > search.rules.max_moves:
        return None
    return _try(search, node, gone)


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
    snapshot: Snapshot, node: Node, stuck: Mapping[str, int], decision: NodeDecision | None
) -> str:
    """Why the target does not fit on ``node`` even with every movable pod gone, explain-style:
    the devices held by pods that may not move, per reason, or the allocator's reason."""
    total = len(snapshot.inventory.node_devices(node.name, node.labels))
    held = [
        f"{n} of {total} devices held by pods {why}" for why, n in sorted(stuck.items(), key=lambda i: -i[1])
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
) -> Plan | NoPlan:
    """The cheapest plan found that makes room for ``target`` on one node (see the module).

    Nodes are visited by how many devices they lack, fewest first; a node whose lower bound is
    one move is searched at once (a one-move plan ends the search), the others after every
    node was bounded, by bound. So plans are compared on the rest of the objective (devices,
    priorities, fragmentation) only between nodes searched before the fewest moves were found.

    ``now``: the wall-clock time pods' ages are measured at; ``clock``: the clock the time
    budget is measured by. The snapshot is left as it was."""
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
    need = _need(claims)
    # Nothing to move: it fits somewhere already (never where too few are free).
    fitting = _first_fitting(snapshot, claims, [n for n in nodes if free[n.name] >= need], timeout)
    if fitting is not None:
        decision = snapshot.decide(claims, fitting, timeout=timeout)
        return Plan(fitting.name, (), tuple(_device_names(decision)), "none")
    run = _Run(_Search(snapshot, claims, rules, list(state.pdbs.values()), free, timeout), spent)
    later: list[tuple[int, int, str, list[Unit], dict[str, int]]] = []
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
            run.reasons[node.name] = _stuck_reason(snapshot, node, stuck, None)
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

    search: _Search
    spent: Callable[[], bool]
    best: tuple[str, _Found, Search] | None = None
    reasons: dict[str, str] = dataclasses.field(default_factory=dict)
    tried: int = 0
    #: Some node fits the target with every movable pod gone (no plan is then "bounds").
    possible: bool = False
    #: A bound stopped the search before every node was judged.
    cut: bool = False

    def unsearched(self) -> str:
        rules = self.search.rules
        return f"not searched (at most {rules.max_nodes} nodes, {rules.budget:g} s)"

    def node(self, node: Node, units: list[Unit], stuck: Mapping[str, int], bound: int) -> None:
        search, rules, name = self.search, self.search.rules, node.name
        if self.tried >= rules.max_nodes or self.spent():
            self.cut = True
            self.reasons[name] = self.unsearched()
            return
        self.tried += 1
        everything = search.target_fits(node, units)
        if not everything.fits:
            self.reasons[name] = _stuck_reason(search.snapshot, node, stuck, everything)
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
            _exact(search, node, movable, bound, self.spent)
            if how == "exact"
            else _greedy(search, node, movable, self.spent)
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
