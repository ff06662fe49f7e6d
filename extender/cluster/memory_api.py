"""The embedded default's API: the :class:`~extender.cluster.api.ClusterAPI` over a MemoryStore."""

from __future__ import annotations

import datetime as _dt
from collections import deque
from typing import Any

from extender.cluster.api import ApiAlreadyExists, ApiConflict, ApiNotFound, ClusterAPIError
from extender.cluster.memstore import AlreadyExists, Conflict, MemoryStore, NotFound, StoreError


def _translate(exc: StoreError) -> ClusterAPIError:
    if isinstance(exc, AlreadyExists):
        return ApiAlreadyExists(str(exc))
    if isinstance(exc, Conflict):
        return ApiConflict(str(exc))
    if isinstance(exc, NotFound):
        return ApiNotFound(str(exc))
    err = ClusterAPIError(str(exc))
    err.code = exc.code
    return err


class MemoryAPI:
    def __init__(self, store: MemoryStore, *, events: int = 200) -> None:
        self.store = store
        #: Recent events, newest last (what ``kubectl get events`` would show).
        self.events: deque[dict[str, Any]] = deque(maxlen=events)

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self.store.get("ResourceClaim", namespace, name)
        except StoreError as exc:
            raise _translate(exc) from None

    async def create_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.store.create(claim)
        except StoreError as exc:
            raise _translate(exc) from None

    async def delete_claim(self, namespace: str, name: str, uid: str) -> None:
        try:
            self.store.delete("ResourceClaim", namespace, name, uid=uid)
        except StoreError as exc:
            raise _translate(exc) from None

    async def update_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.store.update(claim)
        except StoreError as exc:
            raise _translate(exc) from None

    async def update_claim_status(self, claim: dict[str, Any]) -> dict[str, Any]:
        try:
            return self.store.update(claim, status=True)
        except StoreError as exc:
            raise _translate(exc) from None

    async def unreserve_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> dict[str, Any]:
        def drop(obj: dict[str, Any]) -> None:
            if obj["metadata"].get("uid") != claim_uid:
                raise Conflict("precondition failed: claim UID changed")
            status = obj.get("status") or {}
            kept = [e for e in status.get("reservedFor") or [] if e.get("uid") != pod_uid]
            if kept:
                status["reservedFor"] = kept
            else:
                # The allocation stays: kube-controller-manager deallocates only when it removes
                # the last consumer itself (a pod that is gone), not after another client's
                # patch (v1.36.3 pkg/controller/resourceclaim syncClaim); the scheduler's next
                # PostFilter frees it if no node can use it.
                status.pop("reservedFor", None)

        try:
            return self.store.mutate("ResourceClaim", namespace, name, drop)
        except StoreError as exc:
            raise _translate(exc) from None

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        return [
            p for p in self.store.objects("Pod") if (p.get("metadata") or {}).get("namespace") == namespace
        ]

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return self.store.get("Pod", namespace, name)
        except StoreError as exc:
            raise _translate(exc) from None

    async def patch_pod_status(
        self, namespace: str, name: str, uid: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        def patch(obj: dict[str, Any]) -> None:
            if obj["metadata"].get("uid") != uid:
                raise Conflict(
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {obj['metadata'].get('uid')}"
                )
            obj["status"] = _merged(obj.get("status") or {}, status)

        try:
            return self.store.mutate("Pod", namespace, name, patch)
        except StoreError as exc:
            raise _translate(exc) from None

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        def bind(obj: dict[str, Any]) -> None:
            if obj["metadata"].get("uid") != uid:
                raise Conflict(
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {obj['metadata'].get('uid')}"
                )
            spec = obj.setdefault("spec", {})
            if spec.get("nodeName"):
                raise Conflict(f'pod {name} is already assigned to node "{spec["nodeName"]}"')
            spec["nodeName"] = node
            conditions = obj.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True"})

        try:
            self.store.mutate("Pod", namespace, name, bind)
        except StoreError as exc:
            raise _translate(exc) from None

    async def record_event(
        self, pod: dict[str, Any], reason: str, message: str, warning: bool = True
    ) -> None:
        meta = pod.get("metadata") or {}
        self.events.append(
            {
                "type": "Warning" if warning else "Normal",
                "reason": reason,
                "message": message,
                "involvedObject": {
                    "kind": "Pod",
                    "namespace": meta.get("namespace"),
                    "name": meta.get("name"),
                },
                "time": _dt.datetime.now(_dt.UTC).isoformat(),
            }
        )


def _merged(current: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    """Strategic merge of plain structs: maps merge, lists and values replace, None deletes."""
    out = dict(current)
    for key, value in change.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out
