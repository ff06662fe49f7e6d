"""Writing a claim's allocation and reservation exactly as the in-tree scheduler does (PreBind).

Per claim: add the ``resource.kubernetes.io/delete-protection`` finalizer with an Update of the
claim, then one UpdateStatus carrying ``status.allocation`` and our ``reservedFor`` entry; both
guarded by resourceVersion and retried on 409 after a fresh GET. An already allocated (shared)
claim only gets our ``reservedFor`` entry. A claim allocated elsewhere in the meantime fails.

Beyond upstream, a write whose outcome is unknown (no answer, a 5xx, an answer that does not
show the write) is settled here by reading the claim back: our reservation is there (written),
the claim moved on without it (not written: try again on the new version), or it is unchanged
(the write may still land: send the same write again, so at most one of them applies). When the
read fails too, :class:`WriteOutcomeUnknown` tells the caller to keep the devices taken.

Rolling back (after a later step failed) releases only what we can prove we wrote.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from extender.cluster.api import ApiConflict, ClusterAPI, ClusterAPIError, NotSent
from extender.cluster.memstore import clone
from extender.model.core import Pod
from extender.model.dra import DELETE_PROTECTION_FINALIZER, ResourceClaim

#: retry.DefaultRetry: 5 attempts for 409 Conflict; we also spend them on unknown outcomes.
CONFLICT_RETRIES = 5


class ClaimWriteError(Exception):
    """The claim was not reserved for the pod, and nothing of this attempt can land later."""


class WriteOutcomeUnknown(ClaimWriteError):
    """The status write may have been applied: its devices must stay taken until the cache shows."""


def reserved_for_entry(pod: Pod) -> dict[str, str]:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


#: A ``status.reservedFor`` entry: the pod's own (:func:`reserved_for_entry`) or, with
#: DRAWorkloadResourceClaims, its PodGroup's (``PodGroup.consumer``).
Consumer = dict[str, str]


def is_reserved_for(raw: dict[str, Any], pod_uid: str) -> bool:
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    assert isinstance(status, dict)
    return any(isinstance(e, dict) and e.get("uid") == pod_uid for e in status.get("reservedFor") or [])


def outcome_unknown(exc: ClusterAPIError) -> bool:
    """No answer, or a server error: the API server may have applied the request."""
    if isinstance(exc, NotSent):
        return False
    return exc.code == 0 or exc.code >= 500


def _where(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    return f"resourceclaim {meta.get('namespace')}/{meta.get('name')}"


def _rv(raw: dict[str, Any]) -> str:
    return str((raw.get("metadata") or {}).get("resourceVersion") or "")


async def reserve_claim(
    api: ClusterAPI,
    claim: ResourceClaim,
    allocation: dict[str, Any] | None,
    pod: Pod,
    *,
    sending: Callable[[str], None] = lambda _rv: None,
    on_conflict: Callable[[], None] | None = None,
    pending_since: str | None = None,
    allocated_at: str | None = None,
    consumer: Consumer | None = None,
) -> dict[str, Any]:
    """Store ``allocation`` (None: the claim is already allocated) and reserve the claim for ``pod``.

    ``consumer``: the ``reservedFor`` entry to add, when not the pod's own (a claim the pod
    uses on behalf of its PodGroup is reserved for the group, as upstream PreBind's
    ``podResourceClaimBindings``; the group's entry found there means written, whichever
    member wrote it).

    ``allocated_at`` (RFC 3339; binding-condition gates on): written as the new allocation's
    ``allocationTimestamp``, as upstream bindClaim does, so the binding timeout can be measured
    from it.

    Returns the claim as written. ``sending(rv)`` is called before every status write with the
    resourceVersion it is based on; ``on_conflict`` for every 409 (metrics). Raises
    :class:`WriteOutcomeUnknown` when a status write may still be applied, :class:`ClaimWriteError`
    when none can. ``pending_since``: this sends again a status write with an unknown outcome,
    based on that resourceVersion (so it may land still, unless a read shows the claim moved on).
    """
    ns, name = claim.namespace, claim.name
    entry = consumer if consumer is not None else reserved_for_entry(pod)
    # Copies of what a write changes only (the top level, metadata, status); nested parts are
    # shared with the cached claim and never changed in place. Deep copies through orjson of
    # each claim, twice per write, were 0.8% of the extender's CPU at 500 x 8 (issue 54).
    raw = dict(claim.raw)
    #: The base resourceVersion of a status write that may still land; None once a read showed
    #: the claim moved past it without our reservation (then it never can).
    maybe_pending: str | None = pending_since
    last_error = "no attempt made"
    for _attempt in range(CONFLICT_RETRIES):
        try:
            return await _reserve_once(api, raw, allocation, entry, sending, allocated_at)
        except ApiConflict as exc:
            if on_conflict is not None:
                on_conflict()
            last_error = str(exc)
        except _Unanswered as exc:
            if exc.base is not None:
                maybe_pending = exc.base
            last_error = str(exc)
        except (ClaimWriteError, ClusterAPIError) as exc:
            if maybe_pending is None:
                raise ClaimWriteError(f"resourceclaim {ns}/{name}: {exc}") from None
            last_error = str(exc)
        try:
            raw = await api.get_claim(ns, name)
        except ClusterAPIError as exc:
            if maybe_pending is not None:
                raise WriteOutcomeUnknown(
                    f"resourceclaim {ns}/{name}: the outcome of the status write is unknown "
                    f"({last_error}) and reading the claim back failed: {exc}"
                ) from None
            raise ClaimWriteError(f"resourceclaim {ns}/{name}: {last_error}; read back: {exc}") from None
        if is_reserved_for(raw, entry["uid"]):
            _check_found(raw, allocation)
            return raw  # an earlier write of ours (or, for a PodGroup, a member's) landed
        if maybe_pending is not None and _rv(raw) != maybe_pending:
            maybe_pending = None
    if maybe_pending is not None:
        raise WriteOutcomeUnknown(f"resourceclaim {ns}/{name}: outcome unknown: {last_error}")
    raise ClaimWriteError(f"resourceclaim {ns}/{name}: {last_error} (after {CONFLICT_RETRIES} attempts)")


class _Unanswered(Exception):
    """No usable answer: retry after a fresh read. ``base``: the status write's base, if one was sent."""

    def __init__(self, message: str, base: str | None) -> None:
        super().__init__(message)
        self.base = base


