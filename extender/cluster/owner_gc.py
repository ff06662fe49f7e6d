"""Owner-reference garbage collection for the embedded default (kube-controller-manager's part).

In a cluster, the garbage collector deletes the ResourceClaims a deleted Pod or PodGroup owns
(the extended-resource claim the extender creates, and claims generated from templates), and the
resourceclaim controller first drops the owner's reservation and, with no consumer left,
deallocates the claim and removes its delete-protection finalizer; a PodGroup that is gone also
loses its reservations of claims it does not own (v1.36.3 pkg/controller/resourceclaim
syncClaim). The embedded default has no controller manager, so this plays those parts over the
in-memory store.
"""

from __future__ import annotations

import contextlib
from typing import Any

from extender.cluster.memstore import Event, MemoryStore, StoreError
from extender.model.dra import DELETE_PROTECTION_FINALIZER


def collect_owned_claims(store: MemoryStore) -> None:
    """Delete the ResourceClaims a Pod owns when that Pod is deleted or replaced (another UID)."""
    #: Pods and PodGroups by (namespace, name) -> UID: a name taken by another UID is a deletion.
    owners: dict[str, dict[tuple[str, str], str]] = {"Pod": {}, "PodGroup": {}}
    #: owner UID -> the claims that name it (namespace, name, claim UID): kept from the claims'
    #: own events, so a pod's deletion costs its claims, not a scan of every claim.
    owned: dict[str, dict[tuple[str, str], str]] = {}
    owners_of: dict[tuple[str, str], set[str]] = {}

    def index_claim(event: Event) -> None:
        meta = event.object.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        for uid in owners_of.pop(key, set()):
            claims = owned.get(uid, {})
            claims.pop(key, None)
            if not claims:
                owned.pop(uid, None)
        if event.type == "DELETED":
            return
        uids = {str(ref.get("uid")) for ref in meta.get("ownerReferences") or [] if ref.get("uid")}
        if uids:
            owners_of[key] = uids
            for uid in uids:
                owned.setdefault(uid, {})[key] = str(meta.get("uid") or "")

    def collect(owner_uid: str) -> None:
        for (namespace, name), claim_uid in list(owned.get(owner_uid, {}).items()):
            release_and_delete(store, namespace, name, owner_uid, claim_uid)

    def on_event(event: Event) -> None:
        if event.kind == "ResourceClaim":
            index_claim(event)
            return
        known = owners.get(event.kind)
        if known is None:
            return
        meta = event.object.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        uid = str(meta.get("uid") or "")
        previous = known.pop(key, None) if event.type == "DELETED" else known.get(key)
        if event.type != "DELETED":
            known[key] = uid
            if previous is None or previous == uid:
                return
        gone = uid if event.type == "DELETED" else str(previous)
        collect(gone)
        if event.kind == "PodGroup":
            unreserve_everywhere(store, gone)

    for kind, known in owners.items():
        for obj in store.objects(kind):
            meta = obj.get("metadata") or {}
            known[(str(meta.get("namespace") or "default"), str(meta.get("name") or ""))] = str(
                meta.get("uid")
            )
    for claim in store.objects("ResourceClaim"):
        index_claim(Event("ADDED", "ResourceClaim", claim))
    store.subscribe(on_event)


def unreserve_everywhere(store: MemoryStore, consumer_uid: str) -> None:
    """A PodGroup is gone: every claim reserved for it loses that reservation (unused then, it is
    deallocated, as the resourceclaim controller does when it removes the last consumer)."""
    for claim in store.objects("ResourceClaim"):
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        if any(e.get("uid") == consumer_uid for e in reserved):
            meta = claim["metadata"]
            namespace = str(meta.get("namespace") or "default")
            with contextlib.suppress(StoreError):
                store.mutate("ResourceClaim", namespace, meta["name"], lambda o: _release(o, consumer_uid))


def release_and_delete(
    store: MemoryStore, namespace: str, name: str, pod_uid: str, claim_uid: str | None = None
) -> None:
    """What the cluster does with a claim whose pod is gone: the resourceclaim controller drops
    the pod's reservation (unused, the claim is deallocated and unprotected), then the claim is
    deleted (``claim_uid``: precondition). A claim changed or gone meanwhile is left alone."""
    try:
        store.mutate("ResourceClaim", namespace, name, lambda obj: _release(obj, pod_uid))
        store.delete("ResourceClaim", namespace, name, uid=claim_uid)
    except StoreError:
        pass


def _release(obj: dict[str, Any], pod_uid: str) -> None:
    """The resourceclaim controller: drop the pod's reservation; unused, deallocate and unprotect."""
    status = obj.get("status") or {}
    kept = [e for e in status.get("reservedFor") or [] if e.get("uid") != pod_uid]
    if kept:
        status["reservedFor"] = kept
        return
    for field in ("reservedFor", "allocation", "devices"):
        status.pop(field, None)
    finalizers = obj["metadata"].get("finalizers") or []
    if DELETE_PROTECTION_FINALIZER in finalizers:
        finalizers.remove(DELETE_PROTECTION_FINALIZER)
