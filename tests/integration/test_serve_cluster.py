"""dra-extender serve --kubeconfig against the fake API server: informers, writes, faults."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.builders import device, device_taint_rule, node, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.servers import cli_server, server_process
from tests.service.fixtures import EXAMPLE_NODES, TRAINER, args_names, binding
from tests.shared import REPO


def kubeconfig(fake: FakeApiServer | str, directory: Path, token: str = "test-token") -> str:
    """A kubeconfig for the fake API server (or any server URL) with a test token (the cluster's
    admin on the fake, unless :meth:`FakeApiServer.person` made it)."""
    server = fake if isinstance(fake, str) else fake.url
    path = directory / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": server}}],
                "users": [{"name": "extender", "user": {"token": token}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "extender"}}],
                "current-context": "fake",
            }
        )
    )
    return str(path)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        for obj in yaml.safe_load_all((REPO / "examples" / "cluster.yaml").read_text()):
            server.create(obj)
        yield server


def wait_until(check: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def ready(http: httpx.Client) -> bool:
    return http.get("/readyz").status_code == 200


def test_cycle_against_the_api_server(fake: FakeApiServer, tmp_path: Path) -> None:
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path)) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        inventory = http.get("/debug/inventory").json()["nodes"]
        assert sorted(inventory) == EXAMPLE_NODES
        filtered = http.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES)).json()
        assert filtered["NodeNames"] == ["gpu-node-3"]
        assert http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json() == {"Error": ""}
        # Exactly the in-tree writes: finalizer (Update), allocation + reservation (UpdateStatus), Binding.
        # (A SelfSubjectReview is a POST that stores nothing: the store fence check's question.)
        writes = [
            (m, p.split("?")[0])
            for m, p, _ in fake.requests
            if m in ("PUT", "POST", "PATCH") and "events" not in p and "selfsubjectreviews" not in p
        ]
        base = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/trainer-gpus"
        assert writes == [
            ("PUT", base),
            ("PUT", base + "/status"),
            ("POST", "/api/v1/namespaces/default/pods/trainer/binding"),
        ]
        claim = fake.get("ResourceClaim", "trainer-gpus", "default")
        assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert len(claim["status"]["allocation"]["devices"]["results"]) == 4
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": "trainer", "uid": "uid-pod-trainer"}
        ]
        assert fake.get("Pod", "trainer", "default")["spec"]["nodeName"] == "gpu-node-3"
        # The watch brings the write back into the cache.
        wait_until(
            lambda: any(
                c["claim"] == "default/trainer-gpus" and c["allocated"]
                for c in http.get("/debug/claims").json()["claims"]
            )
        )
        # Objects created in the API server appear in the extender.
        fake.create(node("gpu-node-4"))
        fake.create(
            resource_slice(
                "gpu-node-4-gpus",
                [device("gpu-0")],
                driver="gpu.example.com",
                pool="gpu-node-4",
                node="gpu-node-4",
            )
        )
        wait_until(
            lambda: http.get("/debug/inventory").json()["nodes"].get("gpu-node-4", {}).get("total") == 1
        )


def test_watch_drops_and_410_leave_the_cache_consistent(fake: FakeApiServer, tmp_path: Path) -> None:
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path)) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        fake.faults.drop_watch_after = 1
        fake.create(node("after-drop"))
        fake.faults.drop_watch_after = None
        wait_until(lambda: "after-drop" in http.get("/debug/inventory").json()["nodes"])
        # Deleted while the extender's watches had to relist after compaction: the relist forgets it.
        fake.faults.watch_410 = 20
        fake.store.compact()
        fake.delete_direct("Node", "after-drop")
        fake.create(node("after-410"))
        wait_until(lambda: "after-410" in http.get("/debug/inventory").json()["nodes"])
        wait_until(lambda: "after-drop" not in http.get("/debug/inventory").json()["nodes"])


def test_conflicts_are_retried_and_refused_bindings_release_the_claims(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path)) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        fake.faults.inject[("PUT", "resourceclaims/trainer-gpus/status")] = [409]
        fake.faults.inject[("POST", "pods/trainer/binding")] = [403]
        error = http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json()["Error"]
        assert "binding pod to gpu-node-3 failed" in error
        claim = fake.get("ResourceClaim", "trainer-gpus", "default")
        # Still as we wrote it: allocation and reservation cleared in one status write.
        assert not claim["status"].get("reservedFor") and not claim["status"].get("allocation")
        assert not fake.get("Pod", "trainer", "default")["spec"].get("nodeName")
        assert len(fake.calls("GET", "/resourceclaims/trainer-gpus")) >= 1  # fresh read after the 409
        events = [r for r in fake.requests if r[0] == "POST" and "/events" in r[1]]
        assert events
        # The scheduler's retry, once the API server agrees: allocated afresh and bound.
        assert http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json() == {"Error": ""}
        assert fake.get("Pod", "trainer", "default")["spec"]["nodeName"] == "gpu-node-3"


def test_two_replicas_only_the_lease_holder_binds_and_hands_over(fake: FakeApiServer, tmp_path: Path) -> None:
    config = kubeconfig(fake, tmp_path)
    lease = [
        "--leader-elect",
        "--leader-elect-namespace",
        "default",
        "--leader-elect-lease-duration",
        "2",
        "--leader-elect-renew-deadline",
        "1.5",
        "--leader-elect-retry-period",
        "0.2",
    ]
    first = contextlib.ExitStack()
    url_a = first.enter_context(cli_server("--kubeconfig", config, *lease))
    with httpx.Client(base_url=url_a, timeout=10) as a:
        wait_until(lambda: ready(a))
    with cli_server("--kubeconfig", config, *lease) as url_b, httpx.Client(base_url=url_b, timeout=10) as b:
        wait_until(
            lambda: (
                b.get("/debug/inventory").status_code == 200
                and len(b.get("/debug/inventory").json()["nodes"]) == 4
            )
        )
        time.sleep(1.0)
        assert not ready(b)  # synced, but not the leader
        assert b.get("/readyz").text == (
            "not ready: standby: not the leader (the cache is synced; another replica holds the Lease)\n"
        )
        answer = b.post("/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3"))
        assert answer.status_code == 503
        assert answer.headers["connection"] == "close"  # kube-scheduler reconnects, to the leader
        assert "does not hold the Lease" in answer.json()["Error"]
        holder = fake.get("Lease", "dra-extender", "default")["spec"]["holderIdentity"]
        assert holder
        # Stop the leader: the other replica takes over within the lease duration.
        stopped = time.monotonic()
        first.close()
        wait_until(lambda: ready(b), timeout=10)
        assert time.monotonic() - stopped < 2 + 1.5
        assert fake.get("Lease", "dra-extender", "default")["spec"]["holderIdentity"] != holder
        assert b.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json() == {"Error": ""}


def test_a_binding_whose_answer_times_out_is_not_undone(fake: FakeApiServer, tmp_path: Path) -> None:
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path), "--api-timeout", "1") as url,
        httpx.Client(base_url=url, timeout=15) as http,
    ):
        wait_until(lambda: ready(http))
        fake.faults.slow_answer[("POST", "pods/trainer/binding")] = 2.5  # bound on the server, answer lost
        # The fake holds its lock while it delays the answer, so reading the pod back times out
        # too: the outcome is unknown, and nothing may be undone.
        first = http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json()["Error"]
        assert first == "" or "outcome unknown" in first
        claim = fake.get("ResourceClaim", "trainer-gpus", "default")
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": "trainer", "uid": "uid-pod-trainer"}
        ]
        assert fake.get("Pod", "trainer", "default")["spec"]["nodeName"] == "gpu-node-3"
        assert not fake.calls("PATCH")  # nothing was undone
        assert len(fake.calls("PUT", "/status")) == 1
        # The scheduler's retry answers success without writing anything again.
        assert http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json() == {"Error": ""}
        assert len(fake.calls("PUT", "/status")) == 1


def test_shared_and_template_claims_in_cluster_mode(fake: FakeApiServer, tmp_path: Path) -> None:
    from tests.builders import claim, pod
    from tests.service.fixtures import INFERENCE, scheduler_pod

    fake.create(
        claim("shared-gpu", requests=[{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}])
    )
    for name in ("reader-a", "reader-b"):
        fake.create(pod(name, ["shared-gpu"]))
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path)) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        # A template claim, found through the pod's status.
        assert http.post("/scheduler/filter", content=args_names(INFERENCE, ["gpu-node-2"])).json()[
            "NodeNames"
        ] == ["gpu-node-2"]
        assert http.post(
            "/scheduler/bind", content=binding("inference-0", "uid-pod-inference-0", "gpu-node-2")
        ).json() == {"Error": ""}
        assert fake.get("ResourceClaim", "inference-0-gpu-x7k2p", "default")["status"]["allocation"]
        # A claim shared by two pods: allocated once, reserved twice.
        assert http.post(
            "/scheduler/bind", content=binding("reader-a", "uid-reader-a", "gpu-node-2")
        ).json() == {"Error": ""}
        first = fake.get("ResourceClaim", "shared-gpu", "default")["status"]["allocation"]
        wait_until(
            lambda: any(
                c["claim"] == "default/shared-gpu" and c["allocated"]
                for c in http.get("/debug/claims").json()["claims"]
            )
        )
        reader_b = scheduler_pod(
            "reader-b", "uid-reader-b", [{"name": "shared-gpu", "resourceClaimName": "shared-gpu"}]
        )
        filtered = http.post(
            "/scheduler/filter", content=args_names(reader_b, ["gpu-node-1", "gpu-node-2"])
        ).json()
        assert filtered["NodeNames"] == ["gpu-node-2"]  # only where the shared claim's devices are
        assert http.post(
            "/scheduler/bind", content=binding("reader-b", "uid-reader-b", "gpu-node-2")
        ).json() == {"Error": ""}
        final = fake.get("ResourceClaim", "shared-gpu", "default")["status"]
        assert final["allocation"] == first
        assert [e["uid"] for e in final["reservedFor"]] == ["uid-reader-a", "uid-reader-b"]


def as_version(obj: dict[str, Any], version: str) -> dict[str, Any]:
    """An example object as a v1beta2 or v1beta1 server stores it."""
    import copy

    out = copy.deepcopy(obj)
    if not out.get("apiVersion", "").startswith("resource.k8s.io/"):
        return out
    out["apiVersion"] = f"resource.k8s.io/{version}"
    if version != "v1beta1":
        return out
    spec = out.get("spec") or {}
    if out["kind"] == "ResourceSlice":
        spec["devices"] = [{"name": d.pop("name"), "basic": d} for d in spec.get("devices", [])]
    devices = (
        spec.get("devices") if out["kind"] == "ResourceClaim" else (spec.get("spec") or {}).get("devices")
    )
    for request in (devices or {}).get("requests", []):
        request.update(request.pop("exactly", {}))
    return out


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_older_served_versions_are_read_and_written(version: str, tmp_path: Path) -> None:
    with FakeApiServer(dra_version=version) as server:
        for obj in yaml.safe_load_all((REPO / "examples" / "cluster.yaml").read_text()):
            server.create(as_version(obj, version))
        with (
            cli_server("--kubeconfig", kubeconfig(server, tmp_path)) as url,
            httpx.Client(base_url=url, timeout=10) as http,
        ):
            wait_until(lambda: ready(http))
            assert http.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES)).json()[
                "NodeNames"
            ] == ["gpu-node-3"]
            assert http.post(
                "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
            ).json() == {"Error": ""}
            # The extended-resource claim is created in the served version's shape.
            assert http.post(
                "/scheduler/bind", content=binding("legacy-gpu", "uid-pod-legacy-gpu", "gpu-node-1")
            ).json() == {"Error": ""}
        name = server.get("Pod", "legacy-gpu", "default")["status"]["extendedResourceClaimStatus"][
            "resourceClaimName"
        ]
        created = server.get("ResourceClaim", name, "default")
        assert created["apiVersion"] == f"resource.k8s.io/{version}"
        assert ("exactly" in created["spec"]["devices"]["requests"][0]) == (version != "v1beta1")
        assert len(created["status"]["allocation"]["devices"]["results"]) == 2
        paths = {p.split("?")[0] for m, p, _ in server.requests if m == "PUT" and "trainer" in p}
        assert paths == {
            f"/apis/resource.k8s.io/{version}/namespaces/default/resourceclaims/trainer-gpus" + s
            for s in ("", "/status")
        }
        claim = server.get("ResourceClaim", "trainer-gpus", "default")
        assert claim["apiVersion"] == f"resource.k8s.io/{version}"
        request = claim["spec"]["devices"]["requests"][0]
        assert ("exactly" in request) == (version != "v1beta1")  # written back in the version's own shape
        assert len(claim["status"]["allocation"]["devices"]["results"]) == 4


def test_informers_log_their_lists_and_the_cache_logs_synced_once(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    command = [
        sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0",
        "--kubeconfig", kubeconfig(fake, tmp_path), "--log-format", "json",
    ]  # fmt: skip
    with server_process(command) as (url, proc), httpx.Client(base_url=url, timeout=30) as http:
        wait_until(lambda: http.get("/readyz").status_code == 200)
        lines: list[str] = proc.output_lines  # type: ignore[attr-defined]
        wait_until(lambda: any("cache synced" in line for line in lines))
        entries = [json.loads(line) for line in list(lines)]
    listed = {e["kind"]: e for e in entries if e["msg"].startswith("listed ")}
    assert {"Node", "Pod", "ResourceSlice", "DeviceClass", "ResourceClaim"} <= listed.keys()
    assert listed["Node"]["objects"] == len(EXAMPLE_NODES) and listed["Node"]["resourceVersion"]
    assert all(e["level"] == "INFO" for e in listed.values())
    assert len([e for e in entries if e["msg"].startswith("cache synced")]) == 1


def test_a_leader_stopped_gracefully_releases_the_lease_at_once(fake: FakeApiServer, tmp_path: Path) -> None:
    """client-go's ReleaseOnCancel: the successor need not wait a whole lease duration (10 s)."""
    config = kubeconfig(fake, tmp_path)
    lease = ["--leader-elect", "--leader-elect-namespace", "default", "--leader-elect-lease-duration", "10"]
    lease += ["--leader-elect-renew-deadline", "8", "--leader-elect-retry-period", "0.2"]
    first = contextlib.ExitStack()
    url_a = first.enter_context(cli_server("--kubeconfig", config, *lease))
    with httpx.Client(base_url=url_a, timeout=10) as a:
        wait_until(lambda: ready(a))
    holder = fake.get("Lease", "dra-extender", "default")["spec"]["holderIdentity"]
    with cli_server("--kubeconfig", config, *lease) as url_b, httpx.Client(base_url=url_b, timeout=10) as b:
        wait_until(lambda: "standby" in b.get("/readyz").text)
        stopped = time.monotonic()
        first.close()  # SIGTERM: a graceful shutdown
        released = fake.get("Lease", "dra-extender", "default")["spec"]
        assert released["holderIdentity"] in ("", None) or released["holderIdentity"] != holder
        wait_until(lambda: ready(b), timeout=8)
        assert time.monotonic() - stopped < 5  # not the 10 s lease
        assert fake.get("Lease", "dra-extender", "default")["spec"]["holderIdentity"] not in ("", holder)


