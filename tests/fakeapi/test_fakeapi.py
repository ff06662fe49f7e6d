"""The fake API server's own acceptance checks, through the official kubernetes client."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.builders import claim, node, pod
from tests.fakeapi.rbac import Request
from tests.fakeapi.server import FakeApiServer
from tests.shared import REPO


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


def api_client(fake: FakeApiServer) -> client.ApiClient:
    config = client.Configuration(host=fake.url)
    return client.ApiClient(config)


def test_list_and_resource_versions(fake: FakeApiServer) -> None:
    fake.create(node("n1"))
    core = client.CoreV1Api(api_client(fake))
    nodes = core.list_node()
    assert [n.metadata.name for n in nodes.items] == ["n1"]
    assert int(nodes.metadata.resource_version) == fake.store.rv


def test_watch_resumes_and_bookmarks_advance(fake: FakeApiServer) -> None:
    fake.create(node("n1"))
    fake.faults.bookmark_every = 0.05
    rv = fake.store.rv
    fake.create(node("n2"))
    core = client.CoreV1Api(api_client(fake))
    w = watch.Watch()
    seen = []
    for event in w.stream(
        core.list_node, resource_version=str(rv), allow_watch_bookmarks=True, timeout_seconds=1
    ):
        obj = event["object"]
        seen.append(
            (event["type"], obj["metadata"].get("name") if isinstance(obj, dict) else obj.metadata.name)
        )
        if event["type"] == "BOOKMARK":
            break
    assert ("ADDED", "n2") in seen and seen[-1][0] == "BOOKMARK"


def test_compacted_watch_answers_410(fake: FakeApiServer) -> None:
    fake.create(node("n1"))
    rv = fake.store.rv
    fake.create(node("n2"))
    fake.store.compact()
    core = client.CoreV1Api(api_client(fake))
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_node, resource_version=str(rv), timeout_seconds=1):
            pass
    assert err.value.status == 410


def test_status_put_conflicts_on_stale_resource_version(fake: FakeApiServer) -> None:
    created = fake.create(claim("c"))
    api = client.ApiClient(client.Configuration(host=fake.url))
    body = {**created, "status": {"allocation": {"devices": {"results": []}}}}
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status"
    resp = api.call_api(
        path, "PUT", body=body, header_params={"Content-Type": "application/json"}, _preload_content=False
    )
    assert resp.status == 200 and int(json.loads(resp.data)["metadata"]["resourceVersion"]) > int(
        created["metadata"]["resourceVersion"]
    )
    with pytest.raises(ApiException) as err:
        api.call_api(
            path, "PUT", body=body, header_params={"Content-Type": "application/json"}, _preload_content=False
        )
    assert err.value.status == 409 and "the object has been modified" in str(err.value.body)


def test_strategic_merge_patch_deletes_reservations_by_uid(fake: FakeApiServer) -> None:
    created = fake.create(claim("c"))
    fake.update_direct(
        "ResourceClaim",
        "c",
        "default",
        lambda o: o.update(
            status={
                "allocation": {"devices": {"results": []}},
                "reservedFor": [
                    {"resource": "pods", "name": "a", "uid": "ua"},
                    {"resource": "pods", "name": "b", "uid": "ub"},
                ],
            }
        ),
    )
    api = client.ApiClient(client.Configuration(host=fake.url))
    patch = {
        "metadata": {"uid": created["metadata"]["uid"]},
        "status": {"reservedFor": [{"$patch": "delete", "uid": "ua"}]},
    }
    api.call_api(
        "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status",
        "PATCH",
        body=patch,
        header_params={"Content-Type": "application/strategic-merge-patch+json"},
        _preload_content=False,
    )
    assert fake.get("ResourceClaim", "c", "default")["status"]["reservedFor"] == [
        {"resource": "pods", "name": "b", "uid": "ub"}
    ]


def test_binding_sets_the_node_and_a_second_binding_conflicts(fake: FakeApiServer) -> None:
    created = fake.create(pod("p"))
    core = client.CoreV1Api(api_client(fake))
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="p", uid=created["metadata"]["uid"]),
        target=client.V1ObjectReference(kind="Node", name="n1"),
    )
    resp = core.create_namespaced_pod_binding("p", "default", body, _preload_content=False)
    assert resp.status == 201
    assert fake.get("Pod", "p", "default")["spec"]["nodeName"] == "n1"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_binding("p", "default", body, _preload_content=False)
    assert err.value.status == 409


def test_injected_faults_and_request_log(fake: FakeApiServer) -> None:
    fake.faults.inject[("GET", "/api/v1/nodes")] = [500]
    core = client.CoreV1Api(api_client(fake))
    with pytest.raises(ApiException) as err:
        core.list_node()
    assert err.value.status == 500
    core.list_node()
    assert len(fake.calls("GET", "/api/v1/nodes")) == 2


# --- fault hooks for the bind-safety tests ----------------------------------------------------------


def raw_put_status(fake: FakeApiServer, body: dict[str, object]) -> httpx.Response:
    with httpx.Client(base_url=fake.url, timeout=5) as http:
        return http.put("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c/status", json=body)


def claim_with_status(fake: FakeApiServer) -> dict[str, object]:
    current = fake.get("ResourceClaim", "c", "default")
    current["status"] = {"allocation": {"devices": {"results": []}}}
    return current


def test_lose_answer_applies_the_write_and_hangs_up(fake: FakeApiServer) -> None:
    fake.create(claim("c"))
    fake.faults.lose_answer[("PUT", "resourceclaims/c/status")] = 1
    with pytest.raises(httpx.TransportError):
        raw_put_status(fake, claim_with_status(fake))
    assert fake.get("ResourceClaim", "c", "default")["status"]["allocation"] == {"devices": {"results": []}}
    assert fake.faults.lose_answer[("PUT", "resourceclaims/c/status")] == 0


@pytest.mark.parametrize("hook", ["null_status", "garbage"])
def test_malformed_answers_after_applying(fake: FakeApiServer, hook: str) -> None:
    fake.create(claim("c"))
    getattr(fake.faults, hook)[("PUT", "resourceclaims/c/status")] = 1
    answer = raw_put_status(fake, claim_with_status(fake))
    assert answer.status_code == 200
    if hook == "null_status":
        assert answer.json()["status"] is None
    else:
        with pytest.raises(json.JSONDecodeError):
            json.loads(answer.text)
    assert fake.get("ResourceClaim", "c", "default")["status"]["allocation"]


def test_outage_refuses_everything_then_recovers(fake: FakeApiServer) -> None:
    fake.create(node("n1"))
    fake.faults.outage(0.5)
    with httpx.Client(base_url=fake.url, timeout=5) as http:
        with pytest.raises(httpx.TransportError):
            http.get("/api/v1/nodes")
        time.sleep(0.6)
        assert http.get("/api/v1/nodes").status_code == 200


def test_outage_breaks_an_open_watch(fake: FakeApiServer) -> None:
    core = client.CoreV1Api(api_client(fake))
    stream = watch.Watch().stream(core.list_node, resource_version=str(fake.store.rv), timeout_seconds=5)
    fake.create(node("n1"))
    assert next(stream)["object"].metadata.name == "n1"
    fake.faults.outage(1.0)
    with pytest.raises(Exception):  # noqa: B017 - urllib3's ProtocolError, whatever the client wraps it in
        next(stream)


def test_watch_lag_delays_events_but_not_reads(fake: FakeApiServer) -> None:
    core = client.CoreV1Api(api_client(fake))
    fake.faults.watch_lag = 0.5
    stream = watch.Watch().stream(core.list_node, resource_version=str(fake.store.rv), timeout_seconds=5)
    created = time.monotonic()
    fake.create(node("n1"))
    assert [n.metadata.name for n in core.list_node().items] == ["n1"]  # the store is current at once
    assert next(stream)["object"].metadata.name == "n1"
    assert time.monotonic() - created >= 0.45


def test_write_latency_delays_writes_only(fake: FakeApiServer) -> None:
    fake.faults.write_latency = 0.3
    core = client.CoreV1Api(api_client(fake))
    started = time.monotonic()
    core.list_node()
    assert time.monotonic() - started < 0.25
    fake.create(node("n1"))
    started = time.monotonic()
    core.patch_node("n1", {"metadata": {"labels": {"a": "b"}}})
    assert time.monotonic() - started >= 0.3


# --- RBAC and the service proxy (kube-apiserver's answers: tests/realcluster/test_kubectl_dra.py) ---

VIEWER_ROLE = yaml.safe_load((REPO / "manifests" / "common" / "viewer-role.yaml").read_text())
#: A Role granting the service proxy of one Service's ports (not ``metrics``), by name as the
#: shipped debug Role does.
PROXY_ROLE = {
    "kind": "Role",
    "metadata": {"name": "proxy", "namespace": "ns"},
    "rules": [
        {
            "apiGroups": [""],
            "resources": ["services/proxy"],
            "resourceNames": ["svc:http", "svc:80", "svc:81"],
            "verbs": ["get"],
        }
    ],
}

# (case, method, target, what the authorizer sees; None: not a resource request)
READ_AS: list[tuple[str, str, str, Request | None]] = [
    ("a list", "GET", "/api/v1/pods?limit=5", Request("", "pods", "list")),
    (
        "a watch",
        "GET",
        "/apis/resource.k8s.io/v1/resourceslices?watch=true",
        Request("resource.k8s.io", "resourceslices", "watch"),
    ),
    ("a namespaced get", "GET", "/api/v1/namespaces/ns/pods/p", Request("", "pods", "get", "ns", "p")),
    (
        "a status update",
        "PUT",
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status",
        Request("resource.k8s.io", "resourceclaims/status", "update", "ns", "c"),
    ),
    (
        "the service proxy",
        "GET",
        "/api/v1/namespaces/ns/services/svc:http/proxy/debug/ui",
        Request("", "services/proxy", "get", "ns", "svc:http"),
    ),
    ("a namespace", "GET", "/api/v1/namespaces/ns", Request("", "namespaces", "get", "", "ns")),
    ("discovery", "GET", "/apis/resource.k8s.io/v1", None),
    ("the version", "GET", "/version", None),
]


@pytest.mark.parametrize(("case", "method", "target", "seen"), READ_AS, ids=[c[0] for c in READ_AS])
def test_requests_read_as_the_authorizer_reads_them(
    case: str, method: str, target: str, seen: Request | None
) -> None:
    assert Request.of(method, target) == seen


def as_person(fake: FakeApiServer, token: str) -> httpx.Client:
    return httpx.Client(base_url=fake.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def test_a_person_may_do_what_their_roles_grant_and_nothing_else(fake: FakeApiServer) -> None:
    fake.create(node("n1"))
    with as_person(fake, fake.person("dra-viewer", VIEWER_ROLE)) as viewer:
        assert [n["metadata"]["name"] for n in viewer.get("/api/v1/nodes").json()["items"]] == ["n1"]
        assert viewer.get("/version").status_code == 200  # as system:public-info-viewer
        assert viewer.get("/apis/resource.k8s.io/v1").status_code == 200  # as system:discovery
        refused = viewer.post("/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", json=claim("c"))
        leases = viewer.get("/apis/coordination.k8s.io/v1/leases")
    assert refused.status_code == 403 and refused.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'resourceclaims.resource.k8s.io is forbidden: User "dra-viewer" cannot create resource '
        '"resourceclaims" in API group "resource.k8s.io" in the namespace "default"',
        "reason": "Forbidden",
        "code": 403,
        "details": {"group": "resource.k8s.io", "kind": "resourceclaims"},
    }
    assert leases.json()["message"] == (
        'leases.coordination.k8s.io is forbidden: User "dra-viewer" cannot list resource "leases" '
        'in API group "coordination.k8s.io" at the cluster scope'
    )
    with pytest.raises(KeyError):
        fake.get("ResourceClaim", "c", "default")  # nothing was written
    # Anyone else (the tests' clients, the extender) is the cluster's admin.
    assert (
        api_client(fake).call_api("/apis/coordination.k8s.io/v1/leases", "GET", _preload_content=False).status
        == 200
    )


class Backend(http.server.BaseHTTPRequestHandler):
    """What a Service's pod answers: the path, query and credentials it got, with a header of
    its own; ``/missing`` answers 404 with a body of its own (an extender's error)."""

    def do_GET(self) -> None:
        missing = self.path.startswith("/missing")
        body = json.dumps(
            {"Error": "no such endpoint: GET /missing"}
            if missing
            else {"path": self.path, "authorization": self.headers.get("Authorization")}
        ).encode()
        self.send_response(404 if missing else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Backend", "pod-0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def backend() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Backend)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def service(ports: dict[str, int] | None = None) -> dict[str, Any]:
    listed = [{"name": name, "port": port} for name, port in (ports or {"http": 80}).items()]
    return {"kind": "Service", "metadata": {"name": "svc", "namespace": "ns"}, "spec": {"ports": listed}}


def endpoints(
    port: int, *, ready: bool = True, ip: str = "127.0.0.1", subsets: bool = True
) -> dict[str, Any]:
    address = {"ip": ip, "targetRef": {"kind": "Pod", "name": "pod-0", "namespace": "ns"}}
    subset = {
        "addresses" if ready else "notReadyAddresses": [address],
        "ports": [{"name": "http", "port": port}],
    }
    return {
        "kind": "Endpoints",
        "metadata": {"name": "svc", "namespace": "ns"},
        "subsets": [subset] if subsets else [],
    }


def service_pod() -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": "pod-0", "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"podIPs": [{"ip": "127.0.0.1"}]},
    }


