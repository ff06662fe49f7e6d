"""Devices in use: what allocated claims (and in-flight allocations) hold."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from extender.allocator.features import Features
from extender.model.dra import Allocation, DeviceID


@dataclass(frozen=True, slots=True)
class AllocatedState:
    """Upstream's "allocated devices": exclusive holds, plus shared capacity consumption.

    Results with ``adminAccess: true`` never block. With DRAConsumableCapacity a result with a
    ``shareID`` is a share: its consumed capacity adds to the device's running total. Any other
    result holds the device exclusively.
    """

    dedicated: frozenset[DeviceID] = frozenset()
    #: device -> capacity name -> consumed amount (sum over all shares).
    shared: Mapping[DeviceID, Mapping[str, Fraction]] = field(default_factory=dict)

    @classmethod
    def from_allocations(cls, allocations: Iterable[Allocation], features: Features) -> AllocatedState:
        dedicated: set[DeviceID] = set()
        shared: dict[DeviceID, dict[str, Fraction]] = {}
        for allocation in allocations:
            dedicated.update(allocation.exclusive)
            for result in allocation.shares:
                if not features.consumable_capacity:
                    dedicated.add(result.id)  # without the gate a share holds the device like any result
                    continue
                totals = shared.setdefault(result.id, {})
                for name, q in result.consumed_capacity.items():
                    totals[name] = totals.get(name, Fraction(0)) + q.value
        return cls(frozenset(dedicated), shared)

    def holds(self, device: DeviceID) -> bool:
        """Allocated in any way (what counter accounting charges)."""
        return device in self.dedicated or device in self.shared
