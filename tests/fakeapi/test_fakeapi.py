"""The fake API server's own acceptance checks, through the official kubernetes client."""

from __future__ import annotations

import json
from collections.abc import Iterator

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