async def _answered(write: Awaitable[dict[str, Any]], what: str, base: str | None) -> dict[str, Any]:
    """The write's answer; a write that may have been applied unanswered is :class:`_Unanswered`."""
    try:
        return await write
    except ClusterAPIError as exc:
        if outcome_unknown(exc):
            raise _Unanswered(f"{what}: {exc}", base) from None
        raise


async def _add_finalizer(api: ClusterAPI, raw: dict[str, Any]) -> dict[str, Any]:
    """Update of the claim with our finalizer; the claim as it is afterwards."""
    meta = dict(raw["metadata"])
    meta["finalizers"] = [*(meta.get("finalizers") or []), DELETE_PROTECTION_FINALIZER]
    updated = {**raw, "metadata": meta}
    answer = await _answered(api.update_claim(updated), f"{_where(raw)}: adding the finalizer", None)
    if not isinstance(answer.get("metadata"), dict):
        raise _Unanswered(f"{_where(raw)}: malformed answer to the finalizer update", None)
    return answer


async def _reserve_once(
    api: ClusterAPI,
    raw: dict[str, Any],
    allocation: dict[str, Any] | None,
    entry: Consumer,
    sending: Callable[[str], None],
    allocated_at: str | None = None,
) -> dict[str, Any]:
    where = _where(raw)
    meta = raw.get("metadata")
    if not isinstance(meta, dict):
        raise ClaimWriteError(f"{where}: malformed object from the API server (no metadata)")
    if meta.get("deletionTimestamp"):
        raise ClaimWriteError(f"{where} got deleted in the meantime")
    if is_reserved_for(raw, entry["uid"]):
        _check_found(raw, allocation)
        return raw  # an earlier attempt for this pod (or its group) got this far: idempotent
    status = dict(raw["status"]) if isinstance(raw.get("status"), dict) else {}
    if allocation is not None:
        if status.get("allocation"):
            raise ClaimWriteError(f"{where} got allocated elsewhere in the meantime")
        if DELETE_PROTECTION_FINALIZER not in (meta.get("finalizers") or []):
            raw = await _add_finalizer(api, raw)
        status["allocation"] = dict(allocation)  # its own: a timestamp may be added
        if allocated_at is not None and not allocation.get("allocationTimestamp"):
            # Only on an allocation we write: an existing one is immutable (422 from the API server).
            status["allocation"]["allocationTimestamp"] = allocated_at
    elif not status.get("allocation"):
        raise ClaimWriteError(f"{where} is not allocated anymore")
    status["reservedFor"] = [*(status.get("reservedFor") or []), dict(entry)]
    raw["status"] = status
    base = _rv(raw)
    sending(base)
    answer = await _answered(api.update_claim_status(raw), where, base)
    if not is_reserved_for(answer, entry["uid"]):
        raise _Unanswered(f"{where}: the answer to the status write does not show it", base)
    return answer


