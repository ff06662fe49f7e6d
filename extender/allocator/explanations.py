"""Why no allocation fit on a node, for people: per request how many devices match and what
kept them out, whether requests compete for the same devices, which pools are being updated.
Read from the search's state after it failed (nothing here decides)."""

from __future__ import annotations

from typing import Protocol

from extender.allocator.errors import AllocatorError
from extender.allocator.features import Features
from extender.allocator.inventory import Inventory, Pool
from extender.allocator.requests import Candidate, RequestData
from extender.allocator.tolerations import taints_tolerated
from extender.model.dra import Device, DeviceID, ResourceSlice

#: Reasons recorded as the search rejects devices, in the order they are reported. "In use" and
#: "tainted" are counted directly over the matching devices instead, because the candidate
#: bound skips such devices before the search would reject them.
#: Devices refused because their slice skips node operations (DRAOptionalNodeOperations).
SKIPS_OPERATIONS_GATE_OFF = "skipping node operations while DRAOptionalNodeOperations is off"
SKIPS_OPERATIONS_UNDECLARED = "skipping node operations, which this node does not declare"
#: DRADeviceCompatibilityGroups: no group in common with the devices on its counter set.
INCOMPATIBLE_GROUPS = "incompatible compatibility groups"

REJECTION_REASONS = (
    "out of counters",
    INCOMPATIBLE_GROUPS,
    "out of capacity",
    "excluded by a constraint",
    "consuming counters while DRAPartitionableDevices is off",
    SKIPS_OPERATIONS_GATE_OFF,
    SKIPS_OPERATIONS_UNDECLARED,
)


class Attempt(Protocol):
    """What an explanation reads of a failed search (search._Attempt)."""

    features: Features
    inventory: Inventory
    pools: list[Pool]
    candidates: list[Candidate]
    requests: list[list[list[RequestData]]]
    rejected: dict[tuple[int, int], dict[str, set[DeviceID]]]

    def claim_name(self, index: int) -> str: ...

    def selectable(self, data: RequestData, device: Device, s: ResourceSlice) -> bool: ...

    def available(self, data: RequestData, device: Device) -> bool: ...


def explain(attempt: Attempt) -> str:
    """Why nothing fit, per request: how many devices match, and what kept them out."""
    parts = []
    for ci, per_request in enumerate(attempt.requests):
        for ri, alternatives in enumerate(per_request):
            data = alternatives[0]
            parts.append(
                f"claim {attempt.claim_name(ci)}, request {data.base}: {_explain_request(attempt, data, ri)}"
            )
    competing = _explain_competition(attempt)
    if competing:
        parts.append(competing)
    incomplete = [str(p) for p in attempt.pools if p.incomplete]
    if incomplete:
        parts.append(f"pools being updated: {', '.join(incomplete)}")
    return "cannot allocate all claims: " + "; ".join(parts)


def _usable(attempt: Attempt, data: RequestData) -> list[DeviceID]:
    """The devices a request could take on its own: selected, free and taints tolerated."""
    out = []
    for c in attempt.candidates:
        try:
            if not (attempt.selectable(data, c.device, c.slice) and attempt.available(data, c.device)):
                continue
        except AllocatorError:
            continue
        if attempt.features.device_taints and not taints_tolerated(
            attempt.inventory.taints(c.device), data.request.tolerations
        ):
            continue
        out.append(c.device.id)
    return out


def _explain_competition(attempt: Attempt) -> str:
    """When every request has enough usable devices alone but not together: say they
    compete (two one-GPU claims on a one-GPU node read like success otherwise)."""
    wanted = [alternatives[0] for per_claim in attempt.requests for alternatives in per_claim]
    if len(wanted) < 2 or any(d.all_devices is not None for d in wanted):
        return ""
    usable = [_usable(attempt, d) for d in wanted]
    if any(len(u) < d.num_devices for u, d in zip(usable, wanted, strict=True)):
        return ""  # one request is short on its own: its own line says why
    needed = sum(d.num_devices for d in wanted)
    distinct = len({device for u in usable for device in u})
    if distinct >= needed:
        return ""  # enough devices in all: constraints or counters kept them apart
    return (
        f"each request fits alone, but they compete for the same devices: together they need "
        f"{needed}, and {distinct} usable device{'s match' if distinct != 1 else ' matches'} them"
    )


def _explain_request(attempt: Attempt, data: RequestData, ri: int) -> str:
    if data.all_devices is not None:
        wanted = "all matching devices"
        matching = [d for d, _, _ in data.all_devices]
    else:
        wanted = f"{data.num_devices} device{'s' if data.num_devices != 1 else ''}"
        try:
            matching = [c.device for c in attempt.candidates if attempt.selectable(data, c.device, c.slice)]
        except AllocatorError:
            matching = []
    if not matching:
        where = "on this node" if attempt.candidates else "(no devices published for this node)"
        return f"needs {wanted}, no device matches {where}"
    free = [d for d in matching if attempt.available(data, d)]
    in_use = len(matching) - len(free)
    # Counted here, not from rejections: the candidate bound prunes tainted devices unseen.
    tainted = (
        sum(1 for d in free if not taints_tolerated(attempt.inventory.taints(d), data.request.tolerations))
        if attempt.features.device_taints
        else 0
    )
    rejected = attempt.rejected.get((data.claim_index, ri), {})
    details = [f"{len(matching)} match"]
    if in_use:
        details.append(f"{in_use} of them in use")
    if tainted:
        details.append(f"{tainted} tainted and not tolerated")
    details += [f"{len(rejected[r])} {r}" for r in REJECTION_REASONS if rejected.get(r)]
    return f"needs {wanted}; " + ", ".join(details)
