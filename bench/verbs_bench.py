"""In-process verbs benchmark: CPU per filter and prioritize request, as kube-scheduler sends them.

Run: ``python -m bench.verbs_bench`` (``--nodes``, ``--pods``, ``--rounds``, ``--json FILE``).

For each pod, one scheduling attempt: a filter, then a prioritize with the same body (the same
Pod bytes; issue 54), then ``--retries`` more attempts of the unchanged pod. Requests go
straight to :class:`~extender.service.app.Verbs` (no HTTP, no sockets), so the figures are the
extender's own CPU per request. Two settings: the pod with ``--nodes`` node names, and with
none (what every request pays whatever the cluster: decoding, the pod, the answer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.service_bench import state_file
from extender.service.app import Verbs, create_app
from extender.service.runtime import ServeConfig, build_embedded
from tests.service.fixtures import args_names, scheduler_pod


def bodies(pods: int, names: list[str]) -> list[bytes]:
    return [
        args_names(
            scheduler_pod(f"pod-{i}", f"uid-pod-{i}", [{"name": "gpu", "resourceClaimName": f"claim-{i}"}]),
            names,
        )
        for i in range(pods)
    ]


async def attempts(verbs: Verbs, requests: list[bytes], retries: int) -> tuple[float, int]:
    """CPU seconds of this thread (the verbs' and the engine's; not the background hint
    planner's) for every body's attempts, and the number of requests."""
    n = 0
    start = time.thread_time()
    for body in requests:
        for _ in range(1 + retries):
            for verb in ("filter", "prioritize"):
                status, answer = await verbs.handle(verb, body, None)
                assert status == 200, answer
                n += 1
    return time.thread_time() - start, n


def run(n_nodes: int, n_pods: int, rounds: int, retries: int) -> dict[str, Any]:
    results: dict[str, Any] = {"nodes": n_nodes, "pods": n_pods, "retries": retries}
    with tempfile.TemporaryDirectory() as tmp:
        path = state_file(Path(tmp), n_nodes, n_pods)
        service, _store = build_embedded([str(path)], ServeConfig())
        verbs: Verbs = create_app(service).state.verbs
        # No bind follows here: each filter would wait (wall time, not CPU) for the bind
        # kube-scheduler is expected to send for the pod before it.
        service.engine.tracker.expected.wait_seconds = 0.0
        names = [f"node-{n:04d}" for n in range(n_nodes)]
        settings = {f"{n_nodes} node names": bodies(n_pods, names), "no node names": bodies(n_pods, [])}

        async def main() -> None:
            service.worker.attach(asyncio.get_running_loop())
            for label, requests in settings.items():
                await attempts(verbs, requests[:20], retries)  # warm up
                per_request = []
                for _ in range(rounds):
                    cpu, n = await attempts(verbs, requests, retries)
                    per_request.append(cpu / n * 1e6)
                best = min(per_request)
                each = ", ".join(f"{x:.1f}" for x in per_request)
                print(f"  {label:20s} CPU per request: best {best:7.1f} us  (rounds: {each})")
                results[label] = {"best_us": best, "rounds_us": per_request}

        try:
            print(f"== {n_nodes} nodes, {n_pods} pods, filter + prioritize x {1 + retries} attempts each")
            asyncio.run(main())
        finally:
            service.worker.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--retries", type=int, default=0, help="attempts more of each unchanged pod")
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    results = run(args.nodes, args.pods, args.rounds, args.retries)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
