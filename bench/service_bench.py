"""Service benchmark: filter, prioritize and bind latency at 500 nodes x 8 GPUs, over real HTTP.

Run: ``python -m bench.service_bench`` (``--nodes``, ``--requests``, ``--json FILE``).
``--hints-ab``: instead, filter for pods no node fits against two servers of the same state, one
planning their make-room hints in the background (the default ``--make-room-hint-interval``) and
one not (``0``), in alternating rounds of the same run.

Each verb is measured client-side over one keep-alive connection (kube-scheduler's pattern),
next to the floor of an empty endpoint (a FastAPI route that reads the same body and returns a
constant) served by the same uvicorn setup in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.allocator_bench import EXTENDED, GPU, claim_object, cluster, pod_object
from tests.integration.servers import cli_server, process_server
from tests.service.fixtures import args_names, args_nodes, binding, scheduler_node, scheduler_pod


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e3,
        "max_ms": ordered[-1] * 1e3,
    }


def measure(
    call: Callable[[], httpx.Response],
    n: int,
    warmup: int = 20,
    before: Callable[[], object] = lambda: None,
) -> dict[str, float]:
    """Percentiles of ``call``'s latency; ``before`` runs untimed ahead of every sample."""
    for _ in range(warmup):
        before()
        call()
    samples = []
    for _ in range(n):
        before()
        start = time.perf_counter()
        resp = call()
        samples.append(time.perf_counter() - start)
        assert resp.status_code == 200, resp.text
    return percentiles(samples)


def state_file(directory: Path, nodes: int, pods: int) -> Path:
    objects = cluster(nodes, 8, 0.5)
    one_gpu = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 1}}]}
    # Pods that fit no node (8 GPUs; each node has 4 free): what filter's make-room hint plans for.
    eight_gpus = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 8}}]}
    for i in range(pods):
        objects.append(claim_object(f"nofit-claim-{i}", eight_gpus))
        objects.append(pod_object(f"nofit-{i}", f"nofit-claim-{i}", uid=f"uid-nofit-{i}"))
    for i in range(pods):
        objects.append(claim_object(f"claim-{i}", one_gpu))
        objects.append(pod_object(f"pod-{i}", f"claim-{i}", uid=f"uid-pod-{i}"))
        # The same GPU asked the device-plugin way (the GPU class names example.com/gpu).
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"er-pod-{i}", "namespace": "default", "uid": f"uid-er-pod-{i}"},
                "spec": {
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {EXTENDED: "1"}}}],
                    "schedulerName": "dra-extender-scheduler",
                },
            }
        )
    path = directory / "state.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def row(label: str, result: dict[str, float], floor: dict[str, float]) -> str:
    return (
        f"  {label:40s} p50 {result['p50_ms']:7.3f} ms  p99 {result['p99_ms']:7.3f} ms  "
        f"max {result['max_ms']:7.3f} ms   | floor p50 {floor['p50_ms']:6.3f} p99 {floor['p99_ms']:6.3f}"
    )


