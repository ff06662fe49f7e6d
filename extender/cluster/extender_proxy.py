"""A running extender's debug views, reached through the API server's service proxy (the I/O
edge of ``kubectl dra``): ``GET /api/v1/namespaces/NS/services/NAME:PORT/proxy/debug/VIEW``.

The API server checks the caller's right to ``get`` the ``services/proxy`` subresource of that
Service (the shipped ``dra-extender-debug`` Role grants it) and forwards the request to one of
its ready endpoints; the extender serves the views there only when started with
``--ops-debug``. Every way this can fail says which of those it was, as a
:class:`NotReachable` that ``kubectl dra`` reports before computing from the objects instead.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from extender.cluster.api import ClusterAPIError
from extender.cluster.kube import RawKube

#: The sidecar deployment's Service and the ops listener's port (manifests/service.yaml).
DEFAULT_SERVICE = "dra-extender/dra-extender-scheduler:metrics"
#: A view computed for someone else meanwhile answers 429: asked again this often.
BUSY_ATTEMPTS = 5
BUSY_PAUSE_SECONDS = 0.5

_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_SERVICE = re.compile(rf"^(?P<ns>{_LABEL})/(?P<name>{_LABEL}):(?P<port>[a-z0-9]([-a-z0-9]*[a-z0-9])?)$")


class NotReachable(Exception):
    """The extender's views could not be asked; the message says why and what would fix it."""


class ViewRefused(Exception):
    """The extender answered, refusing the request (a pod it does not know, a bad query)."""


@dataclass(frozen=True)
class ExtenderService:
    namespace: str
    name: str
    port: str

    @classmethod
    def parse(cls, text: str) -> ExtenderService:
        """``NAMESPACE/SERVICE:PORT`` (the port by name or number); ValueError otherwise."""
        found = _SERVICE.match(text)
        if found is None:
            raise ValueError(f"NAMESPACE/SERVICE:PORT (as {DEFAULT_SERVICE}), not {text!r}")
        return cls(found["ns"], found["name"], found["port"])

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}:{self.port}"

    def path(self, view: str) -> str:
        return f"/api/v1/namespaces/{self.namespace}/services/{self.name}:{self.port}/proxy/debug/{view}"


def ask(
    raw: RawKube,
    service: ExtenderService,
    view: str,
    query: dict[str, str] | None = None,
    *,
    pause: float = BUSY_PAUSE_SECONDS,
) -> Any:
    """The view's JSON answer; :class:`NotReachable` or :class:`ViewRefused` otherwise, and
    ClusterAPIError when the API server itself does not answer."""
    for attempt in range(BUSY_ATTEMPTS):
        try:
            return raw.request("GET", service.path(view), query={"format": "json", **(query or {})})
        except ClusterAPIError as exc:
            said = (exc.answer or {}).get("Error")
            if not exc.code:  # no answer at all: the API server's problem, not the extender's
                raise ClusterAPIError(f"the API server did not answer: {exc}") from None
            if exc.code == 429 and said is not None and attempt + 1 < BUSY_ATTEMPTS:
                time.sleep(pause)  # another view is being computed there
                continue
            raise _explained(service, exc, said) from None
    raise AssertionError("unreachable")  # the loop returns or raises


def _explained(service: ExtenderService, exc: ClusterAPIError, said: Any) -> Exception:
    if said is not None:  # the extender itself answered
        if exc.code == 404 and str(said).startswith("no such endpoint"):
            return NotReachable(
                f"{service} answers, but not with the debug views: its extender runs without --ops-debug"
            )
        if exc.code == 429:
            return NotReachable(f"{service} is busy computing other debug views: {said}")
        return ViewRefused(str(said))
    if exc.code == 403:
        return NotReachable(
            f"not allowed to reach {service} through the API server ({exc}); the dra-extender-debug "
            "Role (manifests/components/debug-views) grants it"
        )
    if exc.code == 404:
        return NotReachable(f"no Service {service.namespace}/{service.name} ({exc})")
    if exc.code == 503:
        return NotReachable(f"{service} has no ready endpoint, or did not answer ({exc})")
    return NotReachable(f"{service}: {exc}")
