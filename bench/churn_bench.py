"""Memory over pod churn: RSS across create / filter / prioritize / bind / delete cycles.

Each cycle creates a claim and a pod in the embedded store, runs the engine's filter over all
nodes, prioritize over the feasible ones and bind on the best, then ends the pod created
``window`` cycles before as the cluster would: the pod is deleted, the claim's reservation,
allocation and finalizer are removed (the resourceclaim controller's part), and the claim is
deleted. The window keeps the cluster 7/8 full, so most nodes do not fit and filter's answers
for them (which name the pod's claim) are remembered too. Nothing the extender keeps per pod
or per claim may outlive them: after a warm-up, RSS must stay flat (the throughput issue's
target: <= 5 MB over 10,000 cycles).

Run: ``python -m bench.churn_bench`` (``--cycles``, ``--warmup``, ``--nodes``, ``--json FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.allocator_bench import GPU, claim_object, cluster, pod_object
from bench.scheduling_bench import GPUS_PER_NODE
from extender.cluster.memstore import MemoryStore
from extender.cluster.owner_gc import release_and_delete
from extender.scheduling.engine import Engine
from extender.service.runtime import ServeConfig, build_embedded

SPEC = {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}


def end_pod(store: MemoryStore, i: int) -> None:
    """Delete the pod, then do the resourceclaim controller's part and delete the claim."""
    uid = store.get("Pod", "default", f"p-{i}")["metadata"]["uid"]
    store.delete("Pod", "default", f"p-{i}")
    release_and_delete(store, "default", f"c-{i}", uid)


async def cycle(engine: Engine, store: MemoryStore, i: int, names: list[str], window: int) -> str:
    store.create(claim_object(f"c-{i}", SPEC))
    created = store.create(pod_object(f"p-{i}", f"c-{i}"))
    pod = engine.state.pods[("default", f"p-{i}")]
    passed = engine.filter(pod, names).passed
    error = "unschedulable"
    if passed:
        best = max(engine.prioritize(pod, passed), key=lambda s: s[1])[0]
        error = await engine.bind("default", f"p-{i}", created["metadata"]["uid"], best)
    if i >= window:
        end_pod(store, i - window)
    return error


def rss_mb() -> float:
    gc.collect()
    return float(psutil.Process().memory_info().rss) / 2**20


async def run(nodes: int, cycles: int, warmup: int) -> dict[str, Any]:
    logging.disable(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.json"
        objects = cluster(nodes, GPUS_PER_NODE, 0.0)
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
        service, store = build_embedded([str(path)], ServeConfig())
    engine = service.engine
    names = sorted(engine.state.nodes)
    window = nodes * GPUS_PER_NODE * 7 // 8
    errors: list[str] = []
    for i in range(warmup):
        if error := await cycle(engine, store, i, names, window):
            errors.append(error)
    before = rss_mb()
    start = time.perf_counter()
    samples = []
    for i in range(warmup, warmup + cycles):
        if error := await cycle(engine, store, i, names, window):
            errors.append(error)
        if (i - warmup + 1) % max(cycles // 10, 1) == 0:
            samples.append(round(rss_mb() - before, 2))
    elapsed = time.perf_counter() - start
    after = rss_mb()
    result = {
        "nodes": nodes,
        "warmup_cycles": warmup,
        "cycles": cycles,
        "cycles_per_s": round(cycles / elapsed, 1),
        "rss_after_warmup_mb": round(before, 1),
        "rss_growth_mb": round(after - before, 2),
        "rss_growth_by_tenth_mb": samples,
        "errors": len(errors),
        "first_errors": errors[:3],
        "claims_left": len(engine.state.claims),
        "assumed_left": len(engine.tracker.assumed),
    }
    print(json.dumps(result, indent=2))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    result = asyncio.run(run(args.nodes, args.cycles, args.warmup))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
