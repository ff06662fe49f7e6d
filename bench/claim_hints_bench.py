"""Claim hints' cost on filter (issue 53): what adding the hint line costs a pod that fits nowhere.

Run: ``python -m bench.claim_hints_bench`` (``--nodes``, ``--repeat``, ``--json FILE``).

In process, on the allocator benchmark's cluster (N nodes x 8 GPUs, half in use), filter over
every node for three pods that fit nowhere: a selector on an attribute the driver does not
publish (``serial``, behind ``has()``: every node judged, no CEL error), a count larger than any
node offers (9 GPUs), and one that fits on no node *now* (all 8 GPUs of a node, none free: no
hint, the check still runs). Each is measured with the engine's claim hints and, as the peer in
the same run, with them off (alternating rounds); plus the cold cost: the first hint after the
inventory changed (the published index built again over every device), medians of 5.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from bench.allocator_bench import GPU, claim_object, cluster, pod_object
from extender.model.core import Pod
from extender.scheduling.decide.claim_hints import ClaimHints
from extender.scheduling.decide.published import Published
from extender.scheduling.engine import Engine
from extender.service.runtime import ServeConfig, build_embedded

PODS: dict[str, dict[str, Any]] = {
    "unpublished attribute": {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": GPU,
                    "selectors": [
                        {
                            "cel": {
                                "expression": f'has(device.attributes["{GPU}"].serial) && '
                                f'device.attributes["{GPU}"].serial == "x"'
                            }
                        }
                    ],
                },
            }
        ]
    },
    "count no node offers": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 9}}]},
    "fits nowhere now (no hint)": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 8}}]
    },
}


class Off(ClaimHints):
    """The peer: no hints."""

    def lines(self, *_: Any) -> list[str]:
        return []


def engine_on(nodes: int, folder: Path) -> Engine:
    """The embedded service's engine on the cluster and the three pods, from a state file."""
    objects = cluster(nodes, 8, 0.5)
    for i, spec in enumerate(PODS.values()):
        objects += [claim_object(f"c{i}", spec), pod_object(f"p{i}", f"c{i}")]
    (folder / "state.json").write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    service, _ = build_embedded([str(folder)], ServeConfig(max_state_bytes=1 << 30))
    return service.engine


def timed(engine: Engine, pod: Pod, names: list[str], n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        result = engine.filter(pod, names)
        samples.append(time.perf_counter() - start)
        assert not result.passed
    return samples


def run(nodes: int, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="claim-hints-bench-") as folder:
        engine = engine_on(nodes, Path(folder))
    names = sorted(engine.state.nodes)
    on, off = engine.claim_hints, Off()
    out: dict[str, Any] = {"nodes": nodes, "pods": {}}
    for i, label in enumerate(PODS):
        pod = engine.state.pods[("default", f"p{i}")]
        engine.filter(pod, names)  # warm: answers memoized alike for both
        with_hints: list[float] = []
        without: list[float] = []
        for _ in range(6):
            engine.claim_hints = on
            with_hints += timed(engine, pod, names, repeat)
            engine.claim_hints = off
            without += timed(engine, pod, names, repeat)
        engine.claim_hints = on
        reason = next(iter(engine.filter(pod, names).unresolvable.values()), "")
        out["pods"][label] = {
            "with_hints_p50_ms": statistics.median(with_hints) * 1e3,
            "without_p50_ms": statistics.median(without) * 1e3,
            "hinted": "; hint: " in reason,
        }
    snapshot = engine.snapshot()
    claims = [engine.state.claims[("default", f"c{i}")] for i in range(len(PODS))]
    builds, colds = [], []
    for _ in range(5):  # medians: a build may meet a full collection of the whole heap
        start = time.perf_counter()
        Published(snapshot.state, snapshot.cel)
        builds.append(time.perf_counter() - start)
        start = time.perf_counter()
        ClaimHints().lines(snapshot.state, snapshot.cel, claims)
        colds.append(time.perf_counter() - start)
    out["published_index_ms"] = statistics.median(builds) * 1e3
    out["cold_hints_ms"] = statistics.median(colds) * 1e3
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results = [run(n, args.repeat) for n in args.nodes]
    for r in results:
        print(
            f"{r['nodes']} nodes x 8 GPUs: published index {r['published_index_ms']:.1f} ms, "
            f"cold hints for 3 claims {r['cold_hints_ms']:.1f} ms"
        )
        for label, p in r["pods"].items():
            print(
                f"  {label:28} filter p50 {p['with_hints_p50_ms']:7.2f} ms with hints, "
                f"{p['without_p50_ms']:7.2f} ms without ({'hinted' if p['hinted'] else 'no hint'})"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