def allocated_devices(allocation: Any) -> list[tuple[Any, ...]]:
    """The (request, driver, pool, device) results of a raw ``status.allocation``, sorted."""
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return sorted((r.get("request"), r.get("driver"), r.get("pool"), r.get("device")) for r in results)


def _check_found(raw: dict[str, Any], allocation: dict[str, Any] | None) -> None:
    """A claim found already reserved for the pod serves this write only if it holds the
    devices this write was to allocate. An earlier attempt for the pod may have allocated it
    elsewhere (and bound the pod there): taking that as ours would bind the pod to another
    node, or release an allocation a bound pod uses."""
    if allocation is None:
        return
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    assert isinstance(status, dict)
    if allocated_devices(status.get("allocation")) != allocated_devices(allocation):
        raise ClaimWriteError(
            f"{_where(raw)} is already allocated to other devices and reserved for this pod or "
            "its PodGroup (an earlier attempt); this bind leaves it as it is"
        )


def deallocated(raw: dict[str, Any]) -> dict[str, Any]:
    """The claim with allocation, reservations and device status cleared (upstream PostFilter)."""
    out = clone(raw)
    status = out.get("status") if isinstance(out.get("status"), dict) else {}
    assert isinstance(status, dict)
    out["status"] = {k: v for k, v in status.items() if k not in ("allocation", "reservedFor", "devices")}
    return out


async def release_claim(
    api: ClusterAPI, written: dict[str, Any], pod: Pod, *, allocated_here: bool
) -> dict[str, Any]:
    """Undo our write of ``written`` (the claim as the API server answered it) for ``pod``.

    When we allocated it and it is still exactly as written, with only our reservation, one
    UpdateStatus (precondition: the written resourceVersion) clears allocation and reservation:
    its devices are free at once. Otherwise (the claim moved on, e.g. another pod reserved it
    too) only our ``reservedFor`` entry is removed, with upstream Unreserve's patch. The claim
    then stays allocated (kube-controller-manager deallocates only when it removes the last
    consumer itself) until a PostFilter frees it or a pod uses it. Returns the claim afterwards.
    """
    meta = written.get("metadata") or {}
    status = written.get("status") if isinstance(written.get("status"), dict) else {}
    assert isinstance(status, dict)
    if allocated_here and [e.get("uid") for e in status.get("reservedFor") or []] == [pod.uid]:
        try:
            return await api.update_claim_status(deallocated(written))
        except ApiConflict:
            pass  # changed since we wrote it: release only our own part
    return await api.unreserve_claim(
        str(meta.get("namespace")), str(meta.get("name")), str(meta.get("uid")), pod.uid
    )


async def group_reservation_holds(api: ClusterAPI, claim: ResourceClaim, group: str) -> str | None:
    """A claim the cache shows reserved for the pod's PodGroup gets no write at bind: read
    fresh, it must still be, with the same devices (None), for the pod to be bound on it. This
    extender's own PostFilter may have removed the group's reservation (or deallocated the
    claim) in a write its watch does not show yet."""
    where = f"resourceclaim {claim.namespace}/{claim.name}"
    try:
        raw = await api.get_claim(claim.namespace, claim.name)
    except ClusterAPIError as exc:
        return f"{where}: reading it back: {exc}"
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    assert isinstance(status, dict)
    held = any(
        isinstance(e, dict)
        and e.get("apiGroup") == "scheduling.k8s.io"
        and e.get("resource") == "podgroups"
        and e.get("name") == group
        for e in status.get("reservedFor") or []
    )
    same = (raw.get("metadata") or {}).get("uid") == claim.uid and allocated_devices(
        status.get("allocation")
    ) == allocated_devices((claim.raw.get("status") or {}).get("allocation"))
    if held and same:
        return None
    return (
        f"{where} is no longer reserved for pod group {group} with the devices the cache shows; not binding"
    )
