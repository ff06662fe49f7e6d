"""Devices in use: what allocated claims (and in-flight allocations) hold."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from extender.allocator.features import Features
from extender.model.dra import Allocation, DeviceID


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """Upstream's ``AllocatedState`` as the scheduler gathers it (``foreachAllocatedDevice``).

    Results with ``adminAccess: true`` are skipped. With DRAConsumableCapacity a result with a
    ``shareID`` is a share: it lands in ``shared_ids`` and, when it records consumedCapacity,
    its amounts add to the device's ``capacity`` total (a share without consumedCapacity
    records no capacity at all). Any other result holds the device exclusively (``dedicated``);
    without the gate, shares do too.
    """

    #: upstream AllocatedDevices: only these are "in use" (deviceInUse).
    dedicated: frozenset[DeviceID] = frozenset()
    #: upstream AllocatedSharedDeviceIDs, by device: shared at least once.
    shared_ids: frozenset[DeviceID] = frozenset()
    #: upstream AggregatedCapacity: device -> capacity name -> consumed amount (sum over shares).
    capacity: Mapping[DeviceID, Mapping[str, Fraction]] = field(default_factory=dict)

    @classmethod
    def from_allocations(cls, allocations: Iterable[Allocation], features: Features) -> AllocatedState:
        dedicated: set[DeviceID] = set()
        shared_ids: set[DeviceID] = set()
        capacity: dict[DeviceID, dict[str, Fraction]] = {}
        for allocation in allocations:
            dedicated.update(allocation.exclusive)
            for result in allocation.shares:
                if not features.consumable_capacity:
                    dedicated.add(result.id)  # without the gate a share holds the device like any result
                    continue
                shared_ids.add(result.id)
                if not result.consumed_capacity:
                    continue
                totals = capacity.setdefault(result.id, {})
                for name, q in result.consumed_capacity.items():
                    totals[name] = totals.get(name, Fraction(0)) + q.value
        return cls(frozenset(dedicated), frozenset(shared_ids), capacity)

    def holds(self, device: DeviceID) -> bool:
        """Allocated in any way (upstream ``IsDeviceAllocated``: what counter accounting charges)."""
        return device in self.dedicated or device in self.shared_ids or device in self.capacity

    def key(self, device: DeviceID) -> Hashable:
        """Everything allocation can observe about ``device`` being held (for memo keys)."""
        held = self.capacity.get(device)
        return (
            device in self.dedicated,
            device in self.shared_ids,
            tuple(sorted(held.items())) if held is not None else None,
        )

    def changed(self, other: AllocatedState) -> set[DeviceID]:
        """The devices whose :meth:`key` differs between the two states."""
        out = set(self.dedicated ^ other.dedicated) | set(self.shared_ids ^ other.shared_ids)
        out |= {d for d in self.capacity.keys() | other.capacity.keys() if self.key(d) != other.key(d)}
        return out
