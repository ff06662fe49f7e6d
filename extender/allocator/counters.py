"""Shared counters of partitionable devices, per allocation attempt, and (DRADeviceCompatibilityGroups)
which devices may draw on one counter set together.

Counters: what a pool's counter sets hold, minus what allocated devices consume, must cover what
this attempt's devices consume (upstream ``checkAvailableCounters``), keyed by driver + pool
since kubernetes#140435.

Compatibility groups (1.37 alpha, kubernetes#139795; structured/internal/experimental
compatibility_groups.go): a device's ``consumesCounters`` entry may name up to two groups. On one
counter set, devices without groups go together, and devices with groups go together while
every one of them shares a group with all the others (a running intersection); the devices
already allocated from the set seed it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

from extender.allocator.inventory import Pool, PoolID
from extender.allocator.state import AllocatedState
from extender.model.dra import Device

CounterKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Intersection:
    """compatibilityGroupIntersection: what devices on one counter set have in common so far."""

    members: bool = False
    #: Every member so far has no groups.
    all_empty: bool = False
    running: frozenset[str] = frozenset()

    def admits(self, groups: frozenset[str]) -> bool:
        if not self.members:
            return True
        if not groups:
            return self.all_empty  # a device without groups only joins devices without groups
        if self.all_empty:
            return False
        return bool(groups & self.running)

    def add(self, groups: frozenset[str]) -> Intersection:
        if not self.members:
            return Intersection(True, not groups, groups)
        if self.all_empty or not groups:
            return self
        return Intersection(True, False, self.running & groups)


class CounterLedger:
    """One attempt's view of counters and compatibility groups, pool by pool."""

    def __init__(
        self, devices_of_pool: Callable[[Pool], Iterable[Device]], allocated: AllocatedState
    ) -> None:
        self._devices_of_pool = devices_of_pool
        self._allocated = allocated
        self.available: dict[PoolID, dict[CounterKey, Fraction]] = {}
        self.consumed: dict[PoolID, dict[CounterKey, Fraction]] = {}
        #: (pool, counter set) -> the running intersection of this attempt (seeded lazily).
        self._groups: dict[tuple[PoolID, str], Intersection] = {}
        self._baselines: dict[PoolID, dict[str, Intersection]] = {}

    # --- counters ------------------------------------------------------------------------------

    def _available(self, pool: Pool) -> dict[CounterKey, Fraction]:
        key = pool.id
        available = self.available.get(key)
        if available is None:
            available = {}
            for s in pool.all_slices:
                for counter_set in s.shared_counters:
                    for name, q in counter_set.counters.items():
                        available[(counter_set.name, name)] = q.value
            for device in self._devices_of_pool(pool):
                if self._allocated.holds(device.id):
                    for consumption in device.consumes_counters:
                        for name, q in consumption.counters.items():
                            k = (consumption.counter_set, name)
                            available[k] = available.get(k, Fraction(0)) - q.value
            self.available[key] = available
        return available

    def charge_if_available(self, device: Device, pool: Pool) -> bool:
        """Upstream ``checkAvailableCounters``: charge the device's counters, revert if any is exceeded."""
        available = self._available(pool)
        self.charge(device, pool, +1)
        consumed = self.consumed[pool.id]
        # Every counter of every set must stay covered, not only the ones this device consumes.
        if all(value >= consumed.get(k, Fraction(0)) for k, value in available.items()):
            return True
        self.charge(device, pool, -1)
        return False

    def charge(self, device: Device, pool: Pool, sign: int) -> None:
        consumed = self.consumed.setdefault(pool.id, {})
        for consumption in device.consumes_counters:
            for name, q in consumption.counters.items():
                k = (consumption.counter_set, name)
                consumed[k] = consumed.get(k, Fraction(0)) + sign * q.value

    # --- compatibility groups ------------------------------------------------------------------

    def _baseline(self, pool: Pool) -> dict[str, Intersection]:
        """compatibilityGroupsBaselineForPool: the groups of the pool's allocated devices, per
        counter set (read from the slices as they are now)."""
        found = self._baselines.get(pool.id)
        if found is None:
            found = {}
            for device in self._devices_of_pool(pool):
                if self._allocated.holds(device.id):
                    for consumption in device.consumes_counters:
                        current = found.get(consumption.counter_set, Intersection())
                        found[consumption.counter_set] = current.add(consumption.compatibility_groups)
            self._baselines[pool.id] = found
        return found

    def join_groups(self, device: Device, pool: Pool) -> Callable[[], None] | None:
        """checkAndConsumeCompatibilityGroups: the device joins each counter set's intersection,
        or None when one does not admit it (nothing changed). Returns the undo."""
        previous: list[tuple[tuple[PoolID, str], Intersection | None]] = []
        for consumption in device.consumes_counters:
            key = (pool.id, consumption.counter_set)
            current = self._groups.get(key)
            seeded = current if current is not None else self._baseline(pool).get(key[1], Intersection())
            if not seeded.admits(consumption.compatibility_groups):
                self._restore(previous)
                return None
            previous.append((key, current))
            self._groups[key] = seeded.add(consumption.compatibility_groups)
        return lambda: self._restore(previous)

    def _restore(self, previous: list[tuple[tuple[PoolID, str], Intersection | None]]) -> None:
        for key, value in reversed(previous):
            if value is None:
                self._groups.pop(key, None)
            else:
                self._groups[key] = value
