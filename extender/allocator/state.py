"""Devices in use: what allocated claims (and in-flight allocations) hold."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from fractions import Fraction

from extender.allocator.features import Features
from extender.model.dra import Allocation, DeviceID
from extender.tally import tally


class AllocatedState:
    """Upstream's ``AllocatedState`` as the scheduler gathers it (``foreachAllocatedDevice``).

    Results with ``adminAccess: true`` are skipped. With DRAConsumableCapacity a result with a
    ``shareID`` is a share: it lands in ``shared_ids`` and, when it records consumedCapacity,
    its amounts add to the device's ``capacity`` total (a share without consumedCapacity
    records no capacity at all). Any other result holds the device exclusively (``dedicated``);
    without the gate, shares do too.

    Kept up to date allocation by allocation (:meth:`add`, :meth:`remove`): a claim change costs
    its own devices, not a pass over every allocated claim. The mappings count holders, so a
    device stays in use until the last allocation holding it is removed.
    """

    __slots__ = ("_capacity_shares", "capacity", "dedicated", "features", "shared_ids")

    def __init__(self, features: Features | None = None) -> None:
        self.features = features or Features()
        #: upstream AllocatedDevices: only these are "in use" (deviceInUse). Device -> holders.
        self.dedicated: dict[DeviceID, int] = {}
        #: upstream AllocatedSharedDeviceIDs, by device: shared at least once. Device -> shares.
        self.shared_ids: dict[DeviceID, int] = {}
        #: upstream AggregatedCapacity: device -> capacity name -> consumed amount (sum over shares).
        self.capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self._capacity_shares: dict[DeviceID, int] = {}

    @classmethod
    def from_allocations(cls, allocations: Iterable[Allocation], features: Features) -> AllocatedState:
        state = cls(features)
        for allocation in allocations:
            state.add(allocation)
        return state

    def add(self, allocation: Allocation) -> set[DeviceID]:
        """Count ``allocation`` in; returns the devices whose :meth:`key` may have changed."""
        return self._apply(allocation, 1)

    def remove(self, allocation: Allocation) -> set[DeviceID]:
        """Count ``allocation`` (added earlier) out again."""
        return self._apply(allocation, -1)

    def _apply(self, allocation: Allocation, sign: int) -> set[DeviceID]:
        touched: set[DeviceID] = set()
        for device in allocation.exclusive:
            tally(self.dedicated, device, sign)
            touched.add(device)
        for result in allocation.shares:
            touched.add(result.id)
            if not self.features.consumable_capacity:
                tally(self.dedicated, result.id, sign)  # without the gate a share holds the device
                continue
            tally(self.shared_ids, result.id, sign)
            if not result.consumed_capacity:
                continue
            tally(self._capacity_shares, result.id, sign)
            if result.id not in self._capacity_shares:
                self.capacity.pop(result.id, None)
                continue
            totals = self.capacity.setdefault(result.id, {})
            for name, q in result.consumed_capacity.items():
                totals[name] = totals.get(name, Fraction(0)) + sign * q.value
        return touched

    def holds(self, device: DeviceID) -> bool:
        """Allocated in any way (upstream ``IsDeviceAllocated``: what counter accounting charges)."""
        return device in self.dedicated or device in self.shared_ids or device in self.capacity

    def key(self, device: DeviceID) -> Hashable:
        """Everything allocation can observe about ``device`` being held (for memo keys)."""
        dedicated = device in self.dedicated
        if not dedicated and device not in self.shared_ids:
            return _FREE  # the common case: two lookups, nothing built (capacity is per share)
        held = self.capacity.get(device)
        return (
            dedicated,
            device in self.shared_ids,
            tuple(sorted(held.items())) if held is not None else None,
        )


#: AllocatedState.key of a device no one holds.
_FREE = (False, False, None)
