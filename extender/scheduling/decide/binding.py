"""Binding conditions of an allocated claim (DRADeviceBindingConditions + DRAResourceClaimDeviceStatus).

Mirrors ``isClaimReadyForBinding`` and ``isClaimTimeout`` of kube-scheduler's DynamicResources
plugin: an allocated claim whose device reports a binding failure, or that waited longer than
the binding timeout for its binding conditions, is not available on any node, and PostFilter
may deallocate it so the pod can get other devices.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.defaults import DEFAULT_BINDING_WAIT as DEFAULT_BINDING_WAIT
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


def allocation_waits(allocation: Mapping[str, Any]) -> bool:
    """A raw ``status.allocation`` names a device with binding conditions (upstream
    hasBindingConditions, for one claim)."""
    devices = allocation.get("devices") if isinstance(allocation.get("devices"), Mapping) else {}
    results = (devices or {}).get("results") or []
    return any(isinstance(r, Mapping) and r.get("bindingConditions") for r in results)


def claim_waits(claim: ResourceClaim) -> bool:
    """The claim is allocated to a device with binding conditions."""
    return claim.allocation is not None and any(r.binding_conditions for r in claim.allocation.devices)


@dataclass(frozen=True, slots=True)
class BindingState:
    """Where a pod's claims stand with their devices' binding conditions (upstream
    isPodReadyForBinding, which PreBind polls)."""

    ready: bool
    #: The claims failed or timed out: waiting longer cannot help (upstream PreBind's error).
    failure: str | None = None
    #: ``driver/pool/device: cond, ...`` for each device whose binding conditions are not all True.
    pending: list[str] = field(default_factory=list)
    #: The failure is the binding timeout (not a failure condition).
    timed_out: bool = False
    #: The claim that failed or timed out.
    failed: ResourceClaim | None = None


def pod_binding_state(claims: Iterable[ResourceClaim | None], now: float, timeout: float) -> BindingState:
    """Upstream isPodReadyForBinding over the pod's claims as the cache has them now.

    ``None`` (a claim the cache does not show) and a claim the cache shows unallocated (our
    write not seen yet) are pending. A failure condition, or ``timeout`` seconds since the
    allocation without every condition True, ends the wait.
    """
    pending: list[str] = []
    for claim in claims:
        if claim is None or claim.allocation is None:
            pending.append(f"resourceclaim {claim.name if claim else '?'}: allocation not seen yet")
            continue
        ready, failure = ready_for_binding(claim)
        if failure is not None:
            return BindingState(False, failure=failure, failed=claim)
        if ready:
            continue
        if binding_timed_out(claim, now, timeout):
            return BindingState(
                False, failure=f"claim {claim.name} binding timeout", timed_out=True, failed=claim
            )
        pending.extend(_pending_devices(claim))
    return BindingState(not pending, pending=pending)


def _pending_devices(claim: ResourceClaim) -> list[str]:
    allocation = claim.allocation
    assert allocation is not None
    out = []
    for result in allocation.devices:
        if not result.binding_conditions:
            continue
        conditions = claim.device_conditions.get(result.id) or {}
        waiting = [
            name
            for name in result.binding_conditions
            if (c := conditions.get(name)) is None or c.status != "True"
        ]
        if waiting:
            out.append(f"{result.id}: {', '.join(waiting)}")
    return out
