"""Allocator benchmark: one pod on one node, a pod across 500 nodes x 8 GPUs (+ NICs), worst cases.

Run: ``python -m bench.allocator_bench`` (``--nodes``, ``--repeat``, ``--json FILE``).

The floor, measured in the same run, is a hand-written first fit over a set of free device
names per node (what an allocator without CEL, constraints or backtracking costs).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.model.core import Node, parse_pod
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from tests.builders import container, pod, resource_slice

GPU = "gpu.example.com"
#: The GPU class also backs this extended resource (a pod asking ``example.com/gpu: 1``).
EXTENDED = "example.com/gpu"
NIC = "nic.example.com"
MODELS = [("NVIDIA A100-SXM4-40GB", "40Gi"), ("NVIDIA H100 80GB HBM3", "80Gi")]


def cluster(nodes: int, gpus: int, used_fraction: float) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GPU},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}],
                "extendedResourceName": EXTENDED,
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": NIC},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{NIC}"'}}]},
        },
    ]
    used = int(gpus * used_fraction)
    for n in range(nodes):
        name = f"node-{n:04d}"
        model, memory = MODELS[n % 2]
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": f"z{n % 3}"}},
            }
        )
        devices = [
            {
                "name": f"gpu-{g}",
                "attributes": {
                    "productName": {"string": model},
                    "index": {"int": g},
                    "minor": {"int": g},
                    "uuid": {"string": f"GPU-{n:05d}-{g:02d}-7d70-1a51-e59b25b2c16c"},
                    "architecture": {"string": "Hopper" if "H100" in model else "Ampere"},
                    "brand": {"string": "Nvidia"},
                    "type": {"string": "gpu"},
                    "driverVersion": {"version": "550.54.15"},
                    "cudaDriverVersion": {"version": "12.4.0"},
                    "cudaComputeCapability": {"version": "9.0.0" if "H100" in model else "8.0.0"},
                    "numaNode": {"int": g // (gpus // 2 or 1)},
                    "migEnabled": {"bool": False},
                    "resource.kubernetes.io/pcieRoot": {"string": f"pci{g // 4:04d}:00"},
                },
                "capacity": {"memory": {"value": memory}},
            }
            for g in range(gpus)
        ]
        objects.append(resource_slice(f"{name}-gpu", devices, driver=GPU, pool=name, node=name))
        nics = [
            {
                "name": f"nic-{k}",
                "attributes": {"resource.kubernetes.io/pcieRoot": {"string": f"pci{k:04d}:00"}},
            }
            for k in range(2)
        ]
        objects.append(resource_slice(f"{name}-nic", nics, driver=NIC, pool=name, node=name))
        if used:
            objects.append(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaim",
                    "metadata": {"name": f"held-{name}", "namespace": "default", "uid": f"u-{name}"},
                    "spec": {
                        "devices": {
                            "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": used}}]
                        }
                    },
                    "status": {
                        "allocation": {
                            "devices": {
                                "results": [
                                    {"request": "gpu", "driver": GPU, "pool": name, "device": f"gpu-{g}"}
                                    for g in range(used)
                                ]
                            }
                        }
                    },
                }
            )
    return objects


MEMORY_AND_DRIVER = (
    f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0 && '
    f'device.attributes["{GPU}"].driverVersion.isGreaterThan(semver("535.0.0"))'
)
POD_CLAIMS: dict[str, dict[str, Any]] = {
    "1 GPU (a claim, no selector)": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]},
    "1 GPU + CEL selector": {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": GPU,
                    "count": 1,
                    "selectors": [{"cel": {"expression": MEMORY_AND_DRIVER}}],
                },
            }
        ]
    },
    "GPU + NIC, matchAttribute pcieRoot": {
        "requests": [
            {"name": "gpu", "exactly": {"deviceClassName": GPU}},
            {"name": "nic", "exactly": {"deviceClassName": NIC}},
        ],
        "constraints": [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    },
    "4 GPUs, matchAttribute numaNode": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 4}}],
        "constraints": [{"matchAttribute": f"{GPU}/numaNode"}],
    },
}
UNSATISFIABLE: dict[str, dict[str, Any]] = {
    "9 GPUs on 8-GPU nodes": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 9}}]},
    "5 GPUs on one numa node (4 per node)": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 5}}],
        "constraints": [{"matchAttribute": f"{GPU}/numaNode"}],
    },
}


def claim_object(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": spec},
    }


def pod_object(name: str, claim: str, *, uid: str | None = None) -> dict[str, Any]:
    """A pending pod of the extender's scheduler that uses the claim ``claim`` (as ``devices``)."""
    metadata = {"name": name, "namespace": "default"} | ({"uid": uid} if uid else {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "containers": [{"name": "main", "image": "x"}],
            "schedulerName": "dra-extender-scheduler",
            "resourceClaims": [{"name": "devices", "resourceClaimName": claim}],
        },
    }


