"""What DRANodeAllocatableResources costs a filter: the answers then depend on each node's pods
(their requests and recorded claim statuses), so nodes are judged one by one, never shared or
memoized.

Run: ``python -m bench.node_allocatable_bench`` (``--nodes``, ``--pods-per-node``,
``--repeat``, ``--kubernetes-version 1.36|1.37``): N nodes with 4 CPU-backing devices each and
that many bound pods per node; one filter for a pod whose claim takes one such device, over all
nodes, with the gate on (1.36's API, or 1.37's: a mapping plus a per-pod memory overhead) and,
as the floor measured in the same run, the same cluster and pod with the gate off (devices
without node resources to count). Prints each one's first filter (nothing memoized yet) and the
median of the next ones (gate off: memoized answers; gate on: never memoized).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from extender.allocator import Features
from extender.allocator.releases import release_of
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.model.core import parse_pod
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from tests.builders import (
    claim,
    container,
    device,
    device_class,
    exact,
    node,
    pod,
    resource_slice,
    with_allocatable,
)

#: The device field each release reads, with what one device stands for.
BACKING: dict[int, tuple[str, dict[str, Any]]] = {
    36: ("nodeAllocatableResourceMappings", {"cpu": {"allocationMultiplier": "2"}}),
    37: (
        "nodeAllocatableResources",
        {"cpu": {"mapping": {"deviceMultiplier": "2"}}, "memory": {"overhead": {"perPod": "64Mi"}}},
    ),
}


def objects(nodes: int, pods_per_node: int, minor: int = 36) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [device_class(), claim("mine", requests=[exact("cpus")])]
    field_name, mapping = BACKING[minor]
    for n in range(nodes):
        name = f"node-{n}"
        out.append(with_allocatable(node(name), {"cpu": "64", "memory": "256Gi", "pods": 110}))
        devices = [device(f"cpus-{i}", **{field_name: mapping}) for i in range(4)]
        out.append(resource_slice(f"s-{n}", devices, pool=name, node=name))
        for p in range(pods_per_node):
            out.append(
                pod(
                    f"p-{n}-{p}",
                    node_name=name,
                    containers=[container("c", {"cpu": "500m", "memory": "1Gi"})],
                )
            )
    for i, obj in enumerate(out):  # as an API server's objects come (the request cache keys on it)
        obj["metadata"]["resourceVersion"] = str(i + 1)
    me = pod("me", ["mine"], containers=[container("c1", {"cpu": "1"})])
    me["spec"]["containers"][0]["resources"]["claims"] = [{"name": "mine"}]
    out.append(me)
    return out


def filters(state: ClusterState, gate: bool, repeat: int, minor: int = 36) -> tuple[float, float]:
    release = release_of(minor)
    features = Features.from_gates({"DRANodeAllocatableResources": gate}, release)
    engine = assemble(
        state, MemoryAPI(MemoryStore()), CelEnvironment(), EngineConfig(features=features, release=release)
    )
    me = parse_pod(state.pods[("default", "me")].raw)
    names = sorted(state.nodes)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = engine.filter(me, names)
        times.append(time.perf_counter() - start)
        assert len(result.passed) == len(names), result
    return times[0], statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--kubernetes-version", choices=["1.36", "1.37"], default="1.36")
    args = parser.parse_args()
    minor = int(args.kubernetes_version.split(".")[1])
    for nodes in args.nodes:
        state = ClusterState.from_objects(objects(nodes, args.pods_per_node, minor))
        off_first, off = filters(state, False, args.repeat, minor)
        on_first, on = filters(state, True, args.repeat, minor)
        print(
            f"{args.kubernetes_version} {nodes:5d} nodes x {args.pods_per_node} pods: "
            f"gate on first {on_first * 1e3:7.1f} ms, then "
            f"{on * 1e3:7.1f} ms; gate off first {off_first * 1e3:7.1f} ms, then {off * 1e3:6.1f} ms "
            f"(first: {on_first / off_first:4.1f}x the floor)"
        )


if __name__ == "__main__":
    main()
