"""ResourceSlice update benchmark: how long one slice change keeps decisions waiting.

Run: ``python -m bench.slice_bench`` (``--nodes``, ``--gpus``, ``--big``, ``--repeat``, ``--json FILE``).

The cluster: ``--nodes`` nodes with ``--gpus`` GPUs each (one node-local slice per node, as in
bench/allocator_bench.py) plus one node, ``big-0``, with one ``--big``-device slice of another
driver (its own pool). Each case times, per update, from "the updated slice (already
JSON-decoded) is handed to ClusterState.apply" to "the next Engine.snapshot() is ready and a
filter for one pod over every node has answered":

* (a) one device of the big slice has one attribute changed;
* (b) the big slice comes again with only its resourceVersion changed;
* (c) one small node-local GPU slice has one attribute changed.

Each line also splits the time into apply (parse), snapshot (inventory) and filter (the nodes
that can see the changed pool are judged again: ``big-0`` in (a), one GPU node in (c)). Each
GPU node also has its 2-NIC slice, as in bench/allocator_bench.py; the pod asks for one GPU (its
class selects by driver). Budgets are set out of the way, so every node is judged for real.

Floors, measured in the same run: iterating the big slice's raw devices once, comparing them to
the previous version's (``==``), and ``orjson.dumps`` of the big slice; and the filter alone when
nothing changed. Every update is a fresh JSON-decoded object, prepared before the clock starts.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import orjson

from bench.allocator_bench import GPU, cluster
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from tests.builders import pod

BIG_DRIVER = "vf.example.com"
BIG_NODE = "big-0"


def big_slice(devices: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{BIG_NODE}-vf", "resourceVersion": "1"},
        "spec": {
            "driver": BIG_DRIVER,
            "pool": {"name": BIG_NODE, "generation": 1, "resourceSliceCount": 1},
            "nodeName": BIG_NODE,
            "devices": [
                {
                    "name": f"vf-{i}",
                    "attributes": {
                        "pf": {"string": f"pf-{i // 256}"},
                        "index": {"int": i},
                        "vlan": {"int": i % 4096},
                        "mac": {"string": f"02:00:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}:00"},
                        "linkSpeed": {"string": "100G"},
                        "numaNode": {"int": i % 2},
                        "rdma": {"bool": True},
                        "firmware": {"version": "1.2.3"},
                        "resource.kubernetes.io/pcieRoot": {"string": f"pci{i // 4096:04d}:00"},
                    },
                    "capacity": {"bandwidth": {"value": "10G"}},
                }
                for i in range(devices)
            ],
        },
    }


def objects_for(nodes: int, gpus: int, big: int) -> list[dict[str, Any]]:
    objects = cluster(nodes, gpus, 0.0)
    objects.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": BIG_NODE, "labels": {}}})
    objects.append(big_slice(big))
    objects.append(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "one-gpu", "namespace": "default", "uid": "uid-one-gpu"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}},
        }
    )
    objects.append(pod("bench", ["one-gpu"]))
    return objects


def fresh(obj: dict[str, Any], resource_version: int) -> dict[str, Any]:
    """A new decoded copy (as an informer hands it over), with a new resourceVersion."""
    out: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    out["metadata"]["resourceVersion"] = str(resource_version)
    return out


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e3, 2)


def run(nodes: int, gpus: int, big: int, repeat: int) -> dict[str, Any]:
    build_start = time.perf_counter()
    objects = objects_for(nodes, gpus, big)
    state = ClusterState.from_objects(objects)
    # Budgets out of the way: every node is judged for real, none answered "timed out".
    config = EngineConfig(node_timeout=600.0, filter_budget=600.0)
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), config)
    the_pod = state.pods[("default", "bench")]
    names = sorted(state.nodes)

    def decide() -> int:
        result = engine.filter(the_pod, names)
        assert not result.error, result.error
        return len(result.passed)

    fits = decide()  # the first snapshot and filter: indexes everything, fills the memo
    built = time.perf_counter() - build_start
    print(
        f"== {nodes} nodes x {gpus} GPUs + {BIG_NODE} with a {big}-device slice: "
        f"{len(names)} nodes, {fits} fit; built and first filter in {built:.2f} s"
    )
    big_raw = next(o for o in objects if o["metadata"]["name"] == f"{BIG_NODE}-vf")
    small_raw = next(o for o in objects if o["metadata"]["name"] == "node-0007-gpu")
    rv = 100

    def updates(base: dict[str, Any], change: Callable[[dict[str, Any], int], None]) -> list[dict[str, Any]]:
        nonlocal rv
        out = []
        for i in range(repeat):
            rv += 1
            obj = fresh(base, rv)
            change(obj, i)
            out.append(obj)
        return out

    def one_attribute(obj: dict[str, Any], i: int) -> None:
        devices = obj["spec"]["devices"]
        devices[len(devices) // 2]["attributes"]["firmware"] = {"version": f"2.0.{i}"}

    def nothing(obj: dict[str, Any], i: int) -> None:
        pass

    def gpu_attribute(obj: dict[str, Any], i: int) -> None:
        obj["spec"]["devices"][3]["attributes"]["driverVersion"] = {"version": f"560.0.{i}"}

    cases: dict[str, tuple[dict[str, Any], Callable[[dict[str, Any], int], None]]] = {
        "(a) big slice, one device's attribute changed": (big_raw, one_attribute),
        "(b) big slice, only resourceVersion changed": (big_raw, nothing),
        "(c) small node-local slice, one attribute changed": (small_raw, gpu_attribute),
    }
    result: dict[str, Any] = {"nodes": len(names), "gpus_per_node": gpus, "big_slice_devices": big}
    for label, (base, change) in cases.items():
        samples: dict[str, list[float]] = {"total": [], "apply": [], "snapshot": [], "filter": []}
        for obj in updates(base, change):
            gc.collect()
            start = time.perf_counter()
            state.apply(obj)
            applied = time.perf_counter()
            engine.snapshot()
            snapshotted = time.perf_counter()
            passed = decide()
            end = time.perf_counter()
            assert passed == fits, (passed, fits)
            for part, took in (
                ("total", end - start),
                ("apply", applied - start),
                ("snapshot", snapshotted - applied),
                ("filter", end - snapshotted),
            ):
                samples[part].append(took)
        result[label] = {f"{part}_median_ms": median_ms(s) for part, s in samples.items()}
        result[label]["total_max_ms"] = round(max(samples["total"]) * 1e3, 2)
        parts = ", ".join(f"{p} {median_ms(samples[p]):.2f}" for p in ("apply", "snapshot", "filter"))
        print(
            f"  {label:52s} median {median_ms(samples['total']):9.2f} ms "
            f"(max {max(samples['total']) * 1e3:.2f}; {parts})"
        )

    # Floors, in the same run.
    previous, current = fresh(big_raw, 1), fresh(big_raw, 2)
    floors: dict[str, Callable[[], Any]] = {
        "iterate the big slice's raw devices once": lambda: sum(1 for _ in current["spec"]["devices"]),
        "compare them to the previous version's (==)": lambda: (
            previous["spec"]["devices"] == current["spec"]["devices"]
        ),
        "orjson.dumps of the big slice": lambda: orjson.dumps(current),
        "filter alone, nothing changed": decide,
    }
    for label, fn in floors.items():
        floor_samples: list[float] = []
        for _ in range(repeat):
            gc.collect()
            start = time.perf_counter()
            fn()
            floor_samples.append(time.perf_counter() - start)
        result[f"floor: {label}"] = {"median_ms": median_ms(floor_samples)}
        print(f"  floor: {label:45s} median {median_ms(floor_samples):9.2f} ms")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--big", type=int, default=100_000, help="devices in the big slice")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    result = run(args.nodes, args.gpus, args.big, args.repeat)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
