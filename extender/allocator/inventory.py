"""The published devices, indexed for allocation, and the pools a node can see.

An :class:`Inventory` is immutable once built (from one snapshot of slices, classes and taint
rules) and shared by every allocation on every node; what a node sees is computed once per
node and cached. A slice change makes a new inventory with :meth:`Inventory.updated`, which
indexes again only the pools the change touches and shares everything else, including what
the nodes that cannot see those pools were found to see.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from extender.allocator.features import Features
from extender.model.dra import Device, DeviceClass, DeviceID, ResourceSlice, Taint
from extender.model.nodeselector import NodeSelector, NodeSelectorError
from extender.model.taint_rules import DeviceTaintRule

PoolID = tuple[str, str]  # (driver, pool name)
#: Bound on cached node signatures per inventory (node x labels x projection).
MAX_CACHED_SIGNATURES = 200_000
#: Interned node contents kept beyond twice those in use, counted in devices (see _Contents).
CONTENTS_SLACK = 200_000
_MISSING = object()
#: Signature ids, for every inventory of the process: an id names one content forever, so
#: inventories updated from one another can share per-node signatures and memo keys.
_SIGNATURE_IDS = itertools.count()
_SERIALS = itertools.count()


def label_key(labels: Mapping[str, str]) -> Hashable:
    """A hashable form of node labels (:class:`~extender.model.labels.Labels` carry it precomputed)."""
    cached = getattr(labels, "label_key", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    return tuple(sorted(labels.items()))


class Projection(Protocol):
    """Reduces a device to what some claims can observe of it (see :meth:`Inventory.node_signature`)."""

    @property
    def key(self) -> Hashable: ...

    def of(self, device: Device) -> Hashable: ...


@dataclass(slots=True)
class Pool:
    """One pool as seen from one node (upstream ``structured.Pool``)."""

    id: PoolID
    #: Node-relevant slices of the kept generation, sorted by name (devices in slice order).
    slices: list[ResourceSlice]
    #: Every slice of the pool with the kept generation, on any node (counters, validation).
    all_slices: list[ResourceSlice]
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    #: Any device of the pool has binding conditions (such pools are searched last).
    has_binding_conditions: bool = False

    def __str__(self) -> str:
        return f"{self.id[0]}/{self.id[1]}"


@dataclass(slots=True)
class _PoolIndex:
    slices: list[ResourceSlice] = field(default_factory=list)
    #: generation -> number of slices published with it.
    counts: dict[int, int] = field(default_factory=dict)

    def add(self, s: ResourceSlice) -> None:
        self.slices.append(s)
        self.counts[s.generation] = self.counts.get(s.generation, 0) + 1


@dataclass(slots=True)
class _NodeView:
    """What one node sees, per label key: filled on first use, and shared by the inventories
    updated from one another as long as no pool the node can see changes."""

    pools: dict[Hashable, list[Pool]] = field(default_factory=dict)
    #: label key -> why gathering pools failed (a node selector that does not parse).
    errors: dict[Hashable, str] = field(default_factory=dict)
    #: (label key, projection key) -> signature id.
    signatures: dict[tuple[Hashable, Hashable], int | None] = field(default_factory=dict)
    #: label key -> each device's position in the node's search order (see device_positions).
    positions: dict[Hashable, dict[DeviceID, int] | None] = field(default_factory=dict)


class _Contents:
    """Node contents (see :meth:`Inventory.node_signature`) interned to signature ids.

    Shared by inventories updated from one another, so a node whose content did not change
    keeps its id (and its memoized answers) across a slice change. Contents of nodes that no
    inventory caches any more are dropped when they outweigh those in use (:meth:`pruned`).
    """

    __slots__ = ("ids", "limit", "weight")

    def __init__(self) -> None:
        self.ids: dict[tuple[Any, ...], int] = {}
        #: Devices named by the contents, and how many before pruning is due.
        self.weight = 0
        self.limit = CONTENTS_SLACK

    def intern(self, content: tuple[Any, ...]) -> int:
        found = self.ids.get(content)
        if found is None:
            found = self.ids[content] = next(_SIGNATURE_IDS)
            self.weight += _weight(content)
        return found

    def clear(self) -> None:
        self.ids.clear()
        self.weight = 0

    def pruned(self, live: set[int]) -> _Contents:
        out = _Contents()
        out.ids = {content: i for content, i in self.ids.items() if i in live}
        out.weight = sum(_weight(content) for content in out.ids)
        out.limit = 2 * out.weight + CONTENTS_SLACK
        return out


def _weight(content: tuple[Any, ...]) -> int:
    return sum(len(pool[3]) for pool in content)


def _node_local(s: ResourceSlice) -> bool:
    """Whether only the node named by the slice can see it."""
    return s.node_name is not None and not s.per_device_node_selection


class Inventory:
    """Slices, classes and taint rules of one snapshot, indexed by node and pool."""

    def __init__(
        self,
        slices: Iterable[ResourceSlice],
        classes: Mapping[str, DeviceClass],
        features: Features,
        taint_rules: Iterable[DeviceTaintRule] = (),
    ) -> None:
        self.features = features
        self.classes = dict(classes)
        self.taint_rules = tuple(taint_rules) if features.device_taint_rules else ()
        #: Slices by name (names are unique, as in the API).
        self._by_name: dict[str, ResourceSlice] = {}
        self._by_node: dict[str, list[ResourceSlice]] = {}
        self._floating: list[ResourceSlice] = []
        self._pools: dict[PoolID, _PoolIndex] = {}
        for s in slices:
            if self._ignored(s):
                continue
            self._by_name[s.name] = s
            if s.node_name is not None and _node_local(s):
                self._by_node.setdefault(s.node_name, []).append(s)
            else:
                self._floating.append(s)
            index = self._pools.get((s.driver, s.pool))
            if index is None:
                index = self._pools[(s.driver, s.pool)] = _PoolIndex()
            index.add(s)
        # In name order: the first slice whose node selector fails names the error, whatever
        # order slices came in.
        self._floating.sort(key=lambda s: s.name)
        self._views: dict[str, _NodeView] = {}
        #: Pool -> device -> the one node it is local to (filled per pool on first use);
        #: devices missing there may matter to many nodes.
        self._local_node: dict[PoolID, dict[DeviceID, str | None]] = {}
        self._contents = _Contents()
        #: Signatures cached in this inventory's node views (bounded by MAX_CACHED_SIGNATURES).
        self._cached_signatures = 0
        #: Device -> its taints and those the rules add; device -> the last projection of it
        #: (key, signature entry). Keyed by the record (the same object for an unchanged device), so
        #: inventories updated from one another share them; bounded by starting afresh.
        self._taints: dict[Device, tuple[Taint, ...]] = {}
        self._projected: dict[Device, tuple[Hashable, tuple[Hashable, tuple[Taint, ...], bool]]] = {}
        self._device_total = sum(len(s.devices) for s in self._by_name.values())
        #: Which inventory this one was updated from (its serial), and the nodes that may see
        #: something different in this one (None: any node).
        self._serial = next(_SERIALS)
        self._base: int | None = None
        self._moved: frozenset[str] | None = None

    def _ignored(self, s: ResourceSlice) -> bool:
        """1.37 GatherPools with DRADeviceCompatibilityGroups off: a slice whose devices name
        compatibility groups is left out (this allocator cannot enforce them), so its pool is
        incomplete and none of its devices are allocated."""
        features = self.features
        return (
            features.since_1_37 and not features.device_compatibility_groups and s.uses_compatibility_groups
        )

    # --- lookups -----------------------------------------------------------------------------

    def devices_of_pool(self, pool: Pool) -> Iterable[Device]:
        """Every device of the pool at its kept generation, on any node."""
        for s in pool.all_slices:
            yield from s.devices

    def device_count(self) -> int:
        return sum(len(s.devices) for index in self._pools.values() for s in index.slices)

    def slices(self) -> Iterable[ResourceSlice]:
        for index in self._pools.values():
            yield from index.slices

    def nodes_of(self, devices: Iterable[DeviceID]) -> set[str] | None:
        """The nodes these devices are local to; None if any may be visible to several nodes."""
        out = set()
        for device in devices:
            node = self._local_nodes((device.driver, device.pool)).get(device)
            if node is None:
                return None
            out.add(node)
        return out

    def _local_nodes(self, pid: PoolID) -> dict[DeviceID, str | None]:
        """The node each device of the pool is local to; None for a device any node may see,
        or one whose id is published more than once (a duplicate name) not for one node."""
        found = self._local_node.get(pid)
        if found is None:
            found = self._local_node[pid] = {}
            index = self._pools.get(pid)
            for s in index.slices if index is not None else ():
                for d in s.devices:
                    node = d.node_name if s.per_device_node_selection else s.node_name
                    found[d.id] = node if node is not None and found.get(d.id, node) == node else None
        return found

    def taints(self, device: Device) -> tuple[Taint, ...]:
        """The device's taints plus those DeviceTaintRules add (driver/pool/device selection)."""
        if not self.taint_rules:
            return device.taints
        cached = self._taints.get(device)
        if cached is None:
            added = tuple(rule.taint for rule in self.taint_rules if rule.selects(device))
            cached = self._taints[device] = device.taints + added
        return cached

    # --- updates ---------------------------------------------------------------------------------

    def updated(self, changes: Mapping[str, ResourceSlice | None]) -> Inventory:
        """This inventory with slices replaced or added (by name) or removed (``None``).

        Only the pools the changed slices belong to (before or after) are indexed again; the
        other pools' indexes and what nodes that cannot see a changed pool were found to see
        are shared. Nodes see a pool through its slices: a node-local slice shows it to its
        node, any other slice (node selector, all nodes, per-device node selection, counters
        only) to every node, so such a change starts the per-node caches afresh. This
        inventory is left as it was (snapshots in use hold it). Classes and taint rules are
        this inventory's: when they change, build a new one.
        """
        removed: list[ResourceSlice] = []
        added: list[ResourceSlice] = []
        for name, record in changes.items():
            if record is not None and self._ignored(record):
                record = None  # as if deleted: its pool is incomplete now
            old = self._by_name.get(name)
            if old is record:
                continue
            if old is not None:
                removed.append(old)
            if record is not None:
                added.append(record)
        if not removed and not added:
            return self
        new = copy.copy(self)  # shares everything; what changes is replaced below, never mutated
        new._serial, new._base = next(_SERIALS), self._serial
        gone = set(removed)
        by_name = dict(self._by_name)
        for s in removed:
            del by_name[s.name]
        for s in added:
            by_name[s.name] = s
        new._by_name = by_name

        by_node = dict(self._by_node)
        floating = False
        for s in removed:
            if _node_local(s):
                assert s.node_name is not None
                rest = [x for x in by_node[s.node_name] if x is not s]
                if rest:
                    by_node[s.node_name] = rest
                else:
                    del by_node[s.node_name]
            else:
                floating = True
        for s in added:
            if _node_local(s):
                assert s.node_name is not None
                by_node[s.node_name] = [*by_node.get(s.node_name, ()), s]
            else:
                floating = True
        new._by_node = by_node
        if floating:
            floating_now = [s for s in self._floating if s not in gone]
            floating_now += [s for s in added if not _node_local(s)]
            new._floating = sorted(floating_now, key=lambda s: s.name)

        touched = {(s.driver, s.pool) for s in (*removed, *added)}
        pools = dict(self._pools)
        moved: set[str] | None = set()
        for pid in touched:
            before = self._pools.get(pid)
            index = _PoolIndex()
            for s in before.slices if before is not None else ():
                if s not in gone:
                    index.add(s)
            for s in added:
                if (s.driver, s.pool) == pid:
                    index.add(s)
            if index.slices:
                pools[pid] = index
            else:
                pools.pop(pid, None)
            # Who can see the pool, before or after: it depends on all its slices (counts,
            # generations, counters), so every node that sees any of them.
            for s in (*(before.slices if before is not None else ()), *index.slices):
                if moved is None:
                    break
                if _node_local(s):
                    assert s.node_name is not None
                    moved.add(s.node_name)
                else:
                    moved = None
        new._pools = pools
        local_node = dict(self._local_node)
        for pid in touched:
            local_node.pop(pid, None)
        new._local_node = local_node

        if moved is None:
            new._views = {}
        else:
            views = dict(self._views)
            for name in moved:
                views.pop(name, None)
            new._views = views
        new._moved = None if moved is None else frozenset(moved)
        new._cached_signatures = sum(len(v.signatures) for v in new._views.values())
        if self._contents.weight > self._contents.limit:
            # Keep the contents any node of either inventory was found to have.
            live = {i for v in self._views.values() for i in v.signatures.values() if i is not None}
            new._contents = self._contents.pruned(live)
        new._device_total += sum(len(s.devices) for s in added) - sum(len(s.devices) for s in removed)
        # Records of devices that left stay in the shared per-device caches until they outgrow
        # the devices there are (a fresh cache is refilled on demand).
        bound = 2 * new._device_total + 10_000
        if len(self._taints) > bound:
            new._taints = {}
        if len(self._projected) > bound:
            new._projected = {}
        return new

    def nodes_changed_since(self, other: Inventory) -> frozenset[str] | None:
        """The nodes that may see something different here than in ``other`` (what
        :meth:`pools_for`, :meth:`node_signature` and :meth:`node_devices` answer): none if
        ``other`` is this inventory, those a slice change touched if this one was updated from
        ``other``; None (any node) otherwise."""
        if other is self:
            return frozenset()
        if self._base is not None and self._base == other._serial:
            return self._moved
        return None

    # --- pools of a node -------------------------------------------------------------------------

    def _view(self, node_name: str) -> _NodeView:
        view = self._views.get(node_name)
        if view is None:
            view = self._views[node_name] = _NodeView()
        return view

    def pools_for(self, node_name: str, labels: Mapping[str, str]) -> list[Pool]:
        """The pools ``node`` can allocate from, in search order (cached per node)."""
        view = self._view(node_name)
        key = label_key(labels)
        pools = view.pools.get(key)
        if pools is None:
            try:
                pools = self._gather(node_name, labels)
            except NodeSelectorError as exc:
                view.errors[key] = str(exc)
                pools = []
            view.pools[key] = pools
        return pools

    def gather_error(self, node_name: str, labels: Mapping[str, str]) -> str | None:
        """Why upstream's GatherPools fails for this node (a node selector that does not parse).

        Read after :meth:`pools_for` for the node; free when no node has such an error.
        """
        view = self._views.get(node_name)
        if view is None or not view.errors:
            return None
        return view.errors.get(label_key(labels))

    def node_signature(self, node_name: str, labels: Mapping[str, str], projection: Projection) -> int | None:
        """What allocation of some claims on this node depends on, without device names.

        ``projection`` reduces each device to what the claims can observe (the attributes their
        selectors and constraints read, taints, capacity ...), so nodes with equal signatures
        (and equal devices in use) get the same answer for those claims and one allocation
        serves them all. ``None`` when that does not hold: pools with shared counters depend on
        devices of other nodes, and incomplete pools name themselves in the answer.
        """
        view = self._view(node_name)
        key = (label_key(labels), projection.key)
        found = view.signatures.get(key, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        signature: int | None = None
        pools = self.pools_for(node_name, labels)
        if self.gather_error(node_name, labels) is not None:
            return self._remember_signature(view, key, None)  # allocation fails with this node's error
        if not any(p.incomplete or any(s.shared_counters for s in p.all_slices) for p in pools):
            try:
                content = tuple(
                    (
                        p.id[0],
                        p.invalid,
                        p.has_binding_conditions,
                        # Devices of slices that skip node operations are refused on some nodes.
                        tuple((len(s.devices), bool(s.skip_node_operations)) for s in p.slices),
                        tuple(self._device_entries(p, node_name, labels, projection)),
                    )
                    for p in pools
                )
            except NodeSelectorError:
                return self._remember_signature(view, key, None)  # evaluating it is an error: no sharing
            # Interned: equal contents get one int, cheap to hash in memo keys.
            signature = self._contents.intern(content)
        return self._remember_signature(view, key, signature)

    def _device_entries(
        self, pool: Pool, node_name: str, labels: Mapping[str, str], projection: Projection
    ) -> list[tuple[Hashable, tuple[Taint, ...], bool]]:
        """Per device of the node's part of ``pool``: what the projection sees, its taints, and
        (per-device node selection) whether it is on this node.

        Kept per device record for the last projection: a node that sees a changed pool gets
        its signature again, and most devices of a changed pool are the same records.
        """
        projected, projection_key = self._projected, projection.key
        out = []
        for s in pool.slices:
            per_device = bool(s.per_device_node_selection)
            for d in s.devices:
                found = projected.get(d)
                if found is None or found[0] != projection_key:
                    found = projected[d] = (projection_key, (projection.of(d), self.taints(d), False))
                entry = found[1]
                if per_device and device_on_node(d, node_name, labels):
                    entry = (entry[0], entry[1], True)
                out.append(entry)
        return out

    def _remember_signature(
        self, view: _NodeView, key: tuple[Hashable, Hashable], signature: int | None
    ) -> int | None:
        if self._cached_signatures > MAX_CACHED_SIGNATURES:
            # Bounded: rebuilt on demand, under fresh ids (ids are never given out twice).
            for v in self._views.values():
                v.signatures.clear()
            self._contents.clear()
            self._cached_signatures = 0
        view.signatures[key] = signature
        self._cached_signatures += 1
        return signature

    def node_devices(self, node_name: str, labels: Mapping[str, str]) -> list[Device]:
        """The devices of the node's usable pools, in search order."""
        return [d for p in self.pools_for(node_name, labels) for s in p.slices for d in s.devices]

    def device_positions(self, node_name: str, labels: Mapping[str, str]) -> dict[DeviceID, int] | None:
        """Device id -> its position in :meth:`node_devices` (cached per node); None when an id
        is listed twice (an invalid pool: no position stands for the id)."""
        view = self._view(node_name)
        key = label_key(labels)
        positions = view.positions.get(key, _MISSING)
        if positions is _MISSING:
            ids = [d.id for d in self.node_devices(node_name, labels)]
            found = dict(zip(ids, range(len(ids)), strict=True))
            positions = view.positions[key] = found if len(found) == len(ids) else None
        return positions  # type: ignore[return-value]

    def _relevant(self, s: ResourceSlice, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.features.partitionable_devices and (
            s.per_device_node_selection is not None or s.shared_counters
        ):
            return False
        if s.node_name is not None and not s.per_device_node_selection:
            return s.node_name == node_name
        if s.all_nodes:
            return True
        if s.node_selector is not None:
            try:
                return node_matches(s.node_selector, node_name, labels)
            except NodeSelectorError as exc:
                where = f"failed to perform node selection for slice {s.name}"
                raise NodeSelectorError(f"{where}: {exc}") from None
        if s.per_device_node_selection:
            for d in s.devices:  # until the first match, as upstream GatherPools
                try:
                    if device_on_node(d, node_name, labels):
                        return True
                except NodeSelectorError as exc:
                    raise NodeSelectorError(
                        f"failed to perform node selection for device {d.name} in slice {s.name}: {exc}"
                    ) from None
            return False
        # No node selection at all: only counter-set slices, which belong to the whole pool.
        return bool(s.shared_counters)

    def _gather(self, node_name: str, labels: Mapping[str, str]) -> list[Pool]:
        kept: dict[PoolID, list[ResourceSlice]] = {}
        for s in [*self._by_node.get(node_name, ()), *self._floating]:
            if not self._relevant(s, node_name, labels):
                continue
            pid = (s.driver, s.pool)
            current = kept.get(pid)
            if current is None or s.generation > current[0].generation:
                kept[pid] = [s]
            elif s.generation == current[0].generation:
                current.append(s)
        pools = []
        for pid, relevant in kept.items():
            # By name: slices that disagree on resourceSliceCount are read the same way whatever
            # order they were published or updated in (upstream takes the first it lists).
            relevant.sort(key=lambda s: s.name)
            generation = relevant[0].generation
            index = self._pools[pid]
            expected = relevant[0].resource_slice_count
            incomplete = False
            if len(relevant) != expected:
                if any(g > generation for g in index.counts):
                    continue  # the node-local view is obsolete: a newer generation exists elsewhere
                incomplete = index.counts[generation] != expected
            all_slices = sorted((s for s in index.slices if s.generation == generation), key=lambda s: s.name)
            pool = Pool(
                id=pid,
                slices=relevant,
                all_slices=all_slices,
                incomplete=incomplete,
            )
            if not pool.incomplete:
                self._validate(pool)
            # Upstream poolHasBindingConditions: only the slices that target this node count.
            pool.has_binding_conditions = any(
                d.has_binding_conditions for s in pool.slices for d in s.devices
            )
            pools.append(pool)
        pools.sort(key=lambda p: (p.has_binding_conditions, p.id))
        return pools

    def _validate(self, pool: Pool) -> None:
        all_names = [d.id.device for s in pool.slices for d in s.devices]
        if len(set(all_names)) != len(all_names):
            names: set[str] = set()
            for name in all_names:
                if name in names:
                    pool.invalid, pool.invalid_reason = True, f"duplicate device name {name}"
                    return
                names.add(name)
        if not self.features.partitionable_devices:
            return
        counter_sets: dict[str, set[str]] = {}
        for s in pool.all_slices:
            for cs in s.shared_counters:
                if cs.name in counter_sets:
                    pool.invalid, pool.invalid_reason = True, f"duplicate counter set name {cs.name}"
                    return
                counter_sets[cs.name] = set(cs.counters)
        for s in pool.all_slices:
            for d in s.devices:
                for consumption in d.consumes_counters:
                    known = counter_sets.get(consumption.counter_set)
                    if known is None:
                        pool.invalid = True
                        pool.invalid_reason = (
                            f"device {d.name} consumes counters of unknown set {consumption.counter_set}"
                        )
                        return
                    unknown = sorted(set(consumption.counters) - known)
                    if unknown:
                        pool.invalid = True
                        pool.invalid_reason = (
                            f"device {d.name} consumes unknown counter {unknown[0]} "
                            f"of set {consumption.counter_set}"
                        )
                        return


def device_on_node(device: Device, node_name: str, labels: Mapping[str, str]) -> bool:
    """Per-device node selection (perDeviceNodeSelection slices)."""
    if device.node_name is not None:
        return device.node_name == node_name
    if device.all_nodes:
        return True
    if device.node_selector is not None:
        return node_matches(device.node_selector, node_name, labels)
    return False


def node_matches(selector: NodeSelector, node_name: str, labels: Mapping[str, str]) -> bool:
    """Upstream NodeMatches for a selector: its error names the selector, as upstream's does."""
    try:
        return selector.matches(node_name, labels)
    except NodeSelectorError as exc:
        raise NodeSelectorError(f"failed to parse node selector {selector.describe()}: {exc}") from None
