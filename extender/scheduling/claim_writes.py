"""Writing a claim's allocation and reservation exactly as the in-tree scheduler does (PreBind).

Per claim: add the ``resource.kubernetes.io/delete-protection`` finalizer with an Update of the
claim, then one UpdateStatus carrying ``status.allocation`` and our ``reservedFor`` entry; both
guarded by resourceVersion and retried on 409 after a fresh GET. An already allocated (shared)
claim only gets our ``reservedFor`` entry. A claim allocated elsewhere in the meantime fails.
"""

from __future__ import annotations

from typing import Any

from extender.cluster.api import ApiConflict, ClusterAPI
from extender.cluster.memstore import clone
from extender.model.core import Pod
from extender.model.dra import DELETE_PROTECTION_FINALIZER, ResourceClaim

#: retry.DefaultRetry: 5 attempts (only 409 Conflict is retried).
CONFLICT_RETRIES = 5


class ClaimWriteError(Exception):
    """The claim could not be reserved for the pod (the bind fails; nothing is left half-written)."""


def reserved_for_entry(pod: Pod) -> dict[str, str]:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def _is_reserved(raw: dict[str, Any], pod_uid: str) -> bool:
    return any(e.get("uid") == pod_uid for e in (raw.get("status") or {}).get("reservedFor") or [])


async def reserve_claim(
    api: ClusterAPI,
    claim: ResourceClaim,
    allocation: dict[str, Any] | None,
    pod: Pod,
    *,
    on_conflict: Any = None,
) -> dict[str, Any]:
    """Store ``allocation`` (None: the claim is already allocated) and reserve the claim for ``pod``.

    Returns the claim as written. Raises :class:`ClaimWriteError` when it cannot be done.
    ``on_conflict`` is called for every 409 (metrics).
    """
    ns, name = claim.namespace, claim.name
    raw = clone(claim.raw)
    for _attempt in range(CONFLICT_RETRIES):
        try:
            return await _reserve_once(api, raw, allocation, pod)
        except ApiConflict:
            if on_conflict is not None:
                on_conflict()
            raw = await api.get_claim(ns, name)
    raise ClaimWriteError(f"resourceclaim {ns}/{name}: still conflicting after {CONFLICT_RETRIES} attempts")


async def _reserve_once(
    api: ClusterAPI, raw: dict[str, Any], allocation: dict[str, Any] | None, pod: Pod
) -> dict[str, Any]:
    meta = raw.setdefault("metadata", {})
    where = f"resourceclaim {meta.get('namespace')}/{meta.get('name')}"
    if meta.get("deletionTimestamp"):
        raise ClaimWriteError(f"{where} got deleted in the meantime")
    if _is_reserved(raw, pod.uid):
        return raw  # an earlier attempt for this pod got this far (bind is idempotent)
    status = raw.get("status") or {}
    if allocation is not None:
        if status.get("allocation"):
            raise ClaimWriteError(f"{where} got allocated elsewhere in the meantime")
        if DELETE_PROTECTION_FINALIZER not in (meta.get("finalizers") or []):
            meta.setdefault("finalizers", []).append(DELETE_PROTECTION_FINALIZER)
            raw = await api.update_claim(raw)
        raw.setdefault("status", {})["allocation"] = clone(allocation)
    elif not status.get("allocation"):
        raise ClaimWriteError(f"{where} is not allocated anymore")
    raw.setdefault("status", {}).setdefault("reservedFor", []).append(reserved_for_entry(pod))
    return await api.update_claim_status(raw)
