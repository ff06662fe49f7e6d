"""Device preemption end to end: ``serve --kubeconfig --device-preemption`` against the fake API
server, the test playing kube-scheduler 1.38 (filter, preempt with a placeholder candidate,
nominate, evict, retry, bind) and kube-controller-manager's resourceclaim controller (release
the victim's claim when it is gone). What is checked is the API server's store."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.builders import (
    allocated,
    claim,
    device,
    device_class,
    exact,
    node,
    pod,
    pod_disruption_budget,
    reserve,
    resource_slice,
)
from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations
from tests.integration.servers import cli_server
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import args_names, binding

NODES = ["gpu-node", "cpu-node"]


def running(
    name: str, priority: int, gpus: tuple[int, ...], labels: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """A bound pod on gpu-node whose claim holds these GPUs."""
    held = claim(
        f"{name}-gpus", allocation=allocated(*(("gpu.example.com", "gpu-node", f"gpu-{i}") for i in gpus))
    )
    held["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    reserve(held, name)
    p = pod(name, [f"{name}-gpus"], node_name="gpu-node", priority=priority, labels=labels)
    p["status"] = {"phase": "Running", "startTime": "2026-11-24T00:00:00Z"}
    return [held, p]


def waiting(name: str, priority: int, gpus: int) -> list[dict[str, Any]]:
    return [
        claim(f"{name}-gpus", requests=[exact("gpu", "gpu.example.com", count=gpus)]),
        pod(name, [f"{name}-gpus"], priority=priority),
    ]


def cluster(fake: FakeApiServer, *objects: dict[str, Any]) -> None:
    base = [
        device_class("gpu.example.com", 'device.driver == "gpu.example.com"'),
        node("gpu-node"),
        node("cpu-node"),
        resource_slice(
            "gpu-node-gpus",
            [device(f"gpu-{i}") for i in range(2)],
            driver="gpu.example.com",
            pool="gpu-node",
            node="gpu-node",
        ),
    ]
    for obj in [*base, *objects]:
        fake.create(obj)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer(minor="38") as server:  # kube-scheduler 1.38: it can use device preemption
        yield server


def scheduler_view(fake: FakeApiServer, name: str) -> dict[str, Any]:
    """The pod as kube-scheduler's informer has it (as the fake stores it)."""
    return fake.get("Pod", name, "default")


def filter_(http: httpx.Client, fake: FakeApiServer, name: str) -> dict[str, Any]:
    answer = http.post("/scheduler/filter", content=args_names(scheduler_view(fake, name), NODES))
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()
    return result


def preempt(
    http: httpx.Client, fake: FakeApiServer, name: str, candidates: dict[str, list[str]]
) -> dict[str, Any]:
    body = {
        "Pod": scheduler_view(fake, name),
        "NodeNameToVictims": None,
        "NodeNameToMetaVictims": {
            n: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
            for n, uids in candidates.items()
        },
    }
    answer = http.post("/scheduler/preempt", content=orjson.dumps(body))
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()["NodeNameToMetaVictims"]
    return result


def evict(fake: FakeApiServer, victim: str) -> None:
    """kube-scheduler deletes the victim; the resourceclaim controller then releases its claim."""
    fake.delete_direct("Pod", victim, "default")

    def released(obj: dict[str, Any]) -> None:
        obj["status"] = {}
        obj["metadata"]["finalizers"] = []

    fake.update_direct("ResourceClaim", f"{victim}-gpus", "default", released)


def nominate(fake: FakeApiServer, name: str, node_name: str) -> None:
    def nominated(obj: dict[str, Any]) -> None:
        obj.setdefault("status", {})["nominatedNodeName"] = node_name

    fake.update_direct("Pod", name, "default", nominated)


def in_cache(http: httpx.Client, check: Any) -> None:
    wait_until(lambda: check(http.get("/debug/claims").json()["claims"]))


