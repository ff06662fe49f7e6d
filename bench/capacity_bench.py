"""What a capacity computation costs the engine's loop (the gauges and /debug/capacity).

Run: ``python -m bench.capacity_bench`` (``--nodes``, ``--repeat``): the allocator bench's
cluster (8 GPUs of two products and 2 NICs per node, half the GPUs allocated), the first
computation (CEL results not yet cached) and the median of the next ones.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.allocator_bench import cluster
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.decide.capacity import capacity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    for nodes in args.nodes:
        state = ClusterState.from_objects(cluster(nodes, 8, 0.5))
        snapshot = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment()).snapshot()
        times = []
        for _ in range(args.repeat + 1):
            start = time.perf_counter()
            found = capacity(snapshot)
            times.append(time.perf_counter() - start)
        fits = {c: found.pods_that_fit(c, 4) for c in sorted(found.free_by_class)}
        print(
            f"{nodes:5d} nodes: first {times[0] * 1e3:7.1f} ms, then median "
            f"{statistics.median(times[1:]) * 1e3:7.1f} ms; pods of 4 that fit {fits}"
        )


if __name__ == "__main__":
    main()
