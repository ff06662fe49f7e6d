"""The embedded default's API: the :class:`~extender.cluster.api.ClusterAPI` over a MemoryStore."""

from __future__ import annotations

import datetime as _dt
from collections import deque
from typing import Any

import orjson

from extender.cluster.api import ApiAlreadyExists, ApiConflict, ApiNotFound, ClusterAPIError, api_error
from extender.cluster.memstore import AlreadyExists, Conflict, MemoryStore, NotFound, StoreError
from extender.model.errors import ObjectError
from extender.model.policy import parse_pod_disruption_budget

#: kube-apiserver's MaxDisruptedPodSize: past it, a budget refuses evictions (403).
MAX_DISRUPTED_PODS = 2000
#: The phases the eviction subresource deletes in without a budget check (canIgnorePDB).
PHASES_NOT_GUARDED = ("Pending", "Succeeded", "Failed")
MORE_THAN_ONE_BUDGET = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)


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

    async def evict_pod(self, namespace: str, name: str, uid: str) -> None:
        """The eviction subresource (pkg/registry/core/pod/storage/eviction.go) over the store's
        PodDisruptionBudgets: a Pending, Succeeded, Failed or terminating pod is deleted without
        a budget check; more than one budget selecting the pod is a 500; an unready pod goes
        without spending budget when its budget is otherwise healthy (or says AlwaysAllow);
        else the budget must be current (observedGeneration) and allow a disruption (429
        otherwise, the cause ``DisruptionBudget``), and it is spent in one atomic status write
        (``disruptionsAllowed`` - 1, the pod in ``disruptedPods``) before the pod gets the
        ``DisruptionTarget`` condition and is deleted. Unlike kube-apiserver, which checks the
        UID precondition only at the delete (after spending the budget), the UID is checked
        first: with no disruption controller here, a budget spent on a refused eviction would
        never come back."""
        try:
            pod = self.store.get("Pod", namespace, name)
            _check_uid(pod, uid)
            meta, status = pod["metadata"], pod.get("status") or {}
            if status.get("phase") not in PHASES_NOT_GUARDED and not meta.get("deletionTimestamp"):
                self._spend_budget(namespace, pod)
            self.store.mutate("Pod", namespace, name, lambda obj: _mark_disruption_target(obj, uid))
            self.store.delete("Pod", namespace, name, uid=uid)
        except StoreError as exc:
            raise _translate(exc) from None

    def _spend_budget(self, namespace: str, pod: dict[str, Any]) -> None:
        """Check the pod's budget and spend one disruption of it (nothing when none selects it)."""
        labels = pod["metadata"].get("labels")
        labels = labels if isinstance(labels, dict) else {}
        budgets = []
        for obj in self.store.objects("PodDisruptionBudget"):
            try:
                budget = parse_pod_disruption_budget(obj)
            except ObjectError:
                continue
            # eviction.go: an invalid, nil or empty selector matches nothing; unlabelled pods
            # are matched like any other.
            if budget.namespace == namespace and budget.selector and budget.selector.matches(labels):
                budgets.append(budget)
        if len(budgets) > 1:
            raise _refusal(500, "", MORE_THAN_ONE_BUDGET)
        if not budgets:
            return
        budget = budgets[0]
        if not _ready(pod) and _unready_may_go(budget.raw):
            return

        def spend(obj: dict[str, Any]) -> None:
            _check_budget(obj)
            status = obj.setdefault("status", {})
            status["disruptionsAllowed"] = _int(status.get("disruptionsAllowed")) - 1
            disrupted = status.get("disruptedPods")
            if not isinstance(disrupted, dict):
                disrupted = status["disruptedPods"] = {}
            disrupted[pod["metadata"]["name"]] = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        # Checked and spent under the store's lock (a refusal raised in ``spend`` writes
        # nothing): concurrent evictions serialize on it, as on the budget's resourceVersion.
        self.store.mutate("PodDisruptionBudget", namespace, budget.name, spend)

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


def _refusal(code: int, reason: str, message: str, **details: Any) -> ClusterAPIError:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "code": code,
    }
    if reason:
        status["reason"] = reason
    if details:
        status["details"] = details
    return api_error(code, reason, orjson.dumps(status))


def _too_many_requests(cause: str, retry_after: int) -> ClusterAPIError:
    """eviction.go's 429: the budget allows no disruption now (the cause says which and why)."""
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return _refusal(
        429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.", **details
    )


def _forbidden(name: str, why: str) -> ClusterAPIError:
    return _refusal(
        403,
        "Forbidden",
        f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
        name=name,
        group="policy",
        kind="poddisruptionbudget",
    )


def _check_budget(pdb: dict[str, Any]) -> None:
    """eviction.go checkAndDecrement's refusals, in its order."""
    meta, status = pdb.get("metadata") or {}, pdb.get("status") or {}
    name = str(meta.get("name", ""))
    if _int(status.get("observedGeneration")) < _int(meta.get("generation")):
        raise _too_many_requests(f"The disruption budget {name} is still being processed by the server.", 10)
    allowed = _int(status.get("disruptionsAllowed"))
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_PODS:
        raise _forbidden(
            name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )
    if allowed == 0:
        raise _too_many_requests(
            f"The disruption budget {name} needs {_int(status.get('desiredHealthy'))} healthy pods "
            f"and has {_int(status.get('currentHealthy'))} currently",
            0,
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict)
    )


def _unready_may_go(pdb: dict[str, Any]) -> bool:
    """An unready pod is deleted without spending the budget: its policy says AlwaysAllow, or
    (IfHealthyBudget, the default) the budget has all the healthy pods it needs."""
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    status = pdb.get("status") or {}
    desired = _int(status.get("desiredHealthy"))
    return desired > 0 and _int(status.get("currentHealthy")) >= desired


def _check_uid(pod: dict[str, Any], uid: str) -> None:
    if pod["metadata"].get("uid") != uid:
        raise Conflict(
            f'Operation cannot be fulfilled on Pod "{pod["metadata"].get("name")}": the UID in the '
            f"precondition ({uid}) does not match the UID in record ({pod['metadata'].get('uid')}). "
            "The object might have been deleted and then recreated"
        )


def _mark_disruption_target(pod: dict[str, Any], uid: str) -> None:
    """What the eviction writes before it deletes (addConditionAndDeletePod)."""
    _check_uid(pod, uid)
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    conditions[:] = [c for c in conditions if c.get("type") != "DisruptionTarget"]
    conditions.append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
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
