"""Bind under API server faults, item by item (issue 9), checked on the fake API server's own store.

Each test runs ``dra-extender serve --kubeconfig`` against the fake, injects one kind of fault,
and asserts what the cluster must look like afterwards: no device in two claims, every bound
pod's claims allocated on its node and reserved for it, no reservation for an unbound pod.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.builders import allocated, claim, device, device_class, node, pod, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations
from tests.integration.servers import cli_server, server_process
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import binding


def small_cluster(devices_per_node: dict[str, int]) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [device_class()]
    for name, count in devices_per_node.items():
        objects.append(node(name))
        objects.append(
            resource_slice(f"{name}-slice", [device(f"d{i}") for i in range(count)], node=name, pool=name)
        )
    return objects


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


def create(fake: FakeApiServer, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        fake.create(obj)


def bind(http: httpx.Client, name: str, node_name: str) -> str:
    answer = http.post("/scheduler/bind", content=binding(name, f"uid-{name}", node_name))
    assert answer.status_code == 200
    error: str = answer.json()["Error"]
    return error


def assert_consistent(fake: FakeApiServer) -> None:
    assert violations(fake) == []


def node_of(fake: FakeApiServer, name: str) -> str | None:
    result: str | None = fake.get("Pod", name, "default")["spec"].get("nodeName")
    return result


def claim_status(fake: FakeApiServer, name: str) -> dict[str, Any]:
    result: dict[str, Any] = fake.get("ResourceClaim", name, "default").get("status") or {}
    return result


def serve(fake: FakeApiServer, tmp_path: Path, *extra: str) -> Any:
    return cli_server("--kubeconfig", kubeconfig(fake, tmp_path), "--api-timeout", "1", *extra)


def test_item1_status_write_applied_answer_lost_and_watch_lagging(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    # The status write lands, its answer is lost, the read-back fails and the watch lags: the
    # device stays taken, the next pod does not get it, and the first pod's retry binds it.
    create(fake, [*small_cluster({"node-1": 1}), claim("a"), claim("b"), pod("pa", ["a"]), pod("pb", ["b"])])
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.watch_lag = 3.0
        fake.faults.lose_answer[("PUT", "resourceclaims/a/status")] = 1
        fake.faults.inject[("GET", "namespaces/default/resourceclaims/a")] = [500, 500]
        assert "outcome" in bind(http, "pa", "node-1")
        assert claim_status(fake, "a")["reservedFor"][0]["uid"] == "uid-pa"  # it did land
        assert "cannot bind" in bind(http, "pb", "node-1")
        assert claim_status(fake, "b") == {}
        # The retry sends the write again (409: it had landed); reading back fails once more: the
        # device stays taken, still.
        assert "not settled" in bind(http, "pa", "node-1")
        assert "cannot bind" in bind(http, "pb", "node-1")
        assert bind(http, "pa", "node-1") == ""
        assert node_of(fake, "pa") == "node-1" and node_of(fake, "pb") is None
        assert_consistent(fake)


#: Pod p with claims a and b on a node with two devices; pod pq (claim q) wants one of them.
TWO_CLAIMS_AND_ANOTHER_POD = [
    *small_cluster({"node-1": 2}),
    claim("a"),
    claim("b"),
    claim("q"),
    pod("p", ["a", "b"]),
    pod("pq", ["q"]),
]


def test_item2_binding_fails_after_claims_were_written(fake: FakeApiServer, tmp_path: Path) -> None:
    # The Binding answers 500 after both claims were written, the watch lags: the claims stay
    # reserved for the pod (the Binding may have landed); nobody else gets their devices.
    create(fake, TWO_CLAIMS_AND_ANOTHER_POD)
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.watch_lag = 1.0
        fake.faults.inject[("POST", "pods/p/binding")] = [500]
        assert "outcome unknown" in bind(http, "p", "node-1")
        assert "cannot bind" in bind(http, "pq", "node-1")
        assert bind(http, "p", "node-1") == ""
        assert node_of(fake, "p") == "node-1" and claim_status(fake, "q") == {}
        assert_consistent(fake)


def test_item2_second_claim_refused_releases_the_first(fake: FakeApiServer, tmp_path: Path) -> None:
    create(fake, TWO_CLAIMS_AND_ANOTHER_POD)
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.watch_lag = 1.0
        fake.faults.inject[("PUT", "resourceclaims/b/status")] = [422]
        assert "422" in bind(http, "p", "node-1")
        assert claim_status(fake, "a") == {} and claim_status(fake, "b") == {}
        # Released for real (a deallocation the extender wrote and saw answered): q may use them.
        assert bind(http, "pq", "node-1") == ""
        assert_consistent(fake)


def test_item3_a_burst_against_a_slow_api_server(fake: FakeApiServer, tmp_path: Path) -> None:
    # Writes queue behind a slow API server; nothing expires while they are pending.
    pods = [f"p{i}" for i in range(8)]
    objects = small_cluster({"node-1": 3})
    for name in pods:
        objects += [claim(f"c-{name}"), pod(name, [f"c-{name}"])]
    create(fake, objects)
    with serve(fake, tmp_path, "--api-timeout", "10") as url, httpx.Client(base_url=url, timeout=60) as http:
        wait_until(lambda: ready(http))
        fake.faults.write_latency = 0.3
        fake.faults.watch_lag = 1.0
        errors: dict[str, str] = {}

        def one(name: str) -> None:
            errors[name] = bind(http, name, "node-1")

        threads = [threading.Thread(target=one, args=(n,)) for n in pods]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(errors) == sorted(pods)
        assert list(errors.values()).count("") == 3
        assert_consistent(fake)


@pytest.mark.parametrize("fault", ["null_status", "garbage"])
def test_item4_malformed_answers_fail_cleanly_and_a_retry_binds(
    fake: FakeApiServer, tmp_path: Path, fault: str
) -> None:
    create(fake, [*small_cluster({"node-1": 1}), claim("a"), pod("pa", ["a"])])
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        getattr(fake.faults, fault)[("PUT", "resourceclaims/a")] = 1
        first = bind(http, "pa", "node-1")
        if first:
            assert bind(http, "pa", "node-1") == ""
        assert node_of(fake, "pa") == "node-1"
        assert http.get("/debug/inflight").json()["inFlight"] == []
        assert_consistent(fake)


def test_item4_sigterm_during_a_bind_completes(fake: FakeApiServer, tmp_path: Path) -> None:
    create(fake, [*small_cluster({"node-1": 1}), claim("a"), pod("pa", ["a"])])
    command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
    command += ["--kubeconfig", kubeconfig(fake, tmp_path)]
    with server_process(command) as (url, proc), httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.write_latency = 2.0
        result: list[Any] = []

        def slow_bind() -> None:
            try:
                result.append(bind(http, "pa", "node-1"))
            except httpx.HTTPError as exc:
                result.append(exc)

        thread = threading.Thread(target=slow_bind)
        thread.start()
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) is not None, "SIGTERM did not stop the server"
        thread.join(30)
        assert result, "the bind never answered"
    fake.faults.write_latency = 0.0
    assert_consistent(fake)


def test_item5_binding_applied_answer_lost_and_read_back_fails(fake: FakeApiServer, tmp_path: Path) -> None:
    create(fake, [*small_cluster({"node-1": 1}), claim("a"), pod("pa", ["a"])])
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        fake.faults.lose_answer[("POST", "pods/pa/binding")] = 1
        fake.faults.inject[("GET", "namespaces/default/pods/pa")] = [500] * 3
        assert "outcome unknown" in bind(http, "pa", "node-1")
        assert node_of(fake, "pa") == "node-1"
        assert claim_status(fake, "a")["reservedFor"][0]["uid"] == "uid-pa"  # never released
        assert_consistent(fake)
        # The scheduler's retry: answered success, nothing released.
        assert bind(http, "pa", "node-1") == ""
        assert_consistent(fake)


def test_item5_retry_of_a_bound_pod_repairs_its_reservation(fake: FakeApiServer, tmp_path: Path) -> None:
    objects = [
        *small_cluster({"node-1": 1}),
        claim("a", allocation=allocated(("driver-a", "node-1", "d0"))),
        pod("pa", ["a"], node_name="node-1"),
    ]
    create(fake, objects)
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        assert bind(http, "pa", "node-1") == ""
        assert claim_status(fake, "a")["reservedFor"] == [{"resource": "pods", "name": "pa", "uid": "uid-pa"}]
        assert_consistent(fake)


def test_item6_a_claim_left_on_a_vanished_node_is_deallocated(fake: FakeApiServer, tmp_path: Path) -> None:
    left = claim("a", allocation=allocated(("driver-a", "node-2", "d0")))
    left["status"]["allocation"]["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-2"]}]}
        ]
    }
    left["status"]["reservedFor"] = [{"resource": "pods", "name": "pa", "uid": "uid-pa"}]
    left["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    create(fake, [*small_cluster({"node-1": 1}), left, pod("pa", ["a"])])
    from tests.service.fixtures import args_names, scheduler_pod

    pa = scheduler_pod("pa", "uid-pa", [{"name": "a", "resourceClaimName": "a"}])
    with serve(fake, tmp_path) as url, httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: ready(http))
        assert http.post("/scheduler/filter", content=args_names(pa, ["node-1"])).json()["NodeNames"] == []
        wait_until(lambda: not claim_status(fake, "a").get("allocation"))
        assert not claim_status(fake, "a").get("reservedFor")
        wait_until(
            lambda: (
                http.post("/scheduler/filter", content=args_names(pa, ["node-1"])).json()["NodeNames"]
                == ["node-1"]
            )
        )
        assert bind(http, "pa", "node-1") == ""
        assert_consistent(fake)
