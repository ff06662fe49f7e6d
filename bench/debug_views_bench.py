"""What the debug views on the ops port cost at scale: the capacity page, /debug/capacity and
/debug/snapshot, and the longest the engine's loop is held meanwhile (what a filter arriving
then would wait).

Run: ``python -m bench.debug_views_bench`` (``--nodes``, ``--repeat``): the allocator bench's
cluster (8 GPUs of two products and 2 NICs per node, 30% of the GPUs allocated), served in
process from a state file as ``serve --state`` loads it (the loaded heap frozen), each view
asked through the ops app with ``--ops-debug``. A ticker on the engine's loop records the
longest gap between its turns: the views' own slices, the garbage collector's passes (run with
``gc.set_threshold(10**9)`` to tell them apart) and, for the snapshot, this in-process client
reading its 28 MB on the same loop.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import orjson

from bench.allocator_bench import cluster
from extender.serve_command import paused_collector
from extender.service.app import create_ops_app
from extender.service.runtime import ServeConfig, build_embedded

VIEWS = (
    "/debug/capacity",
    "/debug/ui",
    "/debug/ui?page=2",
    "/debug/ui?class=gpu.example.com",
    "/debug/snapshot",
)


async def measure(client: httpx.AsyncClient, path: str, repeat: int) -> tuple[list[float], float, int]:
    """(seconds per request, the longest gap of the loop's turns, bytes of the answer)."""
    held = 0.0
    running = True

    async def ticker() -> None:
        nonlocal held
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0)
            now = time.perf_counter()
            held = max(held, now - last)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker starts counting before the first request
    times = []
    size = 0
    for _ in range(repeat):
        start = time.perf_counter()
        answer = await client.get(path)
        times.append(time.perf_counter() - start)
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:200])
        size = len(answer.content)
    running = False
    await tick
    return times, held, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for nodes in args.nodes:
        with tempfile.TemporaryDirectory() as folder:
            state = Path(folder) / "state.json"
            objects = cluster(nodes, 8, 0.3)
            state.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
            service, _store = build_embedded(
                [str(state)], ServeConfig(max_state_bytes=1 << 31), loading=paused_collector
            )
        app = create_ops_app(service, debug_views=True)

        async def run(nodes: int = nodes, app: object = app) -> None:
            transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
            async with httpx.AsyncClient(transport=transport, base_url="http://ops", timeout=300) as client:
                first, _, _ = await measure(client, "/debug/capacity", 1)  # CEL results not cached yet
                print(f"{nodes} nodes x 8 GPUs: first /debug/capacity {first[0] * 1e3:.0f} ms")
                for path in VIEWS:
                    times, held, size = await measure(client, path, args.repeat)
                    print(
                        f"  {path:34s} median {statistics.median(times) * 1e3:6.0f} ms, "
                        f"{size / 1e6:6.2f} MB, engine loop held at most {held * 1e3:5.1f} ms"
                    )

        try:
            asyncio.run(run())
        finally:
            service.worker.stop()


if __name__ == "__main__":
    main()
