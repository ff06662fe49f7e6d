"""An in-process fake kube-apiserver for tests: real HTTP, resourceVersion semantics, fault hooks.

Requirements: ../shared/reference/testing-without-apiserver.md. Standard library only (plus the
JSON patch helpers below); a ``ThreadingHTTPServer`` on 127.0.0.1:0 in a daemon thread.

Supported: discovery, list (label/field selectors), watch (resume by resourceVersion, synthetic
ADDED for RV 0, bookmarks, 410 after compaction, server timeouts), create, update, update of the
status subresource (409 on stale resourceVersion), merge / JSON / strategic-merge patches
(``reservedFor`` keyed by uid), delete with preconditions, both binding endpoints, the eviction
subresource (PodDisruptionBudgets checked and spent as kube-apiserver does), the service
proxy (:meth:`FakeApiServer.service_endpoint`), RBAC for the people :meth:`FakeApiServer.person`
names (everyone else is the cluster's admin), and a request log. Faults: the next N watches
expire (410), drop watch streams, inject status codes, add latency.
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakeapi import rbac
from tests.fakeapi.patches import PatchError, json_patch, merge_patch, strategic_merge_patch

# resource (plural) -> (group, version, kind, namespaced)
RESOURCES: dict[str, tuple[str, str, str, bool]] = {
    "nodes": ("", "v1", "Node", False),
    "pods": ("", "v1", "Pod", True),
    "namespaces": ("", "v1", "Namespace", False),
    "events": ("", "v1", "Event", True),
    # What the service proxy reads (the real one reads Endpoints, not EndpointSlices).
    "services": ("", "v1", "Service", True),
    "endpoints": ("", "v1", "Endpoints", True),
    "resourceslices": ("resource.k8s.io", "v1", "ResourceSlice", False),
    "deviceclasses": ("resource.k8s.io", "v1", "DeviceClass", False),
    "resourceclaims": ("resource.k8s.io", "v1", "ResourceClaim", True),
    "resourceclaimtemplates": ("resource.k8s.io", "v1", "ResourceClaimTemplate", True),
    "devicetaintrules": ("resource.k8s.io", "v1", "DeviceTaintRule", False),
    "leases": ("coordination.k8s.io", "v1", "Lease", True),
    "poddisruptionbudgets": ("policy", "v1", "PodDisruptionBudget", True),
    # 1.37 serves PodGroups at v1beta1 (kubernetes#140184); ``served_at`` moves them (1.36: v1alpha2).
    "podgroups": ("scheduling.k8s.io", "v1beta1", "PodGroup", True),
}
KIND_TO_RESOURCE = {kind: res for res, (_, _, kind, _) in RESOURCES.items()}


def go_bool(text: str | None) -> bool:
    return (text or "").lower() in ("1", "t", "true")


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del status["reason"]  # Go's omitempty
        return status if self.details is None else {**status, "details": self.details}


@dataclass
class Faults:
    """Knobs tests turn; all thread-safe enough for tests (set before the request that needs them)."""

    watch_410: int = 0  # the next N watches answer 410 Expired
    drop_watch_after: int | None = None  # abort watch streams after this many events
    server_watch_timeout: float = 30.0
    bookmark_every: float | None = None
    #: (method, path substring) -> list of status codes to answer (consumed in order).
    inject: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    latency: float = 0.0
    #: (method, path substring) -> seconds to wait *after* processing before answering
    #: (the write happens; the client times out waiting for the answer).
    slow_answer: dict[tuple[str, str], float] = field(default_factory=dict)
    #: (method, path substring) -> count: apply the request, then close the connection unanswered.
    lose_answer: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (method, path substring) -> count: apply, then answer the object with ``"status": null``.
    null_status: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (method, path substring) -> count: apply, then answer 200 with a body that is not JSON.
    garbage: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Watch events are delivered only once they are this old (seconds); the store is current.
    watch_lag: float = 0.0
    #: Extra time before every write is processed (seconds; not holding the store's lock).
    write_latency: float = 0.0
    #: Until this time.monotonic(), every connection is closed unanswered (and nothing applied).
    outage_until: float = 0.0
    #: Called with (method, path) as each request arrives, before it is applied (e.g. to freeze
    #: the client that sent it with SIGSTOP while its write is at the server).
    on_request: Callable[[str, str], None] | None = None

    def take_injected(self, method: str, path: str) -> int | None:
        for (m, fragment), codes in self.inject.items():
            if m == method and fragment in path and codes:
                return codes.pop(0)
        return None

    def outage(self, seconds: float) -> None:
        """The API server is unreachable for ``seconds``: open watches break, requests fail."""
        self.outage_until = time.monotonic() + seconds

    def in_outage(self) -> bool:
        return time.monotonic() < self.outage_until

    def take(self, table: dict[tuple[str, str], int], method: str, path: str) -> bool:
        """Consume one count of a (method, fragment) entry matching this request."""
        for (m, fragment), count in table.items():
            if m == method and fragment in path and count > 0:
                table[(m, fragment)] = count - 1
                return True
        return False


class Store:
    """Objects by (resource, namespace, name), one RV counter, a bounded event log."""

    def __init__(self, log_size: int = 100_000) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.rv = 100
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []  # (rv, resource, type, object)
        self.compacted_rv = 0
        self.log_size = log_size
        self.cond = threading.Condition()
        #: rv -> when the event happened (time.monotonic), for delayed watch delivery.
        self.times: dict[int, float] = {}

    def _record(self, resource: str, etype: str, obj: dict[str, Any]) -> None:
        self.events.append((self.rv, resource, etype, copy.deepcopy(obj)))
        self.times[self.rv] = time.monotonic()
        if len(self.events) > self.log_size:
            drop = len(self.events) - self.log_size
            self.compacted_rv = self.events[drop - 1][0]
            for rv, *_ in self.events[:drop]:
                self.times.pop(rv, None)
            del self.events[:drop]
        self.cond.notify_all()

    def bump(self, obj: dict[str, Any]) -> None:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)

    def compact(self) -> None:
        with self.cond:
            self.compacted_rv = self.rv
            self.events.clear()

    def put(self, resource: str, obj: dict[str, Any], etype: str) -> dict[str, Any]:
        meta = obj["metadata"]
        key = (resource, meta.get("namespace", ""), meta["name"])
        self.bump(obj)
        self.objects[key] = obj
        self._record(resource, etype, obj)
        return copy.deepcopy(obj)


class FakeApiServer:
    """Start with :meth:`start` (or use as a context manager); ``url`` is the base URL."""

    def __init__(
        self, dra_version: str = "v1", served_at: dict[str, str] | None = None, minor: str = "37"
    ) -> None:
        #: What /version says (the minor version of Kubernetes).
        self.minor = minor
        #: The resource.k8s.io version served (objects are stored as created: shape them to match).
        self.dra_version = dra_version
        #: resource -> the only version it is served at (1.36: devicetaintrules at v1beta2).
        served_at = served_at or {}
        self.resources = {
            r: (g, served_at.get(r, dra_version) if g == "resource.k8s.io" else served_at.get(r, v), k, ns)
            for r, (g, v, k, ns) in RESOURCES.items()
        }
        self.store = Store()
        self.faults = Faults()
        self.requests: list[tuple[str, str, str]] = []  # (method, path?query, content-type)
        #: (method, path?query, body) of every request that came with a body.
        self.bodies: list[tuple[str, str, bytes]] = []
        #: (method, seconds) of every write, from its body read to its answer sent (benchmarks).
        self.write_times: list[tuple[str, float]] = []
        #: Bearer token -> (user name, the RBAC rules bound to them): see :meth:`person`.
        self.people: dict[str, tuple[str, list[tuple[dict[str, Any], str]]]] = {}
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        fake = self

        class Handler(_Handler):
            api = fake

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            with self.store.cond:
                self.store.cond.notify_all()

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- direct access for tests ----------------------------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = KIND_TO_RESOURCE[obj["kind"]]
        with self.store.cond:
            return self._create(resource, copy.deepcopy(obj))

    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        resource = KIND_TO_RESOURCE[kind]
        if self.resources[resource][3] and not namespace:
            namespace = "default"
        with self.store.cond:
            return copy.deepcopy(self.store.objects[(resource, namespace, name)])

    def update_direct(self, kind: str, name: str, namespace: str, change: Any) -> dict[str, Any]:
        """Change an object as another writer would (bumps RV, emits MODIFIED)."""
        resource = KIND_TO_RESOURCE[kind]
        with self.store.cond:
            obj = copy.deepcopy(self.store.objects[(resource, namespace, name)])
            change(obj)
            return self.store.put(resource, obj, "MODIFIED")

    def delete_direct(self, kind: str, name: str, namespace: str = "") -> None:
        """Delete as another client would (finalizers honoured, dependents garbage-collected)."""
        resource = KIND_TO_RESOURCE[kind]
        if self.resources[resource][3] and not namespace:
            namespace = "default"
        with self.store.cond:
            self._delete(resource, namespace, name, {})

    def person(self, name: str, *roles: dict[str, Any]) -> str:
        """A bearer token for user ``name``, who may do only what ``roles`` (Role and ClusterRole
        objects, as in manifests/) grant, as if bound to them: anything else is answered 403 as
        kube-apiserver's RBAC answers it. A token not made here (or none) is the cluster's admin."""
        token = f"token-{name}"
        self.people[token] = (name, rbac.bound(*roles))
        return token

    def calls(self, method: str | None = None, fragment: str = "") -> list[tuple[str, str, str]]:
        return [r for r in self.requests if (method is None or r[0] == method) and fragment in r[1]]

    # --- operations (called with the store lock held) -------------------------------------------------

    def api_version(self, resource: str) -> str:
        group, version, _, _ = self.resources[resource]
        return f"{group}/{version}" if group else version

    def _create(self, resource: str, obj: dict[str, Any], namespace: str = "") -> dict[str, Any]:
        group, _version, kind, namespaced = self.resources[resource]
        meta = obj.setdefault("metadata", {})
        if namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            else:
                raise ApiError(422, "Invalid", "metadata.name: Required value")
        key = (resource, meta.get("namespace", ""), meta["name"])
        if key in self.store.objects:
            raise ApiError(
                409, "AlreadyExists", f'{resource}.{group or "core"} "{meta["name"]}" already exists'
            )
        obj["apiVersion"], obj["kind"] = self.api_version(resource), kind
        meta.update(
            {
                "uid": meta.get("uid") or str(uuid.uuid4()),
                "creationTimestamp": "2026-11-22T00:00:00Z",
                "generation": 1,
            }
        )
        return self.store.put(resource, obj, "ADDED")

    def _current(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.objects.get((resource, namespace, name))
        if obj is None:
            group = self.resources[resource][0]
            details = {"name": name, "kind": resource, **({"group": group} if group else {})}
            raise ApiError(
                404, "NotFound", f'{resource}{"." + group if group else ""} "{name}" not found', details
            )
        return obj

    def service_endpoint(self, namespace: str, service: str) -> tuple[str, int]:
        """Where the service proxy sends a request for ``service`` (NAME or NAME:PORT, the port
        by name or number), as kube-apiserver's ResourceLocation finds it: a port number is
        named by the Service's ports (404 without the Service), then the Endpoints of that name
        are read (404 without them) and the first ready address (``addresses``, not
        ``notReadyAddresses``) whose targetRef is a Pod of this namespace with that IP, on the
        port of that name, is taken (the real one starts at a random one); 503 "no endpoints
        available" when there is none. Unlike kube-apiserver, which dials no loopback address,
        the fake proxies to 127.0.0.1: the tests' extender listens there."""
        name, _, port = service.partition(":")
        if ":" in port:
            raise ApiError(400, "BadRequest", f'invalid service request "{service}"')
        with self.store.cond:
            if port.isdigit():
                ports = self._current("services", namespace, name).get("spec", {}).get("ports") or []
                named = next((p.get("name", "") for p in ports if str(p.get("port")) == port), None)
                if named is None:
                    raise ApiError(
                        503, "ServiceUnavailable", f'no service port {port} found for service "{name}"'
                    )
                port = named
            subsets = self._current("endpoints", namespace, name).get("subsets") or []
            if not subsets:
                raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')
            for subset in subsets:
                for endpoint_port in subset.get("ports") or []:
                    if endpoint_port.get("name", "") != port:
                        continue
                    for address in subset.get("addresses") or []:
                        if self._a_pod_has(namespace, address):
                            return str(address["ip"]), int(endpoint_port["port"])
        raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{service}"')

    def _a_pod_has(self, namespace: str, address: dict[str, Any]) -> bool:
        """The address names a Pod of this namespace that has its IP (isValidAddress)."""
        ref = address.get("targetRef") or {}
        if ref.get("namespace") != namespace:
            return False
        found = self.store.objects.get(("pods", namespace, ref.get("name", "")))
        ips = ((found or {}).get("status") or {}).get("podIPs") or []
        return any(ip.get("ip") == address.get("ip") for ip in ips)

    def _check_rv(self, resource: str, current: dict[str, Any], sent: dict[str, Any]) -> None:
        rv = (sent.get("metadata") or {}).get("resourceVersion")
        if rv and rv != current["metadata"]["resourceVersion"]:
            group = self.resources[resource][0]
            raise ApiError(
                409,
                "Conflict",
                f"Operation cannot be fulfilled on {resource}{'.' + group if group else ''} "
                f'"{current["metadata"]["name"]}": the object has been modified; please apply your changes '
                "to the latest version and try again",
            )

    def _validate_claim_status(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        old_alloc = (old.get("status") or {}).get("allocation")
        status = new.get("status") or {}
        if old_alloc is not None and status.get("allocation") not in (None, old_alloc):
            raise ApiError(422, "Invalid", "status.allocation: Invalid value: field is immutable")
        reserved = status.get("reservedFor") or []
        if len(reserved) > 256:
            raise ApiError(422, "Invalid", "status.reservedFor: Too many: must have at most 256 items")
        if reserved and not status.get("allocation"):
            raise ApiError(
                422, "Invalid", "status.reservedFor: Forbidden: may not be set when `allocation` is unset"
            )
        uids = [r.get("uid") for r in reserved]
        if len(set(uids)) != len(uids):
            raise ApiError(422, "Invalid", "status.reservedFor: Duplicate value")

    def _replace(
        self, resource: str, namespace: str, name: str, body: dict[str, Any], status: bool
    ) -> dict[str, Any]:
        current = self._current(resource, namespace, name)
        self._check_rv(resource, current, body)
        new = copy.deepcopy(current)
        if status:
            new["status"] = body.get("status")
            if new["status"] is None:
                new.pop("status")
        else:
            new["metadata"] = {
                **current["metadata"],
                **{
                    k: v
                    for k, v in (body.get("metadata") or {}).items()
                    if k not in ("uid", "resourceVersion", "creationTimestamp")
                },
            }
            for key in body:
                if key not in ("metadata", "status", "apiVersion", "kind"):
                    new[key] = body[key]
            if new.get("spec") != current.get("spec"):
                new["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        if resource == "resourceclaims":
            self._validate_claim_status(current, new)
        if new == current:
            return copy.deepcopy(current)  # a no-op update does not bump the RV
        if self._finish_deletion(resource, new):
            return copy.deepcopy(new)
        return self.store.put(resource, new, "MODIFIED")

    def _patch(
        self, resource: str, namespace: str, name: str, body: bytes, content_type: str, status: bool
    ) -> dict[str, Any]:
        current = self._current(resource, namespace, name)
        try:
            if content_type.startswith("application/merge-patch+json"):
                patch = json.loads(body)
                self._check_rv(resource, current, patch if isinstance(patch, dict) else {})
                new = merge_patch(current, patch)
            elif content_type.startswith("application/json-patch+json"):
                new = json_patch(current, json.loads(body))
            elif content_type.startswith("application/strategic-merge-patch+json"):
                patch = json.loads(body)
                self._check_rv(resource, current, patch)
                uid = (patch.get("metadata") or {}).get("uid")
                if uid and uid != current["metadata"]["uid"]:
                    raise ApiError(
                        409,
                        "Conflict",
                        f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current['metadata']['uid']}",
                    )
                new = strategic_merge_patch(current, patch, resource)
            else:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type})",
                )
        except PatchError as exc:
            raise ApiError(422, "Invalid", str(exc)) from None
        if status:
            merged = copy.deepcopy(current)
            merged["status"] = new.get("status")
            new = merged
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        if resource == "resourceclaims":
            self._validate_claim_status(current, new)
        if new == current:
            return copy.deepcopy(current)
        return self.store.put(resource, new, "MODIFIED")

    def _delete(self, resource: str, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        current = self._current(resource, namespace, name)
        pre = body.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise ApiError(409, "Conflict", "Precondition failed: UID mismatch")
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "Precondition failed: resourceVersion mismatch")
        if current["metadata"].get("finalizers"):
            # Graceful: marked, removed once the last finalizer is (see _finish_deletion).
            if not current["metadata"].get("deletionTimestamp"):
                marked = copy.deepcopy(current)
                marked["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:01Z"
                self.store.put(resource, marked, "MODIFIED")
            return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}
        self._remove(resource, namespace, name)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}

    def _remove(self, resource: str, namespace: str, name: str) -> None:
        current = self.store.objects.pop((resource, namespace, name))
        self.store.bump(current)
        self.store._record(resource, "DELETED", current)
        self._collect_dependents(current["metadata"].get("uid"))

    def _collect_dependents(self, owner_uid: str | None) -> None:
        """kube-controller-manager: the garbage collector deletes what the object owned; for a
        claim reserved for a deleted pod the resourceclaim controller first drops that
        reservation and, with no consumer left, deallocates it and removes its finalizer."""
        if not owner_uid:
            return
        for (resource, namespace, name), obj in list(self.store.objects.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == owner_uid for r in refs):
                continue
            if resource == "resourceclaims":
                released = copy.deepcopy(obj)
                status = released.get("status") or {}
                kept = [e for e in status.get("reservedFor") or [] if e.get("uid") != owner_uid]
                if kept:
                    status["reservedFor"] = kept
                else:
                    for key in ("reservedFor", "allocation", "devices"):
                        status.pop(key, None)
                    finalizers = released["metadata"].get("finalizers") or []
                    released["metadata"]["finalizers"] = [
                        f for f in finalizers if f != "resource.kubernetes.io/delete-protection"
                    ]
                if released != obj:
                    self.store.put(resource, released, "MODIFIED")
            self._delete(resource, namespace, name, {})

    def _finish_deletion(self, resource: str, obj: dict[str, Any]) -> bool:
        """An object being deleted whose last finalizer went: it is removed (True)."""
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.store.objects[(resource, meta.get("namespace", ""), meta["name"])] = obj
            self._remove(resource, meta.get("namespace", ""), meta["name"])
            return True
        return False

    def _bind(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        pod = self._current("pods", namespace, name)
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata']['uid']}",
            )
        if pod.get("spec", {}).get("nodeName"):
            raise ApiError(
                409, "Conflict", f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise ApiError(409, "Conflict", f"pod {name} is being deleted, cannot be assigned to a host")
        new = copy.deepcopy(pod)
        new.setdefault("spec", {})["nodeName"] = (body.get("target") or {}).get("name")
        conditions = new.setdefault("status", {}).setdefault("conditions", [])
        conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True"})
        self.store.put("pods", new, "MODIFIED")
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    # --- the eviction subresource (pkg/registry/core/pod/storage/eviction.go) ------------------------

    def _evict(
        self, namespace: str, name: str, body: dict[str, Any], query: dict[str, str]
    ) -> tuple[int, dict[str, Any]]:
        """POST pods/NAME/eviction as kube-apiserver answers it: (code, Status)."""
        if (body.get("metadata") or {}).get("name") != name:
            raise ApiError(400, "BadRequest", "name in URL does not match name in Eviction object")
        options = copy.deepcopy(body.get("deleteOptions") or {})
        asked = [query["dryRun"]] if query.get("dryRun") else []
        if asked and options.get("dryRun") and options["dryRun"] != asked:
            raise ApiError(
                400,
                "BadRequest",
                f"Non-matching dry-run options in request and content: {asked} and {options['dryRun']}",
            )
        dry_run = bool(asked or options.get("dryRun"))
        pod = self._current("pods", namespace, name)
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Pending", "Succeeded", "Failed") and not pod["metadata"].get("deletionTimestamp"):
            budgets = self._budgets_of(pod)
            if len(budgets) > 1:
                more = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
                return 500, ApiError(500, "", more).status()
            if budgets and not (not _pod_ready(pod) and _unready_may_go(budgets[0])):
                self._spend_budget(budgets[0], name, dry_run)
        self._delete_evicted(pod, options, dry_run)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _budgets_of(self, pod: dict[str, Any]) -> list[dict[str, Any]]:
        """getPodDisruptionBudgets: the budgets of the pod's namespace whose selector converts,
        is not empty and matches the pod's labels."""
        namespace = pod["metadata"]["namespace"]
        labels = pod["metadata"].get("labels") or {}
        return [
            pdb
            for (resource, ns, _), pdb in sorted(self.store.objects.items())
            if resource == "poddisruptionbudgets"
            and ns == namespace
            and _selects(((pdb.get("spec") or {}).get("selector")), labels)
        ]

    def _spend_budget(self, pdb: dict[str, Any], pod_name: str, dry_run: bool) -> None:
        """checkAndDecrement: refuse (429, 403) or write the budget's status (not on a dry run)."""
        meta, status = pdb["metadata"], copy.deepcopy(pdb.get("status") or {})
        name = meta["name"]
        if status.get("observedGeneration", 0) < meta.get("generation", 0):
            raise _too_many_requests(
                f"The disruption budget {name} is still being processed by the server.", 10
            )
        forbidden = f'poddisruptionbudget.policy "{name}" is forbidden: '
        details = {"name": name, "group": "policy", "kind": "poddisruptionbudget"}
        if status.get("disruptionsAllowed", 0) < 0:
            raise ApiError(403, "Forbidden", forbidden + "pdb disruptions allowed is negative", details)
        if len(status.get("disruptedPods") or {}) > 2000:  # MaxDisruptedPodSize
            why = "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
            raise ApiError(403, "Forbidden", forbidden + why, details)
        if status.get("disruptionsAllowed", 0) == 0:
            raise _too_many_requests(
                f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy pods "
                f"and has {status.get('currentHealthy', 0)} currently",
                0,
            )
        if dry_run:
            return
        status["disruptionsAllowed"] -= 1
        if status["disruptionsAllowed"] == 0:  # pdbhelper.UpdateDisruptionAllowedCondition
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionAllowed"]
            status["conditions"] = [
                *conditions,
                {
                    "type": "DisruptionAllowed",
                    "status": "False",
                    "reason": "InsufficientPods",
                    "observedGeneration": status.get("observedGeneration", 0),
                    "lastTransitionTime": _now(),
                    "message": "",
                },
            ]
        status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: _now()}
        updated = copy.deepcopy(pdb)
        updated["status"] = status
        self.store.put("poddisruptionbudgets", updated, "MODIFIED")

    def _delete_evicted(self, pod: dict[str, Any], options: dict[str, Any], dry_run: bool) -> None:
        """addConditionAndDeletePod: the UID precondition, the ``DisruptionTarget`` condition
        written, then the pod deleted as DELETE with these options deletes it."""
        meta = pod["metadata"]
        uid = (options.get("preconditions") or {}).get("uid")
        if uid and uid != meta["uid"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on Pod "{meta["name"]}": the UID in the precondition '
                f"({uid}) does not match the UID in record ({meta['uid']}). The object might have "
                "been deleted and then recreated",
                {"name": meta["name"], "kind": "Pod"},
            )
        if dry_run:
            return
        marked = copy.deepcopy(pod)
        conditions = marked.setdefault("status", {}).setdefault("conditions", [])
        conditions[:] = [c for c in conditions if c.get("type") != "DisruptionTarget"]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
                "lastTransitionTime": _now(),
            }
        )
        self.store.put("pods", marked, "MODIFIED")
        self._delete("pods", meta["namespace"], meta["name"], options)

    # --- list and watch --------------------------------------------------------------------------------

    def _matches(self, obj: dict[str, Any], labels: dict[str, str], fields: dict[str, str]) -> bool:
        obj_labels = (obj.get("metadata") or {}).get("labels") or {}
        if any(obj_labels.get(k) != v for k, v in labels.items()):
            return False
        for path, want in fields.items():
            value: Any = obj
            for part in path.split("."):
                value = (value or {}).get(part) if isinstance(value, dict) else None
            if (value or "") != want:
                return False
        return True

    def list(
        self, resource: str, namespace: str, labels: dict[str, str], fields: dict[str, str]
    ) -> dict[str, Any]:
        items = [
            copy.deepcopy(o)
            for (r, ns, _), o in sorted(self.store.objects.items())
            if r == resource and (not namespace or ns == namespace) and self._matches(o, labels, fields)
        ]
        kind = self.resources[resource][2]
        return {
            "kind": f"{kind}List",
            "apiVersion": self.api_version(resource),
            "metadata": {"resourceVersion": str(self.store.rv)},
            "items": items,
        }

    def watch_events(
        self,
        resource: str,
        namespace: str,
        since: str,
        labels: dict[str, str],
        fields: dict[str, str],
        timeout: float,
        bookmarks: bool,
    ) -> Iterator[dict[str, Any]]:
        store = self.store
        deadline = time.monotonic() + timeout
        with store.cond:
            if self.faults.watch_410 > 0:
                self.faults.watch_410 -= 1
                yield {
                    "type": "ERROR",
                    "object": ApiError(
                        410, "Expired", f"too old resource version: {since} ({store.rv})"
                    ).status(),
                }
                return
            if self.faults.in_outage():
                raise WatchAborted
            if since in ("", "0"):
                start = store.rv
                for (r, ns, _), o in sorted(store.objects.items()):
                    if (
                        r == resource
                        and (not namespace or ns == namespace)
                        and self._matches(o, labels, fields)
                    ):
                        yield {"type": "ADDED", "object": copy.deepcopy(o)}
            else:
                start = int(since)
                if start < store.compacted_rv:
                    yield {
                        "type": "ERROR",
                        "object": ApiError(
                            410, "Expired", f"too old resource version: {start} ({store.compacted_rv})"
                        ).status(),
                    }
                    return
        last_bookmark = time.monotonic()
        position = start
        while True:
            with store.cond:
                pending = [e for e in store.events if e[0] > position]
                if not pending:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._server is None:
                        return
                    if self.faults.in_outage():
                        raise WatchAborted
                    wait = min(remaining, self.faults.bookmark_every or remaining, 0.5)
                    store.cond.wait(wait)
                    pending = [e for e in store.events if e[0] > position]
            for rv, r, etype, obj in pending:
                if self.faults.in_outage():
                    raise WatchAborted
                lag = self.faults.watch_lag
                if lag:
                    wait = store.times.get(rv, 0.0) + lag - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                position = rv
                meta = obj.get("metadata") or {}
                if (
                    r == resource
                    and (not namespace or meta.get("namespace") == namespace)
                    and self._matches(obj, labels, fields)
                ):
                    yield {"type": etype, "object": obj}
            if (
                bookmarks
                and self.faults.bookmark_every is not None
                and time.monotonic() - last_bookmark >= self.faults.bookmark_every
            ):
                last_bookmark = time.monotonic()
                kind = self.resources[resource][2]
                with store.cond:
                    position = max(position, store.rv)
                yield {
                    "type": "BOOKMARK",
                    "object": {
                        "kind": kind,
                        "apiVersion": self.api_version(resource),
                        "metadata": {"resourceVersion": str(position)},
                    },
                }
            if time.monotonic() > deadline:
                return