def run(n_nodes: int, n_requests: int) -> dict[str, Any]:
    results: dict[str, Any] = {"nodes": n_nodes, "requests": n_requests}
    with tempfile.TemporaryDirectory() as tmp:
        path = state_file(Path(tmp), n_nodes, n_requests + 50)
        floor_script = Path(tmp) / "floor.py"
        floor_script.write_text(FLOOR_SERVER)
        names = [f"node-{n:04d}" for n in range(n_nodes)]
        pod = scheduler_pod("pod-0", "uid-pod-0", [{"name": "gpu", "resourceClaimName": "claim-0"}])
        names_body = args_names(pod, names)
        er_pod = scheduler_pod("er-pod-0", "uid-er-pod-0", [])
        er_pod["spec"]["containers"][0]["resources"] = {"requests": {EXTENDED: "1"}}
        er_body = args_names(er_pod, names)
        nodes_body = args_nodes(pod, [scheduler_node(n, {"zone": f"z{i % 3}"}) for i, n in enumerate(names)])
        start = time.perf_counter()
        with (
            process_server([sys.executable, str(floor_script)]) as floor_url,
            cli_server("--state", str(path)) as url,
        ):
            print(
                f"== {n_nodes} nodes x 8 GPUs (half allocated) + 2 NICs; "
                f"servers up in {time.perf_counter() - start:.1f} s"
            )
            with (
                httpx.Client(base_url=floor_url, timeout=30) as floor_client,
                httpx.Client(base_url=url, timeout=30) as http,
            ):
                floor_names = measure(lambda: floor_client.post("/empty", content=names_body), n_requests)
                floor_nodes = measure(lambda: floor_client.post("/empty", content=nodes_body), n_requests)
                floor_bind = measure(
                    lambda: floor_client.post("/empty", content=binding("p", "u", "n")), n_requests
                )
                filter_names = measure(lambda: http.post("/scheduler/filter", content=names_body), n_requests)
                filter_nodes = measure(
                    lambda: http.post("/scheduler/filter", content=nodes_body), max(n_requests // 4, 20)
                )
                prioritize = measure(
                    lambda: http.post("/scheduler/prioritize", content=names_body), n_requests
                )
                filter_extended = measure(lambda: http.post("/scheduler/filter", content=er_body), n_requests)
                # A different pod that fits no node every time: each one's make-room hint is
                # planned in the background (once per pod), so planning runs all along.
                nofit = iter(range(n_requests + 50))

                def filter_nofit() -> httpx.Response:
                    i = next(nofit)
                    claims = [{"name": "devices", "resourceClaimName": f"nofit-claim-{i}"}]
                    body = args_names(scheduler_pod(f"nofit-{i}", f"uid-nofit-{i}", claims), names)
                    resp = http.post("/scheduler/filter", content=body)
                    assert resp.json()["NodeNames"] == [], resp.text
                    return resp

                filter_no_fit = measure(filter_nofit, n_requests, warmup=20)
                er_counter = iter(range(1, n_requests + 40))

                def bind_extended() -> httpx.Response:
                    i = next(er_counter)
                    resp = http.post(
                        "/scheduler/bind",
                        content=binding(f"er-pod-{i}", f"uid-er-pod-{i}", names[(i + 7) % len(names)]),
                    )
                    assert resp.json() == {"Error": ""}, resp.text
                    return resp

                bind_er = measure(bind_extended, n_requests, warmup=5)
                counter = iter(range(1, n_requests + 40))

                def bind_next() -> httpx.Response:
                    i = next(counter)
                    resp = http.post(
                        "/scheduler/bind", content=binding(f"pod-{i}", f"uid-pod-{i}", names[i % len(names)])
                    )
                    assert resp.json() == {"Error": ""}, resp.text
                    return resp

                bind = measure(bind_next, n_requests, warmup=5)
                counter2 = iter(range(n_requests + 40, n_requests + 50))

                def bind_untimed() -> None:
                    # After a bind the snapshot changes: the first filter per change pays for it.
                    i = next(counter2)
                    bind_next_pod = binding(f"pod-{i}", f"uid-pod-{i}", names[i % len(names)])
                    assert http.post("/scheduler/bind", content=bind_next_pod).json() == {"Error": ""}

                churn = measure(
                    lambda: http.post("/scheduler/filter", content=names_body),
                    8,
                    warmup=0,
                    before=bind_untimed,
                )
    print(row("filter, NodeNames (500 names)", filter_names, floor_names))
    print(row("filter, full NodeList (500 nodes)", filter_nodes, floor_nodes))
    print(row("filter, example.com/gpu pod, NodeNames", filter_extended, floor_names))
    print(row("filter, a pod no node fits (new each call)", filter_no_fit, floor_names))
    print(row("prioritize, NodeNames", prioritize, floor_names))
    print(row("bind (embedded store)", bind, floor_bind))
    print(row("bind, example.com/gpu pod (creates claim)", bind_er, floor_bind))
    print(row("first filter after a bind", churn, floor_names))
    print("  targets: filter p50 <= 2 ms and p99 <= 10 ms (NodeNames); bind p50 <= 2 ms")
    results.update(
        {
            "floor_names": floor_names,
            "floor_nodelist": floor_nodes,
            "floor_bind": floor_bind,
            "filter_names": filter_names,
            "filter_nodelist": filter_nodes,
            "prioritize": prioritize,
            "filter_extended": filter_extended,
            "filter_no_fit": filter_no_fit,
            "bind_extended": bind_er,
            "bind": bind,
            "bind_then_filter": churn,
        }
    )
    return results


def hints_ab(n_nodes: int, n_requests: int, rounds: int = 6) -> dict[str, Any]:
    """Filter latency for pods no node fits, a new pod each call (each one's make-room hint is
    then planned in the background, so planning runs all along), with hints on and off: two
    servers of one state, measured in alternating rounds (which goes first alternates too), a
    second's pause after every round (the planning server finishes its queue meanwhile)."""
    per_round = max(n_requests // rounds, 10)
    with tempfile.TemporaryDirectory() as tmp:
        path = state_file(Path(tmp), n_nodes, rounds * per_round + 60)
        names = [f"node-{n:04d}" for n in range(n_nodes)]
        with (
            cli_server("--state", str(path)) as on_url,
            cli_server("--state", str(path), "--make-room-hint-interval", "0") as off_url,
            httpx.Client(base_url=on_url, timeout=30) as on,
            httpx.Client(base_url=off_url, timeout=30) as off,
        ):
            samples: dict[str, list[float]] = {"on": [], "off": []}
            served = {"on": on, "off": off}
            pods = {"on": iter(range(10_000)), "off": iter(range(10_000))}

            def call(which: str) -> float:
                i = next(pods[which])
                claims = [{"name": "devices", "resourceClaimName": f"nofit-claim-{i}"}]
                body = args_names(scheduler_pod(f"nofit-{i}", f"uid-nofit-{i}", claims), names)
                start = time.perf_counter()
                resp = served[which].post("/scheduler/filter", content=body)
                took = time.perf_counter() - start
                assert resp.status_code == 200 and resp.json()["NodeNames"] == [], resp.text
                return took

            for which in ("on", "off"):  # warm up both (the first plan builds the inventory)
                for _ in range(10):
                    call(which)
            time.sleep(2)
            for r in range(rounds):
                for which in ("on", "off") if r % 2 == 0 else ("off", "on"):
                    samples[which] += [call(which) for _ in range(per_round)]
                    time.sleep(1)  # after every round: the planning server finishes its queue
            hints = {
                line.split('outcome="')[1].split('"')[0]: float(line.split()[-1])
                for line in on.get("/metrics").text.splitlines()
                if line.startswith("dra_extender_make_room_hints_total{")
            }
    on_ms, off_ms = percentiles(samples["on"]), percentiles(samples["off"])
    print(f"== {n_nodes} nodes: filter for a pod no node fits, {rounds} alternating rounds of {per_round}")
    print(row("hints on (planned in the background)", on_ms, off_ms))
    print(f"  (the floor column: the same with hints off)  hint plans made: {hints}")
    return {"nodes": n_nodes, "on": on_ms, "off": off_ms, "hints": hints}


FLOOR_SERVER = """
import asyncio
import logging

from fastapi import FastAPI, Request
from fastapi.responses import Response

from extender.service.listeners import Limits, Listener, serve

app = FastAPI()


@app.post("/empty")
async def empty(request: Request) -> Response:
    await request.body()
    return Response(content=b'{"Error":""}', media_type="application/json")


logging.basicConfig(level=logging.INFO)
# The same listener setup as the extender's verbs (limits, no ops listener).
asyncio.run(serve(app, None, Listener("127.0.0.1", 0), None, Limits(), ""))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--json", help="write the numbers to this file")
    parser.add_argument("--hints-ab", action="store_true", help="filter with make-room hints on and off")
    args = parser.parse_args()
    results = hints_ab(args.nodes, args.requests) if args.hints_ab else run(args.nodes, args.requests)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
