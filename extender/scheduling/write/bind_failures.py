"""Why a bind failed, as one short word: ``dra_extender_bind_failures_total{reason}``.

kube-scheduler retries a failed bind with back-off and writes a FailedScheduling event; the
in-tree plugin reserves devices synchronously and fails almost none. Each reason here is a race
or a fault an operator can act on (issue 30: ``claim-not-created`` was the extender's pod cache
lagging kube-scheduler's, ``devices-unavailable`` a filter that passed a node whose last devices
a bind already decided was taking). Read off the binder's own messages, first match wins.
"""

from __future__ import annotations

import re

#: (pattern of the binder's error, reason), in order.
REASONS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), reason)
    for pattern, reason in (
        (r"replica may not bind", "not-leader"),
        (r"cache is stale", "stale-cache"),
        (r"^refused", "refused"),
        (r"^pod not found|^pod UID mismatch", "pod-not-found"),
        (r"^pod is (already|being) bound", "already-bound"),
        (r'^pod is being deleted|being deleted, cannot be assigned|pods? "[^"]*" not found', "pod-deleted"),
        (r"^node \S+ not found", "node-not-found"),
        (r"ResourceClaim not created yet", "claim-not-created"),
        # The API server names the resource (plural, with its group); the embedded store the kind.
        (r'resourceclaims?(\.resource\.k8s\.io)? "[^"]*" not found', "claim-not-found"),
        (r"still hold the devices", "release-timeout"),
        (r"binding conditions", "binding-conditions"),
        (r"is not settled", "earlier-write-unsettled"),
        (r"^cannot bind to", "devices-unavailable"),
        (r"shutting down", "shutdown"),
        (r"^internal error", "internal"),
    )
)
#: Every reason the metric may carry (pre-created at zero).
ALL = (*dict.fromkeys(reason for _pattern, reason in REASONS), "api-error")


def reason(error: str) -> str:
    """The reason of a bind's error message; ``api-error`` for a write the API server refused."""
    for pattern, name in REASONS:
        if pattern.search(error):
            return name
    return "api-error"