def test_device_taint_rules_served_only_at_v1beta2_are_read_there(tmp_path: Path) -> None:
    """kube-apiserver 1.36 serves DeviceTaintRules at v1beta2 only (beta, with runtime-config),
    the rest of resource.k8s.io at v1; kube-scheduler 1.36 with DRADeviceTaintRules on reads
    them there. So does the extender (the real API server: tests/realcluster/test_device_taint_rules.py)."""
    with FakeApiServer(served_at={"devicetaintrules": "v1beta2"}) as server:
        for obj in yaml.safe_load_all((REPO / "examples" / "cluster.yaml").read_text()):
            server.create(obj)
        with (
            cli_server("--kubeconfig", kubeconfig(server, tmp_path)) as url,
            httpx.Client(base_url=url, timeout=10) as http,
        ):
            wait_until(lambda: ready(http))
            assert http.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES)).json()[
                "NodeNames"
            ] == ["gpu-node-3"]
            server.create(
                device_taint_rule(
                    "drain-gpu-node-3",
                    driver="gpu.example.com",
                    pool="gpu-node-3",
                    key="maintenance",
                    effect="NoSchedule",
                )
            )
            wait_until(
                lambda: (
                    http.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES)).json()[
                        "NodeNames"
                    ]
                    == []
                )
            )
        watched = {p.split("?")[0] for m, p, _ in server.requests if m == "GET" and "devicetaintrules" in p}
        assert watched == {"/apis/resource.k8s.io/v1beta2/devicetaintrules"}


def test_the_start_up_line_lists_the_effective_settings(tmp_path: Path) -> None:
    """One INFO line an operator can check first: version, mode, listeners, release, gates,
    policy, budgets and leader election."""
    command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
    command += ["--state", str(REPO / "examples"), "--score-policy", "spread", "--node-timeout", "0.5"]
    command += ["--feature-gates", "DRADerivedAttributes=true"]
    with server_process(command) as (_url, proc):
        lines: list[str] = proc.output_lines  # type: ignore[attr-defined]
        wait_until(lambda: any("starting in embedded mode" in line for line in lines))
    line = next(line for line in lines if "starting in embedded mode" in line)
    for field in (
        "listen=127.0.0.1:0",
        "kubernetesVersion=1.37",
        'featureGates="DRADerivedAttributes=true"',
        "scorePolicy=spread",
        "nodeTimeout=0.5",
        "filterBudget=3.0",
        "leaderElection=off",
    ):
        assert field in line, (field, line)
    assert " INFO " in line and "dra-extender " in line
