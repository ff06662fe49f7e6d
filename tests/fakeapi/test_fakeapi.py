"""The fake API server's own acceptance checks, through the official kubernetes client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.builders import claim, node, pod
from tests.fakeapi.server import FakeApiServer


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
