"""The API writes of a pod's extended-resource claim (upstream bindClaim, Unreserve, PostFilter).

Creating: the claim's name is derived from the pod's UID (:func:`extended.claim_name`), so a
create whose answer was lost is settled by reading that name back, and a retried bind finds the
claim an earlier attempt created instead of making a second one. Deleting: the in-tree
``deleteClaim`` (drop the delete-protection finalizer with an Update, then Delete, here with the
claim's UID as precondition). Recording: ``pod.status.extendedResourceClaimStatus``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from extender.cluster.api import ApiAlreadyExists, ApiConflict, ApiNotFound, ClusterAPI, ClusterAPIError
from extender.cluster.memstore import clone
from extender.model.core import Pod
from extender.model.dra import DELETE_PROTECTION_FINALIZER, ResourceClaim, parse_resource_claim
from extender.model.errors import ObjectError
from extender.scheduling.decide.extended import is_extended_claim_of
from extender.scheduling.write.claim_writes import (
    CONFLICT_RETRIES,
    ClaimWriteError,
    allocated_devices,
    outcome_unknown,
)


async def create_claim(api: ClusterAPI, body: dict[str, Any], pod: Pod) -> tuple[ResourceClaim, bool]:
    """Create the claim ``body`` names, or find the one an earlier attempt for ``pod`` created
    (then the flag is True: a lost answer of this bind's own create counts as found too)."""
    meta = body["metadata"]
    where = f"resourceclaim {meta['namespace']}/{meta['name']}"
    last = "no attempt made"
    for _attempt in range(CONFLICT_RETRIES):
        try:
            return _parsed(await api.create_claim(body), where), False
        except ApiAlreadyExists as exc:
            last = str(exc)
        except ClusterAPIError as exc:
            if not outcome_unknown(exc):
                raise ClaimWriteError(f"creating {where}: {exc}") from None
            last = str(exc)
        # Taken, or the create may have landed with its answer lost: read the name back.
        try:
            found = _parsed(await api.get_claim(meta["namespace"], meta["name"]), where)
        except ApiNotFound:
            continue  # not created (yet): create again; one name, so at most one of them lands
        except ClusterAPIError as exc:
            raise ClaimWriteError(f"creating {where}: {last}; reading it back: {exc}") from None
        if not is_extended_claim_of(found, pod):
            raise ClaimWriteError(f"{where} exists and is not the extended-resource claim of this pod")
        return found, True
    raise ClaimWriteError(f"creating {where}: {last} (after {CONFLICT_RETRIES} attempts)")


def _parsed(raw: dict[str, Any], where: str) -> ResourceClaim:
    try:
        return parse_resource_claim(raw)
    except ObjectError as exc:
        raise ClaimWriteError(f"{where}: malformed object from the API server: {exc}") from None


def reuse_problem(
    claim: ResourceClaim, wanted: ResourceClaim, allocation: dict[str, Any], pod: Pod
) -> str | None:
    """Why a claim found under the pod's name cannot serve this bind (None: it can).

    It must ask for what ``wanted`` (this node's synthesized claim) asks, and be unallocated
    (this bind allocates it) or allocated to exactly the devices this bind would take (an
    earlier attempt of the same decision got that far). Any other allocation was made on a
    view this decision did not have: using it could hand a device out twice.
    """
    where = f"resourceclaim {claim.namespace}/{claim.name}"
    if claim.deleting:
        return f"{where} from an earlier attempt is being deleted"
    if claim.spec != wanted.spec:
        return f"{where} from an earlier attempt asks for other devices; it is deleted, the pod is retried"
    if claim.allocation is not None:
        status = claim.raw.get("status") or {}
        if allocated_devices(status.get("allocation")) != allocated_devices(allocation) or any(
            e.get("uid") != pod.uid for e in claim.reserved_for
        ):
            return (
                f"{where} from an earlier attempt is allocated differently; it is deleted, the pod is retried"
            )
    return None


async def delete_claim(api: ClusterAPI, raw: dict[str, Any]) -> None:
    """deleteClaim: drop the delete-protection finalizer, then delete (gone already is fine).

    The claim is read first: the caller's copy may predate the finalizer (added by the status
    write's first step), and deleting a claim that still has it only marks it as deleting.
    """
    meta = raw["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta.get("uid", "")
    for _attempt in range(CONFLICT_RETRIES):
        try:
            current = await api.get_claim(namespace, name)
        except ApiNotFound:
            return
        if (current.get("metadata") or {}).get("uid") != uid:
            return  # replaced by another claim of that name: ours is gone
        finalizers = list(current["metadata"].get("finalizers") or [])
        if DELETE_PROTECTION_FINALIZER not in finalizers:
            break
        updated = clone(current)
        finalizers.remove(DELETE_PROTECTION_FINALIZER)
        updated["metadata"]["finalizers"] = finalizers
        try:
            await api.update_claim(updated)
            break
        except ApiNotFound:
            return
        except ApiConflict:
            continue  # changed meanwhile: read it again
    else:
        raise ClusterAPIError(f"removing the finalizer of resourceclaim {namespace}/{name}: conflicts")
    try:
        await api.delete_claim(namespace, name, uid)
    except ApiNotFound:
        return


async def record_mappings(
    api: ClusterAPI, pod: Pod, claim_name: str | None, mappings: Sequence[dict[str, str]] = ()
) -> None:
    """Patch ``pod.status.extendedResourceClaimStatus`` (idempotent: retried on unknown outcomes).

    ``claim_name`` None removes it (a failed bind deleted the claim it named).
    """
    recorded: dict[str, Any] | None = None
    if claim_name is not None:
        recorded = {"requestMappings": [dict(m) for m in mappings], "resourceClaimName": claim_name}
    status = {"extendedResourceClaimStatus": recorded}
    last: ClusterAPIError | None = None
    for _attempt in range(CONFLICT_RETRIES):
        try:
            await api.patch_pod_status(pod.namespace, pod.name, pod.uid, status)
            return
        except ClusterAPIError as exc:
            if not outcome_unknown(exc):
                raise
            last = exc
    assert last is not None
    raise last


async def clear_stale_mapping(api: ClusterAPI, pod: Pod) -> str:
    """Device plugins serve the pod's extended resources here: its status must not name a
    claim an earlier, failed attempt created (and deleted); kubelet would wait for it."""
    status = pod.raw.get("status") if isinstance(pod.raw.get("status"), dict) else {}
    if not (status or {}).get("extendedResourceClaimStatus"):
        return ""
    try:
        await record_mappings(api, pod, None)
    except ClusterAPIError as exc:
        return f"clearing the pod's extendedResourceClaimStatus of an earlier attempt: {exc}"
    return ""