def snapshot_with(
    objects: list[dict[str, Any]], claims: dict[str, dict[str, Any]]
) -> tuple[Snapshot, ClusterState]:
    state = ClusterState.from_objects(
        [*objects, *(claim_object(f"c{i}", spec) for i, spec in enumerate(claims.values()))]
    )
    return Snapshot(state, Features(), CelEnvironment()), state


def floor_first_fit(free: dict[str, list[str]], nodes: list[Node]) -> int:
    return sum(1 for n in nodes if free[n.name])


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float, Any]:
    samples = []
    result = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), max(samples), result


def ms(s: float) -> str:
    return f"{s * 1e3:8.2f} ms"


def bench_claim(
    snapshot: Snapshot, pod_claims: PodClaims, all_nodes: list[Node], repeat: int, budget: float
) -> dict[str, Any]:
    one_node = all_nodes[0]
    snapshot.decide(pod_claims, one_node, timeout=budget)  # warm the CEL memo and the pool cache
    one, _, _ = timed(functools.partial(snapshot.decide, pod_claims, one_node, timeout=budget), repeat * 20)

    def sweep() -> int:
        return sum(snapshot.decide(pod_claims, n, timeout=budget).fits for n in all_nodes)

    cold_start = time.perf_counter()
    sweep()
    cold = time.perf_counter() - cold_start
    p50, worst, fits = timed(sweep, repeat)
    return {
        "one_node_s": one,
        "all_nodes_first_s": cold,
        "all_nodes_p50_s": p50,
        "all_nodes_max_s": worst,
        "fits": fits,
    }


def run(nodes: int, gpus: int, repeat: int, budget: float) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": nodes, "gpus_per_node": gpus}
    for used in (0.0, 0.5):
        label = f"{int(used * 100)}% of GPUs allocated"
        print(f"== {nodes} nodes x {gpus} GPUs + 2 NICs, {label}")
        objects = cluster(nodes, gpus, used)
        start = time.perf_counter()
        snapshot, state = snapshot_with(objects, {**POD_CLAIMS, **UNSATISFIABLE})
        all_nodes = sorted(state.nodes.values(), key=lambda n: n.name)
        print(f"  build snapshot ({len(objects)} objects): {ms(time.perf_counter() - start)}")
        free = {n.name: [f"gpu-{g}" for g in range(int(gpus * used), gpus)] for n in all_nodes}
        floor, _, _ = timed(functools.partial(floor_first_fit, free, all_nodes), repeat)
        print(f"  floor: hand-written first fit over {nodes} nodes: {ms(floor)}")
        section: dict[str, Any] = {"floor_s": floor}
        for i, name in enumerate([*POD_CLAIMS, *UNSATISFIABLE]):
            pod_claims = PodClaims(to_allocate=[state.claims[("default", f"c{i}")]])
            r = section[name] = bench_claim(snapshot, pod_claims, all_nodes, repeat, budget)
            print(
                f"  {name:38s} one node {ms(r['one_node_s'])}   {nodes} nodes: "
                f"first {ms(r['all_nodes_first_s'])}, median {ms(r['all_nodes_p50_s'])}, "
                f"max {ms(r['all_nodes_max_s'])}  ({r['fits']} fit)"
            )
        # The same GPU asked as an extended resource: PreFilter synthesizes the claim.
        extended_pod = parse_pod(pod("legacy", containers=[container("main", {EXTENDED: 1})]))
        pod_claims = snapshot.claims_of(extended_pod)
        name = f"1 GPU as {EXTENDED}: 1"
        r = section[name] = bench_claim(snapshot, pod_claims, all_nodes, repeat, budget)
        print(
            f"  {name:38s} one node {ms(r['one_node_s'])}   {nodes} nodes: "
            f"first {ms(r['all_nodes_first_s'])}, median {ms(r['all_nodes_p50_s'])}, "
            f"max {ms(r['all_nodes_max_s'])}  ({r['fits']} fit)"
        )
        out[label] = section
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.0, help="allocation time budget per node (s)")
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    result = run(args.nodes, args.gpus, args.repeat, args.budget)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
