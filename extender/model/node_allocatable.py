"""DRANodeAllocatableResources (KEP-5517, alpha in 1.36): devices that back node-allocatable
resources (cpu, memory, ephemeral-storage, hugepages-*), as v1.36.3 defines them.

A ResourceSlice device's ``nodeAllocatableResourceMappings`` says how much of a node resource
one allocation of it stands for: ``allocationMultiplier`` per device, or (``capacityKey``) the
capacity the allocation consumed, times the multiplier if one is given. A pod's
``status.nodeAllocatableResourceClaimStatuses`` records, per claim, what its containers got that
way; kube-scheduler counts it as the pod's requests (staging/src/k8s.io/api/resource/v1/types.go
NodeAllocatableResourceMapping, core/v1 NodeAllocatableResourceClaimStatus).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.model.reader import Reader
from extender.quantity import Quantity


@dataclass(frozen=True, slots=True)
class ResourceMapping:
    """One ``nodeAllocatableResourceMappings`` entry (at least one field is set)."""

    capacity_key: str | None
    multiplier: Quantity | None


def parse_mappings(device: Reader) -> dict[str, ResourceMapping]:
    """A device's ``nodeAllocatableResourceMappings``: resource name -> mapping."""
    mappings = device.sub("nodeAllocatableResourceMappings")
    out = {}
    for name in mappings.data:
        entry = mappings.sub(name)
        multiplier = entry.quantity("allocationMultiplier") if entry.has("allocationMultiplier") else None
        out[str(name)] = ResourceMapping(entry.opt_string("capacityKey") or None, multiplier)
    return out


@dataclass(frozen=True, slots=True)
class ClaimResources:
    """One ``status.nodeAllocatableResourceClaimStatuses`` entry of a pod."""

    #: The ResourceClaim object's name (not the pod's entry name).
    claim: str
    #: Init containers, then containers, that reference the claim (once per reference).
    containers: tuple[str, ...]
    resources: Mapping[str, Quantity]

    def to_dict(self) -> dict[str, Any]:
        return {
            "resourceClaimName": self.claim,
            "containers": list(self.containers),
            "resources": {name: q.canonical() for name, q in self.resources.items()},
        }


def parse_claim_resources(status: Reader) -> tuple[ClaimResources, ...]:
    return tuple(
        ClaimResources(e.string("resourceClaimName"), e.strings("containers"), e.quantities("resources"))
        for e in status.readers("nodeAllocatableResourceClaimStatuses")
    )