def test_a_high_priority_pod_preempts_the_low_priority_pod_holding_all_gpus(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    cluster(fake, *running("low", 10, (0, 1)), *waiting("high", 1000, 2), *waiting("mid", 500, 1))
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path), "--device-preemption") as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        # Filter: gpu-node lacks GPUs only because a less important pod holds them: Unschedulable
        # (preemption may help); cpu-node has none at all: Unresolvable.
        result = filter_(http, fake, "high")
        assert result["NodeNames"] == []
        assert "preemption may help" in result["FailedNodes"]["gpu-node"]
        assert list(result["FailedAndUnresolvableNodes"]) == ["cpu-node"]
        # kube-scheduler 1.38's dry run (in-tree filters only) finds gpu-node fits with no victim:
        # a placeholder. The extender names the pod to evict.
        answer = preempt(http, fake, "high", {"gpu-node": []})
        assert answer == {"gpu-node": {"Pods": [{"UID": "uid-low"}], "NumPDBViolations": 0}}
        # The scheduler nominates gpu-node for high and evicts low; the claim controller releases
        # low's claim once low is gone.
        nominate(fake, "high", "gpu-node")
        wait_until(lambda: http.get("/debug/pods/default/high").json().get("nominatedNodeName") == "gpu-node")
        assert (
            "nominated to gpu-node by a preemption" in http.get("/debug/pods/default/high?format=text").text
        )
        evict(fake, "low")
        in_cache(
            http, lambda claims: not any(c["claim"] == "default/low-gpus" and c["allocated"] for c in claims)
        )
        # A pod less important than high, filtered first, may not take the freed GPUs.
        mid = filter_(http, fake, "mid")
        assert mid["NodeNames"] == []
        assert "kept for default/high" in mid["FailedAndUnresolvableNodes"]["gpu-node"]
        assert http.post("/scheduler/bind", content=binding("mid", "uid-mid", "gpu-node")).json()["Error"]
        # high's retry: the nominated node first, then the bind.
        assert filter_(http, fake, "high")["NodeNames"] == ["gpu-node"]
        assert http.post("/scheduler/bind", content=binding("high", "uid-high", "gpu-node")).json() == {
            "Error": ""
        }
    stored = fake.get("ResourceClaim", "high-gpus", "default")
    assert sorted(r["device"] for r in stored["status"]["allocation"]["devices"]["results"]) == [
        "gpu-0",
        "gpu-1",
    ]
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "high", "uid": "uid-high"}]
    assert fake.get("Pod", "high", "default")["spec"]["nodeName"] == "gpu-node"
    assert "nodeName" not in fake.get("Pod", "mid", "default")["spec"]
    assert violations(fake) == []


def test_preemption_spares_a_pod_its_disruption_budget_protects(fake: FakeApiServer, tmp_path: Path) -> None:
    cluster(
        fake,
        *running("guarded", 10, (0,), labels={"app": "guarded"}),
        *running("plain", 10, (1,), labels={"app": "plain"}),
        *waiting("high", 1000, 1),
    )
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path), "--device-preemption") as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        # Without a budget the later-named of two equal pods goes (equal start: by name).
        assert preempt(http, fake, "high", {"gpu-node": []})["gpu-node"]["Pods"] == [{"UID": "uid-plain"}]
        # The budget arrives through the informer: the protected pod is spared where another will do.
        fake.create(pod_disruption_budget("keep-plain", {"app": "plain"}, allowed=0))
        wait_until(
            lambda: (
                preempt(http, fake, "high", {"gpu-node": []})["gpu-node"]["Pods"] == [{"UID": "uid-guarded"}]
            )
        )
        # A candidate the scheduler filled for CPU keeps its victims; a node no eviction helps is dropped.
        answer = preempt(http, fake, "high", {"gpu-node": ["uid-plain"], "cpu-node": []})
        assert answer == {"gpu-node": {"Pods": [{"UID": "uid-plain"}], "NumPDBViolations": 0}}


def test_without_device_preemption_device_shortage_stays_unresolvable(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    cluster(fake, *running("low", 10, (0, 1)), *waiting("high", 1000, 2))
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path)) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        result = filter_(http, fake, "high")
        assert result["FailedNodes"] == {}
        assert sorted(result["FailedAndUnresolvableNodes"]) == sorted(NODES)


@pytest.mark.parametrize("minor", ["36", "37"])
def test_device_preemption_falls_back_against_an_older_control_plane(minor: str, tmp_path: Path) -> None:
    """kube-scheduler is never newer than kube-apiserver: against 1.37 or older, nodes answered
    Unschedulable for devices would make kube-scheduler's preemption fail ("expected at least one
    victim pod on node") and retry the pod ~100 times a second (measured with 1.36). The flag
    falls back to the in-tree answers, with one warning."""
    from tests.integration.servers import server_process

    with FakeApiServer(minor=minor) as fake:
        cluster(fake, *running("low", 10, (0, 1)), *waiting("high", 1000, 2))
        command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
        command += ["--kubeconfig", kubeconfig(fake, tmp_path), "--device-preemption"]
        with (
            server_process(command) as (url, process),
            httpx.Client(base_url=url, timeout=10) as http,
        ):
            wait_until(lambda: ready(http))
            result = filter_(http, fake, "high")
            assert result["FailedNodes"] == {}
            assert sorted(result["FailedAndUnresolvableNodes"]) == sorted(NODES)
            logged: list[str] = process.output_lines  # type: ignore[attr-defined]
            warnings = [line for line in logged if "--device-preemption is off" in line]
        assert len(warnings) == 1
        assert f"the API server is 1.{minor}" in warnings[0]


def test_budgets_the_extender_may_not_read_never_stop_binds(fake: FakeApiServer, tmp_path: Path) -> None:
    # RBAC from before this release: listing PodDisruptionBudgets is forbidden, every time.
    fake.faults.inject[("GET", "/poddisruptionbudgets")] = [403] * 10_000
    cluster(fake, *waiting("high", 1000, 2))
    with (
        cli_server(
            "--kubeconfig", kubeconfig(fake, tmp_path), "--device-preemption", "--cache-stale-after", "1"
        ) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        time.sleep(1.5)  # past --cache-stale-after: a required informer would have made it stale
        assert ready(http)
        assert http.post("/scheduler/bind", content=binding("high", "uid-high", "gpu-node")).json() == {
            "Error": ""
        }
    assert fake.calls("GET", "/apis/policy/v1/poddisruptionbudgets")  # it did try
