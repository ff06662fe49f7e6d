"""Binding conditions of an allocated claim (DRADeviceBindingConditions + DRAResourceClaimDeviceStatus).

Mirrors ``isClaimReadyForBinding`` and ``isClaimTimeout`` of kube-scheduler's DynamicResources
plugin: an allocated claim whose device reports a binding failure, or that waited longer than
the binding timeout for its binding conditions, is not available on any node, and PostFilter
may deallocate it so the pod can get other devices.
"""

from __future__ import annotations

import json

from extender.model.dra import ResourceClaim


def ready_for_binding(claim: ResourceClaim) -> tuple[bool, str | None]:
    """(ready, failure): upstream isClaimReadyForBinding.

    Only results with bindingConditions are looked at; the first device without status, or
    with a binding condition not True, makes the claim not ready (later devices are not read).
    """
    allocation = claim.allocation
    if allocation is None:
        return False, None
    for result in allocation.devices:
        if not result.binding_conditions:
            continue
        conditions = claim.device_conditions.get(result.id)
        if conditions is None:
            return False, None
        for name in result.binding_failure_conditions:
            failed = conditions.get(name)
            if failed is not None and failed.status == "True":
                return False, (
                    f"claim {claim.name} binding failed: reason={failed.reason}, "
                    f"message={json.dumps(failed.message)}"
                )
        for name in result.binding_conditions:
            condition = conditions.get(name)
            if condition is None or condition.status != "True":
                return False, None
    return True, None


def binding_timed_out(claim: ResourceClaim, now: float, timeout: float) -> bool:
    """Upstream isClaimTimeout: allocationTimestamp + timeout is before ``now`` (wall clock)."""
    allocation = claim.allocation
    if allocation is None or allocation.allocation_timestamp is None:
        return False
    waits = any(result.binding_conditions for result in allocation.devices)
    return waits and allocation.allocation_timestamp + timeout < now


def binding_problem(claim: ResourceClaim, now: float, timeout: float) -> str | None:
    """Why Filter treats the claim as unavailable because of binding (None: it does not)."""
    ready, failure = ready_for_binding(claim)
    if failure is not None:
        return failure
    if not ready and binding_timed_out(claim, now, timeout):
        return f"claim {claim.name} binding timeout"
    return None