PROXIED = "/api/v1/namespaces/ns/services/{service}/proxy/debug/snapshot"


@pytest.mark.parametrize("port", ["http", "80"], ids=["the port by name", "the port by number"])
def test_the_service_proxy_passes_the_request_on_and_the_answer_back(
    fake: FakeApiServer, backend: int, port: str
) -> None:
    for obj in (service(), endpoints(backend), service_pod()):
        fake.create(obj)
    with as_person(fake, fake.person("debugger", PROXY_ROLE)) as debugger:
        answer = debugger.get(PROXIED.format(service=f"svc:{port}"), params={"format": "json"})
        refused = debugger.get("/api/v1/namespaces/ns/services/svc:http/proxy/missing")
    assert answer.status_code == 200 and answer.headers["x-backend"] == "pod-0"
    # The path and query as sent; the user's credentials stay with the API server.
    assert answer.json() == {"path": "/debug/snapshot?format=json", "authorization": None}
    # The pod's own error answer comes back as it was sent.
    assert (refused.status_code, refused.json()) == (404, {"Error": "no such endpoint: GET /missing"})


# (case, objects in namespace ns, the Service asked for, code, reason, message, details)
NOT_PROXIED: list[tuple[str, list[dict[str, Any]], str, int, str, str, dict[str, str] | None]] = [
    (
        "no right to proxy that Service's port",
        [service(), endpoints(0), service_pod()],
        "svc:metrics",
        403,
        "Forbidden",
        'services "svc:metrics" is forbidden: User "debugger" cannot get resource "services/proxy" in API group "" in the namespace "ns"',
        {"name": "svc:metrics", "kind": "services"},
    ),
    (
        "no Service",
        [],
        "svc:http",
        404,
        "NotFound",
        'endpoints "svc" not found',
        {"name": "svc", "kind": "endpoints"},
    ),
    (
        "a port number the Service has not",
        [service()],
        "svc:81",
        503,
        "ServiceUnavailable",
        'no service port 81 found for service "svc"',
        None,
    ),
    (
        "no endpoints",
        [service(), endpoints(0, subsets=False)],
        "svc:http",
        503,
        "ServiceUnavailable",
        'no endpoints available for service "svc"',
        None,
    ),
    (
        "only a pod that is not ready",
        [service(), endpoints(0, ready=False), service_pod()],
        "svc:http",
        503,
        "ServiceUnavailable",
        'no endpoints available for service "svc:http"',
        None,
    ),
    (
        "an address no pod has",
        [service(), endpoints(0, ip="10.0.0.9"), service_pod()],
        "svc:http",
        503,
        "ServiceUnavailable",
        'no endpoints available for service "svc:http"',
        None,
    ),
    (
        "nothing listens there",
        [service(), endpoints(1), service_pod()],
        "svc:http",
        503,
        "ServiceUnavailable",
        "error trying to reach service: dial tcp 127.0.0.1:1: connect: connection refused",
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "objects", "asked", "code", "reason", "message", "details"),
    NOT_PROXIED,
    ids=[c[0] for c in NOT_PROXIED],
)
def test_what_the_service_proxy_answers_when_it_cannot_pass_a_request_on(
    fake: FakeApiServer,
    case: str,
    objects: list[dict[str, Any]],
    asked: str,
    code: int,
    reason: str,
    message: str,
    details: dict[str, str] | None,
) -> None:
    """As kube-apiserver's service proxy (ResourceLocation; the 403 of its RBAC authorizer)."""
    for obj in objects:
        fake.create(obj)
    with as_person(fake, fake.person("debugger", PROXY_ROLE)) as debugger:
        answer = debugger.get(PROXIED.format(service=asked))
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    expected = {**status, "message": message, "reason": reason, "code": code}
    assert (answer.status_code, answer.json()) == (
        code,
        expected if details is None else {**expected, "details": details},
    )


