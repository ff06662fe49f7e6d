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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.cluster.api import ClusterAPIError
from extender.cluster.kube import OpenAnswer, RawKube
from extender.defaults import LAST_DECISION_HEADER, REPLICA_HEADER

#: The sidecar deployment's Service and the ops listener's port (manifests/service.yaml).
DEFAULT_SERVICE = "dra-extender/dra-extender-scheduler:metrics"
#: A replica that decided within this many seconds is taken as the active one; others are
#: asked again, this many times in all (the Service's two replicas: one leads).
ACTIVE_SECONDS = 60.0
ACTIVE_ATTEMPTS = 3
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


@dataclass(frozen=True)
class Replica:
    """Which of the Service's replicas answered (``X-Dra-Extender-Replica``), and how many
    seconds before it had last decided (None: never since it started). ``named`` is False for
    an extender that names no replica (older than these headers): its answer is taken as is."""

    name: str
    last_decision: float | None
    named: bool = True

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Replica:
        name = headers.get(REPLICA_HEADER.lower())
        if name is None:
            return cls("unknown", None, named=False)
        try:
            seconds: float | None = float(headers.get(LAST_DECISION_HEADER.lower(), "never"))
        except ValueError:
            seconds = None
        return cls(name, seconds)

    @property
    def active(self) -> bool:
        """Decided within :data:`ACTIVE_SECONDS` (or names no replica: nothing to choose)."""
        return not self.named or (self.last_decision is not None and self.last_decision <= ACTIVE_SECONDS)

    def later_than(self, other: Replica) -> bool:
        return self.last_decision is not None and (
            other.last_decision is None or self.last_decision < other.last_decision
        )


def ask(
    raw: RawKube,
    service: ExtenderService,
    view: str,
    query: dict[str, str] | None = None,
    *,
    pause: float = BUSY_PAUSE_SECONDS,
    attempts: int = ACTIVE_ATTEMPTS,
) -> tuple[Any, Replica]:
    """The view's JSON answer and the replica that gave it; :class:`NotReachable` or
    :class:`ViewRefused` otherwise, and ClusterAPIError when the API server itself does not
    answer. The proxy sends each request to any ready replica: while the one that answered has
    not decided within :data:`ACTIVE_SECONDS` (a standby's views lack binds in flight and
    decisions), it asks again, up to ``attempts`` times, and keeps the answer of the replica
    that decided last. A body is read only when its replica is the best so far (a snapshot is
    28 MB at 5,000 nodes); once one answer is in hand, a later attempt that fails is ignored."""
    best: tuple[Any, Replica] | None = None
    for _ in range(attempts):
        try:
            opened = _open(raw, service, view, query, pause)
            replica = Replica.from_headers(opened.headers)
            if best is not None and not replica.later_than(best[1]):
                opened.close()
                continue
            best = (_body(service, opened), replica)
        except (NotReachable, ViewRefused):
            if best is None:
                raise
            break  # keep the answer in hand (the other replica is busy, or being replaced)
        if replica.active:
            break
    assert best is not None
    return best


def _open(
    raw: RawKube, service: ExtenderService, view: str, query: dict[str, str] | None, pause: float
) -> OpenAnswer:
    for attempt in range(BUSY_ATTEMPTS):
        try:
            return raw.open_get(service.path(view), query={"format": "json", **(query or {})})
        except ClusterAPIError as exc:
            said = (exc.answer or {}).get("Error")
            if not exc.code:  # no answer at all: the API server's problem, not the extender's
                raise ClusterAPIError(f"the API server did not answer: {exc}") from None
            if exc.code == 429 and said is not None and attempt + 1 < BUSY_ATTEMPTS:
                time.sleep(pause)  # another view is being computed there
                continue
            raise _explained(service, exc, said) from None
    raise AssertionError("unreachable")  # the loop returns or raises


def _body(service: ExtenderService, opened: OpenAnswer) -> Any:
    try:
        return opened.json()
    except ClusterAPIError as exc:  # broken off or not JSON: the extender's answer was unusable
        raise NotReachable(f"{service} sent an answer that could not be read ({exc})") from None


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
