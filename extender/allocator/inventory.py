"""The published devices, indexed for allocation, and the pools a node can see.

An :class:`Inventory` is immutable once built (from one snapshot of slices, classes and taint
rules) and shared by every allocation on every node; what a node sees is computed once per
node and cached.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from extender.allocator.features import Features
from extender.model.dra import Device, DeviceClass, DeviceID, DeviceTaintRule, ResourceSlice, Taint
from extender.model.nodeselector import NodeSelector, NodeSelectorError

PoolID = tuple[str, str]  # (driver, pool name)
#: Bound on cached node signatures per inventory (node x labels x projection).
MAX_CACHED_SIGNATURES = 200_000
_MISSING = object()


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
        self._by_node: dict[str, list[ResourceSlice]] = defaultdict(list)
        self._floating: list[ResourceSlice] = []
        self._pools: dict[PoolID, _PoolIndex] = defaultdict(_PoolIndex)
        for s in slices:
            if s.node_name is not None and not s.per_device_node_selection:
                self._by_node[s.node_name].append(s)
            else:
                self._floating.append(s)
            index = self._pools[(s.driver, s.pool)]
            index.slices.append(s)
            index.counts[s.generation] = index.counts.get(s.generation, 0) + 1
        self._node_pools: dict[tuple[str, Hashable], list[Pool]] = {}
        #: Nodes for which gathering pools failed (a node selector that does not parse).
        self._gather_errors: dict[tuple[str, Hashable], str] = {}
        #: Device -> the one node it is local to; devices missing here may matter to many nodes.
        self._local_node: dict[DeviceID, str] = {}
        for s in self.slices():
            for d in s.devices:
                if s.per_device_node_selection:
                    if d.node_name is not None:
                        self._local_node[d.id] = d.node_name
                elif s.node_name is not None:
                    self._local_node[d.id] = s.node_name
        self._node_signatures: dict[tuple[Any, ...], int | None] = {}
        self._signature_ids: dict[tuple[Any, ...], int] = {}
        #: Signature ids are never reused, even after the caches are cleared: callers keep them
        #: in memo keys, and a reused id would name different devices.
        self._next_signature = 0
        self._taints: dict[DeviceID, tuple[Taint, ...]] = {}

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
            node = self._local_node.get(device)
            if node is None:
                return None
            out.add(node)
        return out

    def taints(self, device: Device) -> tuple[Taint, ...]:
        """The device's taints plus those DeviceTaintRules add (driver/pool/device selection)."""
        if not self.taint_rules:
            return device.taints
        cached = self._taints.get(device.id)
        if cached is None:
            added = tuple(rule.taint for rule in self.taint_rules if rule.selects(device))
            cached = self._taints[device.id] = device.taints + added
        return cached

    # --- pools of a node -------------------------------------------------------------------------

    def pools_for(self, node_name: str, labels: Mapping[str, str]) -> list[Pool]:
        """The pools ``node`` can allocate from, in search order (cached per node)."""
        key = (node_name, label_key(labels))
        pools = self._node_pools.get(key)
        if pools is None:
            try:
                pools = self._gather(node_name, labels)
            except NodeSelectorError as exc:
                self._gather_errors[key] = str(exc)
                pools = []
            self._node_pools[key] = pools
        return pools

    def gather_error(self, node_name: str, labels: Mapping[str, str]) -> str | None:
        """Why upstream's GatherPools fails for this node (a node selector that does not parse).

        Read after :meth:`pools_for` for the node; free when no node has such an error.
        """
        if not self._gather_errors:
            return None
        return self._gather_errors.get((node_name, label_key(labels)))

    def node_signature(self, node_name: str, labels: Mapping[str, str], projection: Projection) -> int | None:
        """What allocation of some claims on this node depends on, without device names.

        ``projection`` reduces each device to what the claims can observe (the attributes their
        selectors and constraints read, taints, capacity ...), so nodes with equal signatures
        (and equal devices in use) get the same answer for those claims and one allocation
        serves them all. ``None`` when that does not hold: pools with shared counters depend on
        devices of other nodes, and incomplete pools name themselves in the answer.
        """
        key = (node_name, label_key(labels), projection.key)
        found = self._node_signatures.get(key, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        signature: int | None = None
        pools = self.pools_for(node_name, labels)
        if self.gather_error(node_name, labels) is not None:
            return self._remember_signature(key, None)  # allocation fails with this node's error
        if not any(p.incomplete or any(s.shared_counters for s in p.all_slices) for p in pools):
            try:
                content = tuple(
                    (
                        p.id[0],
                        p.invalid,
                        p.has_binding_conditions,
                        tuple(
                            (
                                projection.of(d),
                                self.taints(d),
                                bool(s.per_device_node_selection) and device_on_node(d, node_name, labels),
                            )
                            for s in p.slices
                            for d in s.devices
                        ),
                    )
                    for p in pools
                )
            except NodeSelectorError:
                return self._remember_signature(key, None)  # evaluating it is an error: no sharing
            # Interned: equal contents get one small int, cheap to hash in memo keys.
            signature = self._signature_ids.get(content)
            if signature is None:
                signature = self._signature_ids[content] = self._next_signature
                self._next_signature += 1
        return self._remember_signature(key, signature)

    def _remember_signature(self, key: tuple[Any, ...], signature: int | None) -> int | None:
        if len(self._node_signatures) > MAX_CACHED_SIGNATURES:
            self._node_signatures.clear()  # bounded: rebuilt on demand, under fresh ids
            self._signature_ids.clear()
        self._node_signatures[key] = signature
        return signature

    def node_devices(self, node_name: str, labels: Mapping[str, str]) -> list[Device]:
        """The devices of the node's usable pools, in search order."""
        return [d for p in self.pools_for(node_name, labels) for s in p.slices for d in s.devices]

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
                slices=sorted(relevant, key=lambda s: s.name),
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
        names: set[str] = set()
        for s in pool.slices:
            for d in s.devices:
                if d.name in names:
                    pool.invalid, pool.invalid_reason = True, f"duplicate device name {d.name}"
                    return
                names.add(d.name)
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
