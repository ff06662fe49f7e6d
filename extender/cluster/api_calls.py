"""What an API request was, in the words of an API server's audit log (verb and resource), so
both transports (:class:`~extender.cluster.kube.RawKube` and
:class:`~extender.cluster.async_kube.AsyncKube`) report their calls the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: ``observe(verb, resource, code, seconds)``: one finished request. ``code`` is the HTTP status
#: as text, or :data:`NO_ANSWER`; ``seconds`` runs until the answer's headers (a watch's too).
RequestObserver = Callable[[str, str, str, float], None]
#: The code of a request that got no answer (refused, timed out, connection lost), as client-go's
#: ``rest_client_requests_total`` says it.
NO_ANSWER = "<error>"

_WRITE_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def describe(method: str, path: str, query: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """(verb, resource) of a request: ``("update", "resourceclaims/status")``,
    ``("create", "pods/binding")``, ``("watch", "resourceslices")``; discovery and ``/version``
    are ``("get", "discovery")``."""
    parts = [part for part in path.split("?", 1)[0].split("/") if part]
    # /api/v1/<rest> or /apis/<group>/<version>/<rest>
    skip = 2 if parts[:1] == ["api"] else 3 if parts[:1] == ["apis"] else len(parts) + 1
    rest = parts[skip:]
    if not rest:
        return method.lower(), "discovery"
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    if method != "GET":
        return _WRITE_VERBS.get(method, method.lower()), resource
    if (query or {}).get("watch") in ("true", "1", True):
        return "watch", resource
    return ("get" if len(rest) >= 2 else "list"), resource
