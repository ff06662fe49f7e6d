"""What a pod's claims can observe of a device: the basis for sharing one allocation across nodes.

Two devices that agree on every attribute the claims' selectors read, on the attributes their
constraints compare, on capacity (when capacity matters) and on the flags allocation checks, are
interchangeable for those claims; nodes whose devices are interchangeable one by one, in order,
get the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from extender.cel import CelEnvironment, Mode, Program
from extender.cel.reads import Path, key_function
from extender.model.dra import Device, DeviceClass, ResourceClaim

#: What selectors may read that the projection has from the device itself.
_FROM_THE_DEVICE: frozenset[Path] = frozenset({("driver",), ("allowMultipleAllocations",)})


@dataclass(frozen=True, slots=True)
class ClaimProjection:
    """Implements :class:`extender.allocator.inventory.Projection` for a set of claims."""

    key: Hashable
    #: The key of what the selectors read of a device's CEL view; None when they read no more
    #: than the driver and allowMultipleAllocations, which the projection has from the device
    #: (the view is then not built: most devices of a large cluster are never evaluated).
    _reads: Callable[[Any], Any] | None
    _attributes: tuple[str, ...]
    _capacity: bool
    _list_attributes: bool

    def of(self, device: Device) -> Hashable:
        return (
            self._reads(device.cel()) if self._reads is not None else device.id.driver,
            tuple(device.attribute(a) for a in self._attributes),
            # A share consumes the request policy's default even without capacity requests.
            tuple(sorted((n, c.value.text, c.request_policy) for n, c in device.capacity.items()))
            if self._capacity or device.allow_multiple_allocations
            else None,
            device.allow_multiple_allocations,
            device.has_binding_conditions,
            bool(device.consumes_counters),
            device.converts(self._list_attributes),
        )


def claim_projection(
    claims: Sequence[ResourceClaim], classes: dict[str, DeviceClass], cel: CelEnvironment
) -> ClaimProjection | None:
    """The projection for ``claims``; None when a selector or a derived attribute's expression
    does not compile (no sharing then)."""
    reads: set[Path] = {("driver",)}
    attributes: set[str] = set()
    capacity = False
    for claim in claims:
        for constraint in claim.spec.constraints:
            for name in (constraint.match_attribute, constraint.distinct_attribute):
                if name:
                    attributes.add(name)
        for request in claim.spec.requests:
            alternatives = [request.exactly] if request.exactly is not None else []
            alternatives += list(request.first_available)
            for exact in alternatives:
                capacity = capacity or exact.capacity_requests is not None
                selectors = list(exact.selectors)
                cls = classes.get(exact.device_class_name)
                if cls is not None:
                    selectors += list(cls.selectors)
                programs = [cel.compile(s.expression or "") for s in selectors]
                # A derived attribute's value depends on what its expression reads.
                programs += [cel.compile(e, Mode.DERIVED) for _, e in exact.derived_attributes]
                for program in programs:
                    if not isinstance(program, Program):
                        return None
                    reads |= program.reads
    frozen = frozenset(reads)
    ordered = tuple(sorted(attributes))
    return ClaimProjection(
        key=(frozen, ordered, capacity),
        _reads=None if frozen <= _FROM_THE_DEVICE else key_function(frozen),
        _attributes=ordered,
        _capacity=capacity,
        _list_attributes=cel.options.list_type_attributes,
    )
