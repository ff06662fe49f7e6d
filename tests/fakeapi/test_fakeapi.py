"""The fake API server's own acceptance checks, through the official kubernetes client."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
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
