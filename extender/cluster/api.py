"""The few API calls the extender makes, as an interface: the in-memory store and the API server
implement it; the claim-writing logic is written once against it.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson


class ClusterAPIError(Exception):
    """A failed API call; ``code`` is the HTTP status (0 when there was no answer), ``answer``
    the body it came with when that was a JSON object (a Status; through the service proxy,
    whatever the service answered)."""

    code = 0
    answer: dict[str, Any] | None = None


class NotSent(ClusterAPIError):
    """The request was not sent, so the API server cannot have applied it."""


class NotLeading(NotSent):
    """A write this replica may not send: its lease lapsed (or it never held it)."""


class FencedByStore(ClusterAPIError):
    """The API server refused a write because this replica does not hold the Lease: the
    admission policy of ``manifests/`` (store-enforced fencing) checked the writer against the
    Lease's holder. Not applied; not to be retried by this replica."""

    code = 403


#: The name of the ValidatingAdmissionPolicy ``manifests/`` ship for store-enforced fencing
#: (kube-apiserver names it in every refusal).
FENCE_POLICY = "dra-extender-leader-writes"


class ApiConflict(ClusterAPIError):
    code = 409


class ApiAlreadyExists(ApiConflict):
    """409 with reason AlreadyExists: a create found the name taken."""


class ApiNotFound(ClusterAPIError):
    code = 404


class ApiTooManyRequests(ClusterAPIError):
    """429: for an eviction, "not now": a PodDisruptionBudget allows no disruption (``budget``:
    the Status names the cause ``DisruptionBudget``), or the API server throttled the request."""

    code = 429

    @property
    def budget(self) -> bool:
        details = (self.answer or {}).get("details") or {}
        causes = details.get("causes") if isinstance(details, dict) else None
        return any(isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes or ())


def api_error(status: int, reason: str, body: bytes | str | None) -> ClusterAPIError:
    """The error for an API server's answer with this HTTP status (its Status body read for the
    message and reason)."""
    message = f"{status} {reason}".strip()
    kind = ""
    try:
        decoded = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict):
        if decoded.get("message"):
            message = f"{status}: {decoded['message']}"
        kind = str(decoded.get("reason") or "")
    error: ClusterAPIError
    if status == 409 and kind == "AlreadyExists":
        error = ApiAlreadyExists(message)
    elif status == 409:
        error = ApiConflict(message)
    elif status == 404:
        error = ApiNotFound(message)
    elif status == 429:
        error = ApiTooManyRequests(message)
    elif status == 403 and f"ValidatingAdmissionPolicy '{FENCE_POLICY}" in message:
        error = FencedByStore(message)
    else:
        error = ClusterAPIError(message)
        error.code = status or 0
    error.answer = decoded if isinstance(decoded, dict) else None
    return error


class ClusterAPI(Protocol):
    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        """The current ResourceClaim (raw)."""

    async def create_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        """POST a ResourceClaim (v1 shape); :class:`ApiAlreadyExists` when the name is taken."""

    async def delete_claim(self, namespace: str, name: str, uid: str) -> None:
        """DELETE the claim with its UID as precondition (404 when it is gone already)."""

    async def update_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        """PUT the claim (finalizers); the resourceVersion is a precondition (409 when stale)."""

    async def update_claim_status(self, claim: dict[str, Any]) -> dict[str, Any]:
        """PUT the claim's status subresource; the resourceVersion is a precondition."""

    async def unreserve_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> dict[str, Any]:
        """Remove the pod's reservedFor entry (upstream Unreserve's strategic-merge patch).

        Returns the claim afterwards."""

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        """The current Pod (raw): to learn whether an unanswered Binding went through."""

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's Pods as the API server has them now (raw)."""

    async def patch_pod_status(
        self, namespace: str, name: str, uid: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Strategic-merge ``status`` into the pod's status (its UID as precondition); the pod after."""

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Create the pod's Binding with the UID as precondition."""

    async def evict_pod(self, namespace: str, name: str, uid: str) -> None:
        """POST the pod's policy/v1 Eviction with its UID as precondition (never a plain DELETE:
        the API server checks the pod's PodDisruptionBudgets). :class:`ApiTooManyRequests` (429:
        a budget allows no disruption now, or throttling), :class:`ApiNotFound` (the pod is
        gone), :class:`ApiConflict` (the name is another pod's now); 500 when more than one
        budget selects the pod, 403 when a budget cannot be honoured."""

    async def record_event(
        self, pod: dict[str, Any], reason: str, message: str, warning: bool = True
    ) -> None:
        """Best effort: an Event on the pod."""