# --- the eviction subresource (kube-apiserver: pkg/registry/core/pod/storage/eviction.go) ------------

EVICT = "/api/v1/namespaces/default/pods/{name}/eviction"
MORE_THAN_ONE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
)
NOT_NOW = "Cannot evict pod as it would violate the pod's disruption budget."


def running(name: str = "p", **status: Any) -> dict[str, Any]:
    """A Running, Ready pod labelled ``app: web`` (what a budget guards)."""
    made = pod(name, labels={"app": "web"})
    made["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], **status}
    return made


def budget(name: str = "web", allowed: int = 1, **status: Any) -> dict[str, Any]:
    """A budget over ``app: web`` as the disruption controller last wrote it (current:
    observedGeneration 1, the generation the fake gives a new object)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {
            "observedGeneration": 1,
            "disruptionsAllowed": allowed,
            "desiredHealthy": 2,
            "currentHealthy": 2 + allowed,
            "expectedPods": 2 + allowed,
            **status,
        },
    }


def eviction(name: str = "p", uid: str = "uid-p", **options: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
        "deleteOptions": {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "preconditions": {"uid": uid},
            **options,
        },
    }


def pending() -> dict[str, Any]:
    made = running()
    made["status"] = {"phase": "Pending"}
    return made


def unready() -> dict[str, Any]:
    made = running()
    made["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    return made


def terminating() -> dict[str, Any]:
    """Being deleted, held by a finalizer (as a kubelet's graceful deletion holds it)."""
    made = running()
    made["metadata"].update(finalizers=["example.com/hold"], deletionTimestamp="2026-11-22T00:00:01Z")
    return made


def stale() -> dict[str, Any]:
    made = budget()
    made["status"]["observedGeneration"] = 0
    return made


@dataclass(frozen=True)
class Evicting:
    objects: tuple[dict[str, Any], ...]
    code: int
    #: The pod is still there afterwards; the budget's disruptionsAllowed then (None: no budget).
    pod_stays: bool
    allowed_after: int | None
    #: The budget's status.disruptedPods names the pod afterwards.
    recorded: bool = False
    #: The Status' message, and its DisruptionBudget cause's (None: no cause).
    message: str | None = None
    cause: str | None = None
    body: dict[str, Any] = field(default_factory=eviction)
    query: str = ""


EVICTIONS: dict[str, Evicting] = {
    "allowed": Evicting((running(), budget()), 201, False, 0, recorded=True),
    "no budget": Evicting((running(),), 201, False, None),
    "budget 0": Evicting(
        (running(), budget(allowed=0)),
        429,
        True,
        0,
        False,
        NOT_NOW,
        "The disruption budget web needs 2 healthy pods and has 2 currently",
    ),
    "stale status": Evicting(
        (running(), stale()),
        429,
        True,
        1,
        False,
        NOT_NOW,
        "The disruption budget web is still being processed by the server.",
    ),
    "two budgets": Evicting((running(), budget(), budget("also")), 500, True, 1, False, MORE_THAN_ONE),
    "negative budget": Evicting(
        (running(), budget(allowed=-1)),
        403,
        True,
        -1,
        False,
        'poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative',
    ),
    # As kube-apiserver: the UID is checked at the delete, after the budget was spent.
    "uid mismatch": Evicting(
        (running(), budget()),
        409,
        True,
        0,
        True,
        'Operation cannot be fulfilled on Pod "p": the UID in the precondition (uid-old) does not match '
        "the UID in record (uid-p). The object might have been deleted and then recreated",
        body=eviction(uid="uid-old"),
    ),
    "gone": Evicting((budget(),), 404, False, 1, False, 'pods "p" not found'),
    "pending pod bypasses the budget": Evicting((pending(), budget(allowed=0)), 201, False, 0),
    "terminating pod bypasses the budget": Evicting((terminating(), budget(allowed=0)), 201, True, 0),
    "unready pod of a healthy budget spends nothing": Evicting(
        (unready(), budget(allowed=0, currentHealthy=2)), 201, False, 0
    ),
    "dry run": Evicting((running(), budget()), 201, True, 1, query="?dryRun=All"),
    "dry run in the options": Evicting((running(), budget()), 201, True, 1, body=eviction(dryRun=["All"])),
    "dry run still checks the budget": Evicting(
        (running(), budget(allowed=0)),
        429,
        True,
        0,
        False,
        NOT_NOW,
        "The disruption budget web needs 2 healthy pods and has 2 currently",
        query="?dryRun=All",
    ),
    "dry run still checks the uid": Evicting(
        (running(), budget()), 409, True, 1, body=eviction(uid="uid-old"), query="?dryRun=All"
    ),
    "another name in the body": Evicting(
        (running(), budget()),
        400,
        True,
        1,
        False,
        "name in URL does not match name in Eviction object",
        body=eviction("q"),
    ),
}


@pytest.mark.parametrize("case", EVICTIONS)
def test_the_eviction_subresource_answers_as_kube_apiserver(fake: FakeApiServer, case: str) -> None:
    c = EVICTIONS[case]
    for obj in c.objects:
        fake.create(obj)
    with httpx.Client(base_url=fake.url, timeout=10) as http:
        answer = http.post(EVICT.format(name="p") + c.query, json=c.body)
    status = answer.json()
    assert (answer.status_code, status["kind"], status["code"]) == (c.code, "Status", c.code)
    if c.code == 201:
        assert status["status"] == "Success"
    else:
        assert status["status"] == "Failure"
        if c.message is not None:
            assert status["message"] == c.message
    causes = (status.get("details") or {}).get("causes") or []
    if c.cause is None:
        assert causes == []
    else:
        assert status["reason"] == "TooManyRequests"
        assert causes == [{"reason": "DisruptionBudget", "message": c.cause}]
    names = [name for (resource, _, name) in fake.store.objects if resource == "pods"]
    assert names == (["p"] if c.pod_stays else [])
    budgets = {
        name: o for (resource, _, name), o in fake.store.objects.items() if resource == "poddisruptionbudgets"
    }
    if c.allowed_after is not None:
        assert budgets["web"]["status"]["disruptionsAllowed"] == c.allowed_after
        assert ("p" in (budgets["web"]["status"].get("disruptedPods") or {})) == c.recorded


def test_an_eviction_writes_the_budget_then_the_pod_as_watchers_see_it(fake: FakeApiServer) -> None:
    fake.create(running())
    created = fake.create(budget())
    since = fake.store.rv
    with httpx.Client(base_url=fake.url, timeout=10) as http:
        assert http.post(EVICT.format(name="p"), json=eviction()).status_code == 201
        seen = [
            (e["type"], e["object"]["kind"], e["object"]["metadata"]["resourceVersion"])
            for e in (
                json.loads(line)
                for path in ("/apis/policy/v1/poddisruptionbudgets", "/api/v1/pods")
                for line in http.get(
                    path, params={"watch": "1", "resourceVersion": since, "timeoutSeconds": "1"}
                )
                .text.strip()
                .splitlines()
            )
        ]
    spent = fake.store.events[-3][3]
    assert [(t, k) for t, k, _ in seen] == [
        ("MODIFIED", "PodDisruptionBudget"),
        ("MODIFIED", "Pod"),  # the DisruptionTarget condition
        ("DELETED", "Pod"),
    ]
    assert int(seen[0][2]) > int(created["metadata"]["resourceVersion"])
    assert spent["status"]["disruptionsAllowed"] == 0 and set(spent["status"]["disruptedPods"]) == {"p"}
    assert spent["status"]["conditions"][0]["type"] == "DisruptionAllowed"
    target = fake.store.events[-2][3]["status"]["conditions"][-1]
    assert (target["type"], target["reason"]) == ("DisruptionTarget", "EvictionByEvictionAPI")


def test_the_fault_hooks_apply_to_evictions(fake: FakeApiServer) -> None:
    fake.create(running())
    fake.create(budget(allowed=2))
    fake.faults.inject[("POST", "/eviction")] = [429]
    fake.faults.lose_answer[("POST", "/eviction")] = 1
    with httpx.Client(base_url=fake.url, timeout=10) as http:
        throttled = http.post(EVICT.format(name="p"), json=eviction())
        # Throttled as API Priority and Fairness throttles: no DisruptionBudget cause, nothing applied.
        assert throttled.status_code == 429 and "causes" not in throttled.json()["details"]
        assert fake.get("PodDisruptionBudget", "web", "default")["status"]["disruptionsAllowed"] == 2
        with pytest.raises(httpx.TransportError):
            http.post(EVICT.format(name="p"), json=eviction())
    # The lost answer's eviction was applied.
    assert fake.get("PodDisruptionBudget", "web", "default")["status"]["disruptionsAllowed"] == 1
    with pytest.raises(KeyError):
        fake.get("Pod", "p", "default")


EVICTOR = {
    "kind": "ClusterRole",
    "metadata": {"name": "evictor"},
    "rules": [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}],
}
DELETER = {
    "kind": "ClusterRole",
    "metadata": {"name": "deleter"},
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "create"]}],
}


def test_evicting_takes_create_on_pods_eviction(fake: FakeApiServer) -> None:
    assert Request.of("POST", EVICT.format(name="p")) == Request(
        "", "pods/eviction", "create", "default", "p"
    )
    fake.create(running())
    with as_person(fake, fake.person("deleter", DELETER)) as deleter:
        refused = deleter.post(EVICT.format(name="p"), json=eviction())
    assert refused.status_code == 403 and refused.json()["message"] == (
        'pods "p" is forbidden: User "deleter" cannot create resource "pods/eviction" in API group "" '
        'in the namespace "default"'
    )
    with as_person(fake, fake.person("evictor", EVICTOR)) as evictor:
        assert evictor.post(EVICT.format(name="p"), json=eviction()).status_code == 201