def _injected(code: int) -> ApiError:
    """An injected answer; a 429 as API Priority and Fairness throttles (no budget cause)."""
    if code == 429:
        message = "Too many requests, please try again later."
        return ApiError(429, "TooManyRequests", message, {"retryAfterSeconds": 1})
    return ApiError(code, "InternalError" if code >= 500 else "Injected", f"injected {code}")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _too_many_requests(cause: str, retry_after: int) -> ApiError:
    """eviction.go's 429 (errors.NewTooManyRequests with a ``DisruptionBudget`` cause)."""
    details: dict[str, Any] = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return ApiError(
        429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.", details
    )


def _selects(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelectorAsSelector, then Matches, as the eviction subresource reads a budget's
    selector: nil, empty or not convertible matches nothing."""
    if not isinstance(selector, dict):
        return False
    requirements = [(k, "In", [v]) for k, v in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        operator, values = expression.get("operator"), expression.get("values") or []
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
        if (operator in ("In", "NotIn")) != bool(values):
            return False
        requirements.append((expression.get("key"), operator, values))
    if not requirements:
        return False
    for key, operator, values in requirements:
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _unready_may_go(pdb: dict[str, Any]) -> bool:
    """An unready pod is evicted without spending the budget: AlwaysAllow, or (IfHealthyBudget)
    the budget has the healthy pods it needs."""
    if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
        return True
    status = pdb.get("status") or {}
    return bool(0 < status.get("desiredHealthy", 0) <= status.get("currentHealthy", 0))


class WatchAborted(Exception):
    """The watch stream breaks (an outage): no terminating chunk."""


def _selector(text: str | None) -> dict[str, str]:
    out = {}
    for part in (text or "").split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip().rstrip("=")] = v.strip().lstrip("=")
    return out


#: Headers the service proxy does not pass on either way: hop-by-hop ones, the user's
#: credentials, and those it sets itself.
NOT_PASSED_ON = frozenset(
    {
        "authorization",
        "connection",
        "content-length",
        "host",
        "keep-alive",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"
    # Headers and body are two writes: with Nagle's algorithm on, the body waits for the
    # client's delayed ACK (40 ms per request), a delay no API server has.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        started = time.perf_counter()
        try:
            self._serve(method)
        finally:
            if method != "GET":
                self.api.write_times.append((method, time.perf_counter() - started))

    def _serve(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""  # always read the whole body first
        parsed = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        content_type = self.headers.get("Content-Type", "")
        faults = self.api.faults
        if faults.in_outage():
            self._hang_up()
            return
        self.api.requests.append((method, self.path, content_type))
        if body:
            self.api.bodies.append((method, self.path, body))
        if faults.on_request is not None:
            faults.on_request(method, parsed.path)
        if faults.latency:
            time.sleep(faults.latency)
        if faults.write_latency and method in ("PUT", "POST", "PATCH", "DELETE"):
            time.sleep(faults.write_latency)
        if faults.in_outage():
            self._hang_up()
            return
        injected = self.api.faults.take_injected(method, parsed.path)
        if injected is not None:
            self._send(injected, _injected(injected).status())
            return
        for (m, fragment), seconds in self.api.faults.slow_answer.items():
            if m == method and fragment in parsed.path:
                original_send = self._send

                def delayed(
                    code: int, payload: dict[str, Any], _send: Any = original_send, _s: float = seconds
                ) -> None:
                    time.sleep(_s)
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                        _send(code, payload)

                self._send = delayed  # type: ignore[method-assign]
        if faults.take(faults.lose_answer, method, parsed.path):
            self._send = lambda code, payload: self._hang_up()  # type: ignore[method-assign]
        elif faults.take(faults.null_status, method, parsed.path):
            original = self._send

            def null_status(code: int, payload: dict[str, Any], _send: Any = original) -> None:
                if code < 300 and isinstance(payload, dict) and "metadata" in payload:
                    payload = {**payload, "status": None}
                _send(code, payload)

            self._send = null_status  # type: ignore[method-assign]
        elif faults.take(faults.garbage, method, parsed.path):

            def garbage(code: int, payload: dict[str, Any]) -> None:
                data = b"<html>502 Bad Gateway</html>" if code < 300 else json.dumps(payload).encode()
                self.send_response(200 if code < 300 else code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            self._send = garbage  # type: ignore[method-assign]
        try:
            self._dispatch(method, parsed.path, query, body, content_type)
        except ApiError as exc:
            self._send(exc.code, exc.status())
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            self._send(400, ApiError(400, "BadRequest", f"bad request: {exc}").status())
        finally:
            # A fault replaced _send for this request only: the next one on this kept-alive
            # connection is answered normally.
            self.__dict__.pop("_send", None)

    def _dispatch(
        self, method: str, path: str, query: dict[str, str], body: bytes, content_type: str
    ) -> None:
        parts = [p for p in path.split("/") if p]
        if path == "/version":
            minor = self.api.minor
            self._send(200, {"major": "1", "minor": minor, "gitVersion": f"v1.{minor}.0-fake"})
            return
        if parts in (["api"], ["apis"]) or (parts[:1] == ["apis"] and len(parts) in (2, 3)):
            self._send(200, self._discovery(parts))
            return
        request = rbac.Request.of(method, self.path)
        if request is not None:
            self._authorize(request)
        # /api/v1/... or /apis/{group}/{version}/...
        rest = parts[2:] if parts[:1] == ["api"] else parts[3:]
        namespace = ""
        if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) > 2:
            namespace, rest = rest[1], rest[2:]
        if not rest:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resource = rest[0]
        if resource == "services" and rest[2:3] == ["proxy"]:
            self._proxy(method, namespace, rest[1], "/" + "/".join(rest[3:]))
            return
        if resource == "bindings" and method == "POST":
            payload = json.loads(body)
            with self.api.store.cond:
                self._send(201, self.api._bind(namespace, payload["metadata"]["name"], payload))
            return
        if resource not in self.api.resources:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({resource})")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        store = self.api.store
        if method == "GET" and not name:
            labels, fields = _selector(query.get("labelSelector")), _selector(query.get("fieldSelector"))
            if go_bool(query.get("watch")):
                timeout = float(query.get("timeoutSeconds") or self.api.faults.server_watch_timeout)
                self._stream(
                    self.api.watch_events(
                        resource,
                        namespace,
                        query.get("resourceVersion", ""),
                        labels,
                        fields,
                        min(timeout, self.api.faults.server_watch_timeout),
                        go_bool(query.get("allowWatchBookmarks")),
                    )
                )
                return
            with store.cond:
                self._send(200, self.api.list(resource, namespace, labels, fields))
            return
        with store.cond:
            if method == "GET":
                self._send(200, copy.deepcopy(self.api._current(resource, namespace, name)))
            elif method == "POST" and not name:
                self._send(201, self.api._create(resource, json.loads(body), namespace))
            elif method == "POST" and sub == "binding" and resource == "pods":
                self._send(201, self.api._bind(namespace, name, json.loads(body)))
            elif method == "POST" and sub == "eviction" and resource == "pods":
                self._send(*self.api._evict(namespace, name, json.loads(body), query))
            elif method == "PUT":
                self._send(
                    200,
                    self.api._replace(resource, namespace, name, json.loads(body), status=sub == "status"),
                )
            elif method == "PATCH":
                self._send(
                    200,
                    self.api._patch(resource, namespace, name, body, content_type, status=sub == "status"),
                )
            elif method == "DELETE":
                self._send(200, self.api._delete(resource, namespace, name, json.loads(body) if body else {}))
            else:
                raise ApiError(405, "MethodNotAllowed", f"{method} is not supported here")

    def _authorize(self, request: rbac.Request) -> None:
        """A person :meth:`FakeApiServer.person` made may do only what their roles grant."""
        token = self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        known = self.api.people.get(token)
        if known is not None and not rbac.allows(known[1], request):
            raise ApiError(403, "Forbidden", *rbac.forbidden(known[0], request))

    def _proxy(self, method: str, namespace: str, service: str, path: str) -> None:
        """The service proxy (GET only, here): the request passed on to one of the Service's
        ready endpoints (:meth:`FakeApiServer.service_endpoint`) without the user's credentials,
        and its answer passed back as it came (status, headers, body); 503 "error trying to
        reach service" when the endpoint does not answer."""
        if method != "GET":
            raise ApiError(405, "MethodNotAllowed", f"the fake proxies GET only, not {method}")
        host, port = self.api.service_endpoint(namespace, service)
        query = urllib.parse.urlsplit(self.path).query
        headers = {k: v for k, v in self.headers.items() if k.lower() not in NOT_PASSED_ON}
        connection = http.client.HTTPConnection(host, port, timeout=30)
        try:
            connection.request(method, path + (f"?{query}" if query else ""), headers=headers)
            answer = connection.getresponse()
            body = answer.read()
        except (OSError, http.client.HTTPException) as exc:
            said = (
                f"dial tcp {host}:{port}: connect: connection refused"
                if isinstance(exc, ConnectionRefusedError)
                else str(exc)
            )
            raise ApiError(503, "ServiceUnavailable", f"error trying to reach service: {said}") from None
        finally:
            connection.close()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in NOT_PASSED_ON:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _discovery(self, parts: list[str]) -> dict[str, Any]:
        if parts == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"]}
        groups = sorted({g for g, _, _, _ in self.api.resources.values() if g})
        if parts == ["apis"]:
            return {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [
                    {
                        "name": g,
                        "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
                        "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"},
                    }
                    for g in groups
                ],
            }
        if len(parts) == 2:
            if parts[1] not in groups:
                raise ApiError(
                    404, "NotFound", f"the server could not find the requested resource ({parts[1]})"
                )
            served = {v for g, v, _, _ in self.api.resources.values() if g == parts[1]}
            first = self.api.dra_version if parts[1] == "resource.k8s.io" else "v1"
            versions = [
                {"groupVersion": f"{parts[1]}/{version}", "version": version}
                for version in sorted(served, key=lambda v: (v != first, v))
            ]
            return {
                "kind": "APIGroup",
                "apiVersion": "v1",
                "name": parts[1],
                "versions": versions,
                "preferredVersion": versions[0],
            }
        group, version = parts[1], parts[2]
        resources = [
            {
                "name": r,
                "namespaced": ns,
                "kind": k,
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            }
            for r, (g, v, k, ns) in self.api.resources.items()
            if g == group and v == version
        ]
        if not resources:
            raise ApiError(
                404, "NotFound", f"the server could not find the requested resource ({group}/{version})"
            )
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}",
            "resources": resources,
        }

    def _hang_up(self) -> None:
        """Close the connection without an answer."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _stream(self, events: Iterator[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sent = 0
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            try:
                for event in events:
                    line = json.dumps(event).encode() + b"\n"
                    self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                    self.wfile.flush()
                    sent += 1
                    limit = self.api.faults.drop_watch_after
                    if limit is not None and sent >= limit:
                        self.close_connection = True
                        self.connection.shutdown(2)  # abort mid-stream: no terminating chunk
                        return
            except WatchAborted:
                self._hang_up()
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_DELETE(self) -> None:
        self._route("DELETE")
