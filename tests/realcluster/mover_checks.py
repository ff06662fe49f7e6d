"""What the make-room mover's runs check on the real control plane (tests/realcluster/
fragmented.py builds their cluster).

:class:`ClaimWatch` checks, on every change of a claim the API server's watch shows, that no
device is allocated to two claims; :func:`evictions` and :func:`pod_deletes` read what the
extender's identity asked of pods from the audit log; :func:`eviction_rights` grants the extender
what manifests/components/make-room grants it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from tests.realcluster.api import Api, ApiError
from tests.realcluster.bind_watch import Watching
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.fragmented import NAMESPACE


class Eviction(NamedTuple):
    pod: str
    code: int
    #: The refusal's message (a budget's 429 names the disruption budget).
    message: str

    @property
    def by_budget(self) -> bool:
        return self.code == 429 and "disruption budget" in self.message.lower()


def evictions(plane: ControlPlane, since: int = 0) -> list[Eviction]:
    """Every eviction the extender's identity asked for, from the audit log's line ``since`` on,
    in order."""
    return _evictions(plane.audit_events()[since:])


def _evictions(events: list[dict[str, Any]]) -> list[Eviction]:
    out = []
    for event in events:
        ref = event.get("objectRef") or {}
        if (
            ref.get("resource") == "pods"
            and ref.get("subresource") == "eviction"
            and event.get("verb") == "create"
        ):
            status = event.get("responseStatus") or {}
            out.append(
                Eviction(str(ref.get("name")), int(status.get("code", 0)), str(status.get("message", "")))
            )
    return out


class AuditTail:
    """The audit log from now on (read from where it ended when made: the session's log is long)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.path = plane.audit_log
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def events(self) -> list[dict[str, Any]]:
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            text = handle.read().decode(errors="replace")
        out = []
        for line in text.splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def evictions(self) -> list[Eviction]:
        return _evictions(self.events())

    def pod_deletes(self) -> list[str]:
        return _pod_deletes(self.events())


def pod_deletes(plane: ControlPlane, since: int = 0) -> list[str]:
    """Plain DELETEs of pods by the extender's identity (the mover must never send one)."""
    return _pod_deletes(plane.audit_events()[since:])


def _pod_deletes(events: list[dict[str, Any]]) -> list[str]:
    return [
        f"{event.get('requestURI')} ({event.get('userAgent')})"
        for event in events
        if event.get("verb") == "delete"
        and (event.get("objectRef") or {}).get("resource") == "pods"
        and not (event.get("objectRef") or {}).get("subresource")
    ]


class ClaimWatch(Watching):
    """Every claim change the API server's watch shows, each checked at once: no device allocated
    to two claims at any resourceVersion (none of these devices allows shared allocation, and
    no claim here asks for admin access)."""

    what = "claim watch"

    def __init__(self, plane: ControlPlane, namespace: str = NAMESPACE) -> None:
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        self.claims: dict[str, dict[str, Any]] = {}
        listed = plane.api.request("GET", path)
        for claim in listed.get("items") or []:
            self.claims[claim["metadata"]["uid"]] = claim
        self.violations: list[str] = []
        self.changes = 0
        #: device -> the claims (names) it was ever allocated to, in order.
        self.history: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        self.rv = listed["metadata"]["resourceVersion"]
        self._check()
        super().__init__(plane, path, self.rv)

    def _event(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        meta = obj.get("metadata") or {}
        self.rv = meta.get("resourceVersion", self.rv)
        kind = event.get("type")
        if kind == "ERROR":  # too old a resourceVersion: list again
            listed = self.plane.api.request("GET", self.path)
            self.claims = {c["metadata"]["uid"]: c for c in listed.get("items") or []}
            self.rv = listed["metadata"]["resourceVersion"]
        elif kind in ("ADDED", "MODIFIED"):
            self.claims[meta["uid"]] = obj
        elif kind == "DELETED":
            self.claims.pop(meta["uid"], None)
        else:
            return
        self.changes += 1
        self._check()

    def _check(self) -> None:
        holders: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for claim in self.claims.values():
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for result in (allocation.get("devices") or {}).get("results") or []:
                device = (result["driver"], result["pool"], result["device"])
                holders[device].append(claim["metadata"]["name"])
        for device, names in holders.items():
            if len(names) > 1:
                self.violations.append(f"at {self.rv}: {'/'.join(device)} allocated to {sorted(names)}")
            name = names[0]
            seen = self.history[device]
            if not seen or seen[-1] != name:
                seen.append(name)


def wait_budgets(api: Api, name: str, allowed: int, timeout: float = 30.0) -> dict[str, Any]:
    """The budget ``name`` once its status allows ``allowed`` disruptions (for its generation)."""

    def settled() -> dict[str, Any] | None:
        pdb = api.get("PodDisruptionBudget", name, NAMESPACE)
        if pdb is None:
            return None
        status = pdb.get("status") or {}
        if (
            status.get("observedGeneration") == pdb["metadata"]["generation"]
            and status.get("disruptionsAllowed") == allowed
        ):
            return pdb
        return None

    return dict(api.wait_for(settled, timeout=timeout, what=f"PodDisruptionBudget {name} allowing {allowed}"))


def evict(api: Api, name: str, uid: str | None = None) -> int:
    """An eviction of pod ``name`` as the admin: the response code (201, or 429 past a budget)."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": NAMESPACE},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    try:
        api.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/eviction", json=body)
    except ApiError as exc:
        return exc.code
    return 201


def with_component(component: str) -> dict[str, Any]:
    """The extender's ClusterRole as `kubectl apply -k` applies it with ``component`` added to the
    sidecar deployment (manifests/components/<component>)."""
    from tests.deploy.test_rendered import SIDECAR, kustomized
    from tests.deploy.test_rendered import with_component as overlay

    with tempfile.TemporaryDirectory() as folder:
        (role,) = [
            d
            for d in kustomized(overlay(SIDECAR, Path(folder), component))
            if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dra-extender"
        ]
    return dict(role)


@contextlib.contextmanager
def eviction_rights(plane: ControlPlane) -> Iterator[None]:
    """The extender's ClusterRole with manifests/components/make-room's rule (create on
    pods/eviction) for the block; as shipped without it afterwards."""
    api = plane.api
    before = api.get("ClusterRole", "dra-extender")
    assert before is not None
    granted = copy.deepcopy(before)
    granted["rules"] = with_component("make-room")["rules"]
    api.update(granted)
    try:
        yield
    finally:
        current = api.get("ClusterRole", "dra-extender")
        assert current is not None
        current["rules"] = before["rules"]
        api.update(current)
