"""DRANodeAllocatableResources (KEP-5517, alpha): devices that back node-allocatable resources
(cpu, memory, ephemeral-storage, hugepages-*), in both of the APIs released so far.

1.36 (v1.36.3): a ResourceSlice device's ``nodeAllocatableResourceMappings`` says how much of a
node resource one allocation of it stands for: ``allocationMultiplier`` per device, or
(``capacityKey``) the capacity the allocation consumed, times the multiplier if one is given. A
pod's ``status.nodeAllocatableResourceClaimStatuses`` records, per claim, what its containers got
that way (``resources``).

1.37 (kubernetes#140009, "alpha 2"; read in kubernetes/api after the merge, 10b39a39): the device
field is ``nodeAllocatableResources``: per resource a ``mapping`` (``capacityKey`` times
``capacityMultiplier``, or ``deviceMultiplier`` per device) and/or an ``overhead`` (``perPod``,
``perContainer``); the pod's entries carry ``mapping`` and ``overhead`` lists instead of
``resources``, and an overhead counts ``perPod`` plus ``perContainer`` for each container
listed. kube-scheduler counts either as the pod's requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from extender.model.reader import Reader
from extender.quantity import Quantity, QuantityError, parse_quantity


class NodeAllocatableError(Exception):
    """Filter's statusError: an allocation cannot be turned into node resources."""


def consumed_amount(
    claim: str,
    result: Mapping[str, Any],
    resource: str,
    key: str,
    multiplier: Quantity | None,
    field_name: str,
) -> Quantity | None:
    """What an allocation result consumed under ``key``, times ``multiplier`` (in the consumed
    amount's format); None when the result consumed no such capacity (the mapping does not
    apply). ``field_name`` names the device field in the error, as each release words it."""
    consumed = result.get("consumedCapacity")
    if not isinstance(consumed, Mapping):
        raise NodeAllocatableError(
            f"claim {claim}, device {result.get('device')}: ConsumedCapacity is nil, but Capacity key "
            f"'{key}' is set in {field_name} for resource {resource}"
        )
    if key not in consumed:
        return None
    try:
        used = parse_quantity(str(consumed[key]))
    except QuantityError as exc:
        raise NodeAllocatableError(f"claim {claim}: consumedCapacity {key}: {exc}") from None
    if multiplier is None:
        return used
    return Quantity(used.value * multiplier.value, None, format=used.format)


def add_quantities(a: Quantity | None, b: Quantity) -> Quantity:
    """resource.Quantity.Add: the sum keeps the first's format (the second's if the first is 0)."""
    if a is None:
        return b
    return Quantity(a.value + b.value, None, format=b.format if a.value == 0 else a.format)


@dataclass(frozen=True, slots=True)
class ResourceMapping:
    """One resource a device backs: a 1.36 ``nodeAllocatableResourceMappings`` entry, or a 1.37
    ``nodeAllocatableResources`` entry (``second_api``)."""

    capacity_key: str | None
    #: 1.36 ``allocationMultiplier``; 1.37 ``mapping.capacityMultiplier``.
    multiplier: Quantity | None
    #: 1.37 ``mapping.deviceMultiplier``.
    device_multiplier: Quantity | None = None
    #: 1.37 ``overhead.perPod`` and ``overhead.perContainer``.
    per_pod: Quantity | None = None
    per_container: Quantity | None = None
    #: 1.37: the entry has a ``mapping`` (such a device's claim cannot be shared across pods).
    mapped: bool = True
    second_api: bool = False


def parse_mappings(device: Reader) -> dict[str, ResourceMapping]:
    """A device's ``nodeAllocatableResourceMappings``: resource name -> mapping."""
    mappings = device.sub("nodeAllocatableResourceMappings")
    out = {}
    for name in mappings.data:
        entry = mappings.sub(name)
        multiplier = entry.quantity("allocationMultiplier") if entry.has("allocationMultiplier") else None
        out[str(name)] = ResourceMapping(entry.opt_string("capacityKey") or None, multiplier)
    return out


