"""Owner-reference garbage collection for the embedded default (kube-controller-manager's part).

In a cluster, the garbage collector deletes the ResourceClaims a deleted Pod owns (the
extended-resource claim the extender creates, and claims generated from templates), and the
resourceclaim controller first drops the pod's reservation and, with no consumer left,
deallocates the claim and removes its delete-protection finalizer. The embedded default has no
controller manager, so this plays both parts over the in-memory store.
"""

from __future__ import annotations

from typing import Any

from extender.cluster.memstore import Event, MemoryStore, StoreError
from extender.model.dra import DELETE_PROTECTION_FINALIZER


def collect_owned_claims(store: MemoryStore) -> None:
    """Delete the ResourceClaims a Pod owns when that Pod is deleted or replaced (another UID)."""
    pods: dict[tuple[str, str], str] = {}
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
        if event.kind != "Pod":
            return
        meta = event.object.get("metadata") or {}
        key = (str(meta.get("namespace") or "default"), str(meta.get("name") or ""))
        uid = str(meta.get("uid") or "")
        if event.type == "DELETED":
            pods.pop(key, None)
            collect(uid)
            return
        previous = pods.get(key)
        pods[key] = uid
        if previous is not None and previous != uid:
            collect(previous)

    for pod in store.objects("Pod"):
        meta = pod.get("metadata") or {}
        pods[(str(meta.get("namespace") or "default"), str(meta.get("name") or ""))] = str(meta.get("uid"))
    for claim in store.objects("ResourceClaim"):
        index_claim(Event("ADDED", "ResourceClaim", claim))
    store.subscribe(on_event)


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
