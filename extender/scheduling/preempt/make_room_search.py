"""Make room's search on one node (:mod:`extender.scheduling.preempt.make_room`): which of its
movable pods to move (every subset up to a bound, cheapest first, or upstream's reprieve), and
where each goes (best fit, after every earlier move, through the allocator filter uses, on a
node whose own constraints admit it), with the cost a plan is ranked by.

Pure: a snapshot, the target's claims, the rules and a deadline in; a found plan or None out.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import heapq
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from extender.model.core import Node, Pod
from extender.model.dra import Allocation, parse_allocation
from extender.model.policy import PodDisruptionBudget
from extender.model.reader import Reader
from extender.scheduling.config import Rules
from extender.scheduling.decide import what_if
from extender.scheduling.decide.decision import Assessment, NodeDecision
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.movable import Unit
from extender.scheduling.preempt.node_fit import NodeSide, PodSide, meet, node_side, pod_side
from extender.scheduling.preempt.nominated import importance
from extender.scheduling.preempt.victims import pdb_violating

Search = Literal["none", "exact", "greedy"]
#: Destinations looked at per one tried with an allocation (see :meth:`NodeSearch._place`).
SCANNED_PER_TRIED = 16
#: A node nothing is held against, and a pod that asks nothing of nodes.
UNTAINTED = NodeSide()
ANYWHERE = PodSide()


@dataclass(frozen=True, slots=True)
class Move:
    """One pod moved off the freed node, with the node and devices it would get."""

    pod: str  # namespace/name
    uid: str
    to_node: str
    devices: tuple[str, ...]  # driver/pool/device
    priority: int


def devices_needed(claims: PodClaims) -> int:
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
class NodeSearch:
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
    #: What each node holds against pods and what each moved pod asks of nodes, read once.
    node_sides: dict[str, NodeSide] = dataclasses.field(default_factory=dict)
    pod_sides: dict[str, PodSide] = dataclasses.field(default_factory=dict)

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
            names = tuple(device_names(decision))
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
        """The first of the fullest nodes (by free devices then name, ``changed`` overriding the
        snapshot's counts) where ``unit`` fits. At most ``max_destinations`` are tried with an
        allocation; nodes skipped without one (their own constraints refuse a pod of the unit,
        or their devices as they are refuse it) do not count, up to :data:`SCANNED_PER_TRIED`
        times as many looked at: a node whose free devices the unit's requests do not select
        (a NIC, another class) never uses up a try."""
        need = max(devices_needed(unit.claims), 1)
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
        tries = self.rules.max_destinations
        for _, name in itertools.islice(order, tries * SCANNED_PER_TRIED):
            node = state.nodes.get(name)
            if node is None:
                continue
            if touched is not None and name not in touched and self.refused(unit, node):
                continue  # the moves so far change nothing there: it would refuse the unit as it is
            if self.unfit(unit, node):
                continue
            if tries == 0:
                break
            tries -= 1
            decision = what_if.decide(
                self.snapshot, unit.claims, node, freed=freed, held=held, gone=gone, timeout=self.timeout
            )
            if decision.fits:
                return name, decision
        return None

    def unfit(self, unit: Unit, node: Node) -> bool:
        """Whether the node's own constraints (cordon, node selector and affinity, taints)
        refuse a pod of ``unit``: its replacement could never be scheduled there."""
        sides = self.node_sides.get(node.name)
        if sides is None:
            sides = self.node_sides[node.name] = node_side(node)
        if sides == UNTAINTED and all(self._pod_side(p) == ANYWHERE for p in unit.pods):
            return False  # nothing on either side to check (most pods, most nodes)
        return any(meet(self._pod_side(p), sides, node) is not None for p in unit.pods)

    def _pod_side(self, pod: Pod) -> PodSide:
        side = self.pod_sides.get(pod.uid)
        if side is None:
            side = self.pod_sides[pod.uid] = pod_side(pod)
        return side

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
class Found:
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


def device_names(decision: NodeDecision) -> list[str]:
    return [
        f"{r['driver']}/{r['pool']}/{r['device']}"
        for a in decision.allocations.values()
        for r in a.get("devices", {}).get("results", [])
    ]


def _fragments(
    search: NodeSearch, node: str, units: Sequence[Unit], moves: Sequence[Move], placed: int
) -> int:
    """How many nodes the plan touches are left partly free (fewer is better)."""
    delta = {node: sum(u.devices for u in units) - placed}
    for move in moves:
        delta[move.to_node] = delta.get(move.to_node, 0) - len(move.devices)
    return sum(1 for n, d in delta.items() if search.free.get(n, 0) + d > 0)


def attempt(search: NodeSearch, node: Node, units: Sequence[Unit]) -> Found | None:
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
    devices = tuple(device_names(final))
    cost = (*_cost(units), _fragments(search, node.name, units, moves, len(devices)))
    return Found(cost, tuple(moves), devices)


def exact(
    search: NodeSearch, node: Node, units: list[Unit], bound: int, deadline: Callable[[], bool]
) -> Found | None:
    """The cheapest plan over all subsets of ``units`` with at most ``max_moves`` pods."""
    subsets = [
        combo
        for k in range(1, len(units) + 1)
        for combo in itertools.combinations(units, k)
        if bound <= sum(len(u.pods) for u in combo) <= search.rules.max_moves
    ]
    subsets.sort(key=lambda c: (_cost(c), [p.name for u in c for p in u.pods]))
    best: Found | None = None
    for combo in subsets:
        if best is not None and _cost(combo) > best.cost[:4]:
            break  # only ties (on fragmentation) are left to beat it
        if deadline():
            break
        found = attempt(search, node, combo)
        if found is not None and (best is None or found.cost < best.cost):
            best = found
    return best


def greedy(search: NodeSearch, node: Node, units: list[Unit], deadline: Callable[[], bool]) -> Found | None:
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
    return attempt(search, node, gone)