def parse_resources(device: Reader) -> dict[str, ResourceMapping]:
    """A device's 1.37 ``nodeAllocatableResources``: resource name -> mapping and overhead."""
    resources = device.sub("nodeAllocatableResources")
    out = {}
    for name in resources.data:
        entry = resources.sub(name)
        mapping = entry.sub("mapping")
        overhead = entry.sub("overhead")
        out[str(name)] = ResourceMapping(
            capacity_key=mapping.opt_string("capacityKey") or None,
            multiplier=_opt_quantity(mapping, "capacityMultiplier"),
            device_multiplier=_opt_quantity(mapping, "deviceMultiplier"),
            per_pod=_opt_quantity(overhead, "perPod"),
            per_container=_opt_quantity(overhead, "perContainer"),
            mapped=entry.has("mapping"),
            second_api=True,
        )
    return out


def _opt_quantity(reader: Reader, key: str) -> Quantity | None:
    return reader.quantity(key) if reader.has(key) else None


@dataclass(frozen=True, slots=True)
class Overhead:
    """One 1.37 ``overhead`` entry of a claim status: what a claim's devices add per pod and per
    container that uses the claim (either may be absent)."""

    per_pod: Quantity | None
    per_container: Quantity | None


@dataclass(frozen=True, slots=True)
class ClaimResources:
    """One ``status.nodeAllocatableResourceClaimStatuses`` entry of a pod."""

    #: The ResourceClaim object's name (not the pod's entry name).
    claim: str
    #: Init containers, then containers, that reference the claim (once per reference).
    containers: tuple[str, ...]
    #: 1.36: what the claim's devices stand for.
    resources: Mapping[str, Quantity]
    #: 1.37: the mapped amounts and the overheads, by resource name (in name order).
    mapping: Mapping[str, Quantity] = field(default_factory=dict)
    overhead: Mapping[str, Overhead] = field(default_factory=dict)
    second_api: bool = False

    def amounts(self) -> dict[str, Fraction]:
        """What the entry adds to the pod's requests (resourcehelper
        addDRANodeAllocatableClaimResources): ``resources``, or the mapped amounts plus each
        overhead's ``perPod`` and ``perContainer`` once per listed container."""
        out: dict[str, Fraction] = {}
        for source in (self.resources, self.mapping):
            for name, q in source.items():
                out[name] = out.get(name, Fraction(0)) + q.value
        for name, o in self.overhead.items():
            amount = o.per_pod.value if o.per_pod is not None else Fraction(0)
            if o.per_container is not None and self.containers:
                amount += o.per_container.value * len(self.containers)
            out[name] = out.get(name, Fraction(0)) + amount
        return out

    def to_dict(self) -> dict[str, Any]:
        if not self.second_api:
            return {
                "resourceClaimName": self.claim,
                "containers": list(self.containers),
                "resources": {name: q.canonical() for name, q in self.resources.items()},
            }
        out: dict[str, Any] = {"resourceClaimName": self.claim}  # empty lists are omitted
        if self.containers:
            out["containers"] = list(self.containers)
        if self.mapping:
            out["mapping"] = [{"name": n, "quantity": q.canonical()} for n, q in self.mapping.items()]
        if self.overhead:
            out["overhead"] = [_overhead(n, o) for n, o in self.overhead.items()]
        return out


def _overhead(name: str, o: Overhead) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if o.per_pod is not None:
        out["perPod"] = o.per_pod.canonical()
    if o.per_container is not None:
        out["perContainer"] = o.per_container.canonical()
    return out


def parse_claim_resources(status: Reader) -> tuple[ClaimResources, ...]:
    """A pod's ``status.nodeAllocatableResourceClaimStatuses`` in either release's shape."""
    out = []
    for e in status.readers("nodeAllocatableResourceClaimStatuses"):
        mapping = {
            m.string("name"): m.quantity("quantity") for m in e.readers("mapping") if m.has("quantity")
        }
        overhead = {
            o.string("name"): Overhead(_opt_quantity(o, "perPod"), _opt_quantity(o, "perContainer"))
            for o in e.readers("overhead")
        }
        out.append(
            ClaimResources(
                e.string("resourceClaimName"),
                e.strings("containers"),
                e.quantities("resources"),
                mapping,
                overhead,
                second_api=bool(mapping or overhead),
            )
        )
    return tuple(out)
