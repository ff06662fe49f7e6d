"""DRA-backed extended resources end to end: ``serve --kubeconfig`` against the fake API server
(real HTTP, the official client, resourceVersions), checked on the fake's own store.

Cluster: node-1 and node-2 publish two ``driver-a`` devices each; node-3 has no devices but a
device plugin advertising ``example.com/gpu: 4``. The class ``gpu`` names ``example.com/gpu``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.builders import claim, container, device, device_class, node, pod, resource_slice, with_allocatable
from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations
from tests.integration.test_bind_faults import bind, create, node_of, serve
from tests.integration.test_serve_cluster import ready, wait_until
from tests.service.fixtures import args_names

ER = "example.com/gpu"
ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


def cluster() -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [device_class("gpu", extended_resource=ER), device_class()]
    for name in ("node-1", "node-2"):
        objects += [
            node(name),
            resource_slice(f"{name}-s", [device("d0"), device("d1")], node=name, pool=name),
        ]
    objects.append(with_allocatable(node("node-3"), {ER: 4}))
    return objects


def er_pod(name: str, gpus: int = 1, **kw: Any) -> dict[str, Any]:
    return pod(name, containers=[container("main", {ER: gpus})], **kw)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        create(server, cluster())
        yield server


def extended_claims(fake: FakeApiServer, owner: str | None = None) -> list[dict[str, Any]]:
    with fake.store.cond:
        found = [o for (r, _, _), o in fake.store.objects.items() if r == "resourceclaims"]
    out = [c for c in found if (c["metadata"].get("annotations") or {}).get(ANNOTATION) == "true"]
    if owner is not None:
        out = [c for c in out if any(r["uid"] == owner for r in c["metadata"]["ownerReferences"])]
    return out


def filtered(http: httpx.Client, spec: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    answer: dict[str, Any] = http.post("/scheduler/filter", content=args_names(spec, nodes)).json()
    return answer


def devices(c: dict[str, Any]) -> list[str]:
    return sorted(r["device"] for r in c["status"]["allocation"]["devices"]["results"])


def test_a_pod_with_only_an_extended_resource(fake: FakeApiServer, tmp_path: Path) -> None:
    spec = er_pod("p", 2)
    fake.create(spec)
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        answer = filtered(http, spec, ["node-1", "node-2", "node-3"])
        # node-3's device plugin serves it (NodeResourcesFit checks the amount); 1 and 2 via DRA.
        assert answer["NodeNames"] == ["node-1", "node-2", "node-3"]
        assert bind(http, "p", "node-2") == ""
    [created] = extended_claims(fake, "uid-p")
    meta = created["metadata"]
    assert (
        meta["name"].startswith("p-extended-resources-") and meta["generateName"] == "p-extended-resources-"
    )
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
    ]
    assert meta["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert created["spec"]["devices"]["requests"] == [
        {
            "name": "container-0-request-0",
            "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2},
        }
    ]
    assert devices(created) == ["d0", "d1"]
    assert created["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    bound = fake.get("Pod", "p", "default")
    assert bound["spec"]["nodeName"] == "node-2"
    assert bound["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [
            {"containerName": "main", "resourceName": ER, "requestName": "container-0-request-0"}
        ],
        "resourceClaimName": meta["name"],
    }
    assert violations(fake) == []


def test_mixed_with_claims_and_init_containers(fake: FakeApiServer, tmp_path: Path) -> None:
    # A claim for one device plus example.com/gpu for a sidecar (1) and an init container (1,
    # reusing the sidecar's) on a node with two: all three fit only together.
    spec = pod(
        "mixed",
        ["own"],
        containers=[container("main")],
        init_containers=[container("setup", {ER: 1}), container("agent", {ER: 1}, sidecar=True)],
    )
    create(fake, [claim("own"), spec])
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        answer = filtered(http, spec, ["node-1", "node-3"])
        # node-3: the device plugin serves example.com/gpu, but the claim has no device there.
        assert answer["NodeNames"] == ["node-1"]
        assert "node-3" in answer["FailedAndUnresolvableNodes"]
        assert bind(http, "mixed", "node-1") == ""
    [created] = extended_claims(fake, "uid-mixed")
    assert [r["name"] for r in created["spec"]["devices"]["requests"]] == ["container-1-request-0"]
    own = fake.get("ResourceClaim", "own", "default")
    assert sorted(devices(own) + devices(created)) == ["d0", "d1"]
    mappings = fake.get("Pod", "mixed", "default")["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert sorted((m["containerName"], m["requestName"]) for m in mappings) == [
        ("agent", "container-1-request-0"),
        ("setup", "container-1-request-0"),
    ]
    assert violations(fake) == []


def test_a_node_advertising_the_resource_is_left_to_the_device_plugin(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    fake.create(er_pod("dp"))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        assert bind(http, "dp", "node-3") == ""
    assert extended_claims(fake) == []
    bound = fake.get("Pod", "dp", "default")
    assert bound["spec"]["nodeName"] == "node-3" and "extendedResourceClaimStatus" not in bound.get(
        "status", {}
    )
    assert not fake.calls("PATCH", "pods/dp/status")


def test_the_newest_class_naming_the_resource_is_used(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.create(device_class("gpu-new", extended_resource=ER))
    fake.update_direct(
        "DeviceClass", "gpu-new", "", lambda c: c["metadata"].update(creationTimestamp="2030-01-01T00:00:00Z")
    )
    fake.create(er_pod("p"))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        assert bind(http, "p", "node-1") == ""
    [created] = extended_claims(fake, "uid-p")
    assert created["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu-new"


def test_a_retried_create_whose_answer_was_lost_reuses_the_claim(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.create(er_pod("p"))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.watch_lag = 1.0
        fake.faults.lose_answer[("POST", "resourceclaims")] = 1
        assert bind(http, "p", "node-1") == ""
    # Read back under its name instead of created a second time.
    assert len(fake.calls("POST", "resourceclaims")) == 1
    assert fake.calls("GET", "resourceclaims/p-extended-resources-")
    [created] = extended_claims(fake, "uid-p")
    assert (
        fake.get("Pod", "p", "default")["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
        == (created["metadata"]["name"])
    )
    assert violations(fake) == []


def test_a_create_answered_already_exists_reuses_the_claim(fake: FakeApiServer, tmp_path: Path) -> None:
    # The create landed but its answer was lost and the read back failed too; the watch lags.
    # The retried bind's create is answered AlreadyExists, and the claim it finds is its own
    # (unallocated: it held no device): it is used, not duplicated.
    fake.create(er_pod("p"))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.watch_lag = 2.0
        fake.faults.lose_answer[("POST", "resourceclaims")] = 1
        fake.faults.inject[("GET", "resourceclaims/p-extended-resources-")] = [503]
        assert "reading it back" in bind(http, "p", "node-1")
        [orphan] = extended_claims(fake, "uid-p")
        assert "status" not in orphan
        assert bind(http, "p", "node-1") == ""
        metrics = http.get("/metrics").text
        assert 'dra_extender_resourceclaim_creates_total{outcome="failure"} 1.0' in metrics
        assert 'dra_extender_resourceclaim_creates_total{outcome="reused"} 1.0' in metrics
    assert node_of(fake, "p") == "node-1"
    [used] = extended_claims(fake, "uid-p")
    assert used["metadata"]["uid"] == orphan["metadata"]["uid"]
    assert violations(fake) == []


@pytest.mark.parametrize(
    ("fault", "path"),
    [("inject", ("PATCH", "pods/p/status")), ("inject", ("POST", "pods/p/binding"))],
    ids=["pod status refused", "binding refused"],
)
def test_a_failed_bind_deletes_its_claim_and_a_retry_binds(
    fake: FakeApiServer, tmp_path: Path, fault: str, path: tuple[str, str]
) -> None:
    fake.create(er_pod("p", 2))
    fake.create(er_pod("q", 2))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.inject[path] = [403]
        assert "403" in bind(http, "p", "node-1")
        assert extended_claims(fake, "uid-p") == []  # deleted, as upstream Unreserve does
        assert node_of(fake, "p") is None
        # Its devices are free again: q gets them; p's retry goes elsewhere.
        wait_until(lambda: filtered(http, er_pod("q", 2), ["node-1"])["NodeNames"] == ["node-1"])
        assert bind(http, "q", "node-1") == ""
        assert bind(http, "p", "node-2") == ""
    assert violations(fake) == []


def test_a_binding_with_unknown_outcome_keeps_the_claim(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.create(er_pod("p", 2))
    fake.create(er_pod("q", 2))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.inject[("POST", "pods/p/binding")] = [500]
        fake.faults.inject[("GET", "namespaces/default/pods/p")] = [500]
        assert "outcome unknown" in bind(http, "p", "node-1")
        [kept] = extended_claims(fake, "uid-p")
        assert kept["status"]["reservedFor"][0]["uid"] == "uid-p"
        assert "cannot bind" in bind(http, "q", "node-1")  # its devices stay taken
    assert violations(fake, allow_unbound={"p"}) == []


def test_a_stale_claim_is_rejected_then_deleted(fake: FakeApiServer, tmp_path: Path) -> None:
    # The extender died after creating and allocating p's claim: the next attempt's filter
    # rejects every node (upstream Filter), its PostFilter deletes the claim, the retry binds.
    spec = er_pod("p")
    fake.create(spec)
    stale = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "p-extended-resources-old",
            "namespace": "default",
            "annotations": {ANNOTATION: "true"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
            ],
            "finalizers": ["resource.kubernetes.io/delete-protection"],
        },
        "spec": {
            "devices": {
                "requests": [{"name": "container-0-request-0", "exactly": {"deviceClassName": "gpu"}}]
            }
        },
    }
    fake.create(stale)
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        answer = filtered(http, spec, ["node-1", "node-2"])
        assert answer["NodeNames"] == []
        assert set(answer["FailedAndUnresolvableNodes"].values()) == {
            "cannot schedule extended resource claim"
        }
        wait_until(lambda: extended_claims(fake, "uid-p") == [])
        wait_until(lambda: filtered(http, spec, ["node-1"])["NodeNames"] == ["node-1"])
        assert bind(http, "p", "node-1") == ""
    assert violations(fake) == []


def test_concurrent_extended_pods_under_a_lagging_watch_never_share_a_device(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    # Created claims reach the cache late: their devices stay taken until it shows them.
    pods = [f"p{i}" for i in range(6)]
    for name in pods:
        fake.create(er_pod(name))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.watch_lag = 2.0
        results = {name: bind(http, name, "node-1") for name in pods}
    assert sum(1 for e in results.values() if e == "") == 2
    assert violations(fake) == []


def test_a_deleted_pods_claim_is_garbage_collected(fake: FakeApiServer, tmp_path: Path) -> None:
    fake.create(er_pod("p", 2))
    fake.create(er_pod("q", 2))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        assert bind(http, "p", "node-1") == ""
        fake.delete_direct("Pod", "p", "default")  # the garbage collector deletes its claim
        assert extended_claims(fake, "uid-p") == []
        wait_until(lambda: filtered(http, er_pod("q", 2), ["node-1"])["NodeNames"] == ["node-1"])
        assert bind(http, "q", "node-1") == ""
    assert violations(fake) == []


def test_a_lost_status_write_of_the_created_claim_keeps_its_devices(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    # The created claim's status write lands with its answer lost, reading it back fails, and
    # the watch has not delivered the claim yet: its devices stay taken (q cannot get them).
    # kube-scheduler retries p from filter: once the cache shows the claim, Filter rejects it
    # and PostFilter deletes it (upstream), after which p fits again and binds.
    fake.create(er_pod("p", 2))
    fake.create(er_pod("q", 2))
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.watch_lag = 3.0
        fake.faults.lose_answer[("PUT", "resourceclaims/p-extended-resources-")] = 0
        fake.faults.lose_answer[("PUT", "/status")] = 1
        fake.faults.inject[("GET", "resourceclaims/p-extended-resources-")] = [500, 500]
        assert "outcome" in bind(http, "p", "node-1")
        [landed] = extended_claims(fake, "uid-p")
        assert landed["status"]["reservedFor"][0]["uid"] == "uid-p"
        assert "cannot bind" in bind(http, "q", "node-1")
        wait_until(lambda: filtered(http, er_pod("p", 2), ["node-1"])["NodeNames"] == ["node-1"], timeout=20)
        assert bind(http, "p", "node-1") == ""
    assert node_of(fake, "p") == "node-1" and node_of(fake, "q") is None
    assert len(extended_claims(fake, "uid-p")) == 1
    assert violations(fake) == []
