"""Initial sync benchmark: 10,000 ResourceSlices (8 devices each) listed from the fake API server.

Run: ``python -m bench.sync_bench`` (``--slices``, ``--json FILE``).

Reports the time from start until the cache holds every slice and the inventory is indexed, the
LIST body size, and the memory the cache keeps (tracemalloc, and the process RSS growth). The
floor, measured in the same run, is the same LIST fetched and decoded with orjson only.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
from kubernetes import client as k8s

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.kube import RawKube
from extender.cluster.reflector import Reflector
from extender.cluster.state import ClusterState
from extender.scheduling.decide.snapshot import Snapshot
from tests.fakeapi.server import FakeApiServer


def slice_object(i: int, devices: int) -> dict[str, Any]:
    node = f"node-{i:05d}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu", "uid": f"uid-{i}", "resourceVersion": "1"},
        "spec": {
            "driver": "gpu.example.com",
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "nodeName": node,
            "devices": [
                {
                    "name": f"gpu-{g}",
                    "attributes": {
                        "productName": {"string": "NVIDIA A100-SXM4-40GB"},
                        "index": {"int": g},
                        "minor": {"int": g},
                        "uuid": {"string": f"GPU-{i:05d}{g:02d}-06c0-7d70-1a51-e59b25b2c16c"},
                        "architecture": {"string": "Ampere"},
                        "brand": {"string": "Nvidia"},
                        "type": {"string": "gpu"},
                        "driverVersion": {"version": "550.54.15"},
                        "cudaDriverVersion": {"version": "12.4.0"},
                        "cudaComputeCapability": {"version": "8.0.0"},
                        "numaNode": {"int": g // 4},
                        "migEnabled": {"bool": False},
                        "resource.kubernetes.io/pcieRoot": {"string": f"pci{g // 4:04d}:00"},
                    },
                    "capacity": {"memory": {"value": "40Gi"}},
                }
                for g in range(devices)
            ],
        },
    }


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(n_slices: int, devices: int) -> dict[str, Any]:
    with FakeApiServer() as fake:
        store = fake.store
        for i in range(n_slices):
            obj = slice_object(i, devices)
            store.objects[("resourceslices", "", obj["metadata"]["name"])] = obj
        store.rv += 1
        raw = RawKube(k8s.ApiClient(k8s.Configuration(host=fake.url)), timeout=120)
        path = "/apis/resource.k8s.io/v1/resourceslices"

        start = time.perf_counter()
        body = raw.request("GET", path, stream=True).data
        fetched = time.perf_counter() - start
        decoded = orjson.loads(body)
        floor = time.perf_counter() - start
        size_mb = len(body) / 1e6
        del decoded, body
        gc.collect()

        state = ClusterState()
        stop = threading.Event()
        synced = threading.Event()

        def sink(etype: str, obj: dict[str, Any] | None, items: list[dict[str, Any]] | None) -> None:
            if etype == "SYNCED":
                state.replace_kind("ResourceSlice", items or [])
                synced.set()

        rss_before = rss_mb()
        start = time.perf_counter()
        reflector = Reflector(raw, path, "ResourceSlice", sink, stop, api_version="resource.k8s.io/v1")
        reflector.start()
        synced.wait(600)
        cached = time.perf_counter() - start
        snapshot = Snapshot(state, Features(), CelEnvironment())
        snapshot.inventory.pools_for("node-00000", {})
        indexed = time.perf_counter() - start
        stop.set()
        kept_objects = len(state.slices)
        rss_growth = rss_mb() - rss_before
        # Memory kept by the cache, measured apart (tracing slows allocation several times over).
        items = list(orjson.loads(raw.request("GET", path, stream=True).data)["items"])
        gc.collect()
        tracemalloc.start()
        measured = ClusterState()
        measured.replace_kind("ResourceSlice", items)
        del items
        gc.collect()
        current, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    result = {
        "slices": n_slices,
        "devices": n_slices * devices,
        "list_mb": round(size_mb, 1),
        "floor_fetch_s": round(fetched, 3),
        "floor_fetch_and_decode_s": round(floor, 3),
        "cache_synced_s": round(cached, 3),
        "ready_with_inventory_s": round(indexed, 3),
        "cache_memory_mb": round(current / 1e6, 1),
        "rss_growth_mb": round(rss_growth, 1),
        "cached_slices": kept_objects,
    }
    print(json.dumps(result, indent=2))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--slices", type=int, default=10_000)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    result = run(args.slices, args.devices)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
