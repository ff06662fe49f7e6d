"""The real service (uvicorn on 127.0.0.1) on the example state, driven as kube-scheduler does."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx
import yaml

from extender.service.app import create_app
from extender.service.runtime import ServeConfig, build_embedded
from tests.builders import claim, device, device_class, node, pod, resource_slice
from tests.integration.servers import EXAMPLES, cli_server, cli_server_and_ops, thread_server
from tests.service.fixtures import EXAMPLE_NODES, INFERENCE, TRAINER, args_names, binding, scheduler_pod


def test_scheduling_cycle_through_the_cli_server() -> None:
    with cli_server("--state", EXAMPLES) as url, httpx.Client(base_url=url, timeout=10) as http:
        assert http.get("/readyz").status_code == 200
        # filter -> prioritize -> bind, as kube-scheduler would for the trainer pod.
        filtered = http.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES)).json()
        assert filtered["NodeNames"] == ["gpu-node-3"] and filtered["Error"] == ""
        scores = http.post("/scheduler/prioritize", content=args_names(TRAINER, filtered["NodeNames"])).json()
        assert scores == [{"Host": "gpu-node-3", "Score": 5}]
        assert http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json() == {"Error": ""}
        # The claim as written, and the pod's binding, as the debug endpoints show them.
        claims = {c["claim"]: c for c in http.get("/debug/claims").json()["claims"]}
        trainer = claims["default/trainer-gpus"]
        assert trainer["allocated"] and trainer["reservedFor"] == ["pods/trainer"]
        assert trainer["devices"] == [f"gpu=gpu.example.com/gpu-node-3/gpu-{i}" for i in range(4)]
        # inference-0 (template claim) then lands on the fullest A100 node, gpu-node-1.
        inference_nodes = ["gpu-node-1", "gpu-node-2", "gpu-node-3"]
        filtered = http.post("/scheduler/filter", content=args_names(INFERENCE, inference_nodes)).json()
        assert filtered["NodeNames"] == ["gpu-node-1", "gpu-node-2"]
        scores = {
            s["Host"]: s["Score"]
            for s in http.post(
                "/scheduler/prioritize", content=args_names(INFERENCE, filtered["NodeNames"])
            ).json()
        }
        best = max(scores, key=lambda n: scores[n])
        assert best == "gpu-node-1"
        assert http.post(
            "/scheduler/bind", content=binding("inference-0", "uid-pod-inference-0", best)
        ).json() == {"Error": ""}
        inventory = http.get("/debug/inventory").json()["nodes"]["gpu-node-1"]["devices"]
        assert [d["allocatedTo"] for d in inventory if d["device"].endswith("/gpu-2")] == [
            ["default/inference-0-gpu-x7k2p"]
        ]
        assert "bind" in http.get("/debug/decisions?format=text").text
        metrics = http.get("/metrics").text
        assert 'dra_extender_binds_total{outcome="success"} 2.0' in metrics


def test_concurrent_binds_over_http_never_share_a_device(tmp_path: Any) -> None:
    n_pods, n_devices = 16, 6
    objects: list[dict[str, Any]] = [
        device_class(),
        node("node-1"),
        resource_slice("s", [device(f"d{i}") for i in range(n_devices)]),
    ]
    for i in range(n_pods):
        objects += [claim(f"c{i}"), pod(f"p{i}", [f"c{i}"])]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    service, store = build_embedded([str(path)], ServeConfig())

    async def storm(url: str) -> list[dict[str, Any]]:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:

            async def one(i: int) -> dict[str, Any]:
                spod = scheduler_pod(f"p{i}", f"uid-p{i}", [{"name": f"c{i}", "resourceClaimName": f"c{i}"}])
                filtered = (await http.post("/scheduler/filter", content=args_names(spod, ["node-1"]))).json()
                if filtered["NodeNames"] != ["node-1"]:
                    return {"Error": "filtered out"}
                result: dict[str, Any] = (
                    await http.post("/scheduler/bind", content=binding(f"p{i}", f"uid-p{i}", "node-1"))
                ).json()
                return result

            return list(await asyncio.gather(*(one(i) for i in range(n_pods))))

    with thread_server(create_app(service)) as url:
        results = asyncio.run(storm(url))
    assert sum(1 for r in results if r["Error"] == "") == n_devices
    taken: list[str] = []
    for i in range(n_pods):
        status = store.get("ResourceClaim", "default", f"c{i}").get("status") or {}
        results_i = (status.get("allocation") or {}).get("devices", {}).get("results", [])
        taken += [r["device"] for r in results_i]
        bound = store.get("Pod", "default", f"p{i}")["spec"].get("nodeName") == "node-1"
        assert bound == bool(results_i) == bool(status.get("reservedFor")), (i, status)
    assert sorted(taken) == sorted(f"d{i}" for i in range(n_devices))
    assert json.loads(json.dumps(service.engine.tracker.binds == {}))


def test_health_answers_while_an_expensive_filter_runs(tmp_path: Any) -> None:
    # Issue 9, item 8: /healthz and /metrics on the ops listener (its own thread and loop) stay
    # prompt while the engine works, and the filter stops at its budget (checked before every
    # allocation: no two nodes here look alike).
    from tests.builders import attrs

    n = 300  # a selector of n*n comprehension steps: 0.05-0.15 s per device on this machine
    numbers = ",".join(map(str, range(n)))
    heavy = f'device.attributes["driver-a"].index >= 0 && [{numbers}].all(i, [{numbers}].all(j, i + j >= 0))'
    objects: list[dict[str, Any]] = [device_class(expression=heavy)]
    names = [f"node-{i}" for i in range(120)]  # 6-18 s of selectors: far past the 2 s budget
    for i, name in enumerate(names):
        objects += [
            node(name),
            resource_slice(f"s{i}", [device("d", attributes=attrs(index=i))], node=name, pool=name),
        ]
    objects += [claim("c"), pod("p", ["c"])]
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(objects))
    p = scheduler_pod("p", "uid-p", [{"name": "c", "resourceClaimName": "c"}])
    with (
        cli_server_and_ops("--state", str(state), "--filter-budget", "2") as (url, ops),
        httpx.Client(base_url=url, timeout=30) as http,
    ):
        result: dict[str, Any] = {}

        def run_filter() -> None:
            started = time.monotonic()
            result["answer"] = http.post("/scheduler/filter", content=args_names(p, names)).json()
            result["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=run_filter)
        thread.start()
        # Probe once the engine is inside the filter: a scrape before it would start the capacity
        # gauges' computation, which evaluates the same costly selector and warms its cache.
        time.sleep(0.3)
        slowest = 0.0
        with httpx.Client(base_url=ops, timeout=30) as health:
            while thread.is_alive():
                started = time.monotonic()
                assert health.get("/healthz").status_code == 200
                assert health.get("/metrics").status_code == 200
                slowest = max(slowest, time.monotonic() - started)
                time.sleep(0.05)
        thread.join()
        assert result["seconds"] > 1.0, result  # the filter was busy all along (else this proves nothing)
        assert result["seconds"] < 2 + 1.5  # the budget (2 s) plus at most about one node's allocation
        assert slowest < 0.5
        assert any("time budget" in why for why in result["answer"]["FailedNodes"].values()), result


def test_an_extended_resource_pod_on_the_embedded_default() -> None:
    # legacy-gpu (examples/) asks example.com/gpu, which DeviceClass gpu.example.com names.
    service, store = build_embedded([EXAMPLES], ServeConfig())
    with thread_server(create_app(service)) as url, httpx.Client(base_url=url, timeout=10) as http:
        spec = store.get("Pod", "default", "legacy-gpu")
        filtered = http.post("/scheduler/filter", content=args_names(spec, EXAMPLE_NODES)).json()
        assert filtered["NodeNames"] == ["gpu-node-1", "gpu-node-2", "gpu-node-3"]
        assert "cpu-node-1" in filtered["FailedAndUnresolvableNodes"]
        explained = http.get("/debug/pods/default/legacy-gpu").json()
        extended = explained["nodes"]["gpu-node-2"]["extendedResources"]
        assert extended["resources"] == ["example.com/gpu"]
        assert http.post(
            "/scheduler/bind", content=binding("legacy-gpu", "uid-pod-legacy-gpu", "gpu-node-2")
        ).json() == {"Error": ""}
        pod_status = store.get("Pod", "default", "legacy-gpu")["status"]["extendedResourceClaimStatus"]
        name = pod_status["resourceClaimName"]
        assert name.startswith("legacy-gpu-extended-resources-")
        assert sorted(m["containerName"] for m in pod_status["requestMappings"]) == ["main", "warmup"]
        claims = {c["claim"]: c for c in http.get("/debug/claims").json()["claims"]}
        assert claims[f"default/{name}"]["reservedFor"] == ["pods/legacy-gpu"]
        assert 'dra_extender_resourceclaim_creates_total{outcome="success"} 1.0' in http.get("/metrics").text
        # The pod goes away: the embedded default collects its claim (the garbage collector's job).
        store.delete("Pod", "default", "legacy-gpu")
        assert f"default/{name}" not in {c["claim"] for c in http.get("/debug/claims").json()["claims"]}
        inventory = http.get("/debug/inventory").json()["nodes"]["gpu-node-2"]["devices"]
        assert not any(name in str(d.get("allocatedTo")) for d in inventory)
