"""What device preemption costs: filter with --device-preemption, and the preempt verb.

Run: ``python -m bench.preemption_bench`` (``--nodes``, ``--repeat``, ``--candidates``).

The cluster is the allocator bench's (8 GPUs and 2 NICs per node) with every GPU held by
priority-0 pods, four per node with two GPUs each. Per node count, in one process, medians of
``--repeat`` calls:

- filter for a pod of priority 1000 wanting 2 GPUs, device preemption off (the floor: every node
  Unresolvable from memoized answers) and on (every node also asks: would evicting the
  lower-priority pods make room? one allocation with their claims counted out, shared by
  look-alike nodes whose evictions free the same devices: this cluster's best case), and on with
  every node judged alone (the worst case: nodes sent in full are not grouped);
- filter for a priority-0 pod (no running pod is less important: the common case) off and on;
- the preempt verb over ``--candidates`` placeholder candidates (kube-scheduler 1.38 sends up to
  max(10% of the nodes, 100)), with what-ifs that count the freed claims out of the devices in
  use, beside the same victim choice with what-ifs that rebuild the devices in use from every
  claim (how it was done before this bench was written).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.allocator_bench import GPU, claim_object, cluster, pod_object
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.model.core import Node, Pod
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.nominated import importance
from extender.scheduling.preempt.victims import Candidate, potential_victims, preempt

PODS_PER_NODE = 4


def holders(nodes: int, gpus: int) -> list[dict[str, Any]]:
    """Priority-0 pods holding every GPU, ``PODS_PER_NODE`` per node."""
    out: list[dict[str, Any]] = []
    each = gpus // PODS_PER_NODE
    for n in range(nodes):
        node = f"node-{n:04d}"
        for k in range(PODS_PER_NODE):
            name = f"low-{n:04d}-{k}"
            held = claim_object(
                f"{name}-gpus",
                {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": each}}]},
            )
            held["status"] = {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "gpu", "driver": GPU, "pool": node, "device": f"gpu-{g}"}
                            for g in range(k * each, (k + 1) * each)
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-{name}"}],
            }
            running = pod_object(name, f"{name}-gpus", uid=f"uid-{name}")
            running["spec"]["nodeName"] = node
            running["spec"]["priority"] = 0
            running["status"] = {"phase": "Running", "startTime": f"2026-11-{1 + k:02d}T00:00:00Z"}
            out += [held, running]
    return out


def pending(name: str, priority: int) -> list[dict[str, Any]]:
    wanted = claim_object(
        f"{name}-gpus", {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 2}}]}
    )
    p = pod_object(name, f"{name}-gpus", uid=f"uid-{name}")
    p["spec"]["priority"] = priority
    return [wanted, p]


def median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    result = fn()  # warm: CEL results, memo tables
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3, result


def rebuilt_select(snapshot: Snapshot, preemptor: Pod, node: Node) -> int:
    """The same victim choice (no budgets) with a what-if that rebuilds the devices in use from
    every remaining claim, as the first preemption code did: the comparison for Snapshot.what_if."""
    claims = snapshot.claims_of(preemptor)
    lower = potential_victims(snapshot.state, preemptor, node.name)

    def fits(gone: set[str]) -> bool:
        freed = {
            key
            for key, c in snapshot.claims.items()
            if c.allocation is not None
            and c.reserved_for
            and all(e.get("uid") in gone for e in c.reserved_for)
        }
        remaining = {k: c for k, c in snapshot.claims.items() if k not in freed}
        what_if = Snapshot(
            snapshot.state, snapshot.features, snapshot.cel, claims=remaining, inventory=snapshot.inventory
        )
        return what_if.decide(claims, node).fits

    victims = {p.uid for p in lower}
    if not fits(victims):
        return -1
    chosen = 0
    for pod in sorted(lower, key=importance):
        victims.discard(pod.uid)
        if not fits(victims):
            victims.add(pod.uid)
            chosen += 1
    return chosen


def run(nodes: int, repeat: int, candidates: int) -> None:
    objects = [*cluster(nodes, 8, 0.0), *holders(nodes, 8), *pending("vip", 1000), *pending("peer", 0)]
    state = ClusterState.from_objects(objects)
    assert not state.problems, state.problems[:3]
    names = sorted(state.nodes)
    vip, peer = state.pods[("default", "vip")], state.pods[("default", "peer")]
    # One state per engine: an engine drains the state's record of changed claims.
    off = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), EngineConfig(filter_budget=60.0))
    preempting = EngineConfig(filter_budget=60.0, device_preemption=True)
    on = assemble(ClusterState.from_objects(objects), MemoryAPI(MemoryStore()), CelEnvironment(), preempting)
    floor, result = median_ms(lambda: off.filter(vip, names), repeat)
    assert len(result.unresolvable) == nodes
    with_check, result = median_ms(lambda: on.filter(vip, names), repeat)
    assert len(result.failed) == nodes, (len(result.failed), list(result.unresolvable.items())[:1])
    # Nodes sent in full (nodeCacheCapable: false) are each judged alone: no look-alike sharing.
    alone, result = median_ms(lambda: on.filter(vip, names, on.state.nodes), max(1, repeat // 2))
    assert len(result.failed) == nodes
    peer_off, _ = median_ms(lambda: off.filter(peer, names), repeat)
    peer_on, result = median_ms(lambda: on.filter(peer, names), repeat)
    assert len(result.unresolvable) == nodes
    print(
        f"{nodes:5d} nodes x 8 GPUs held by {PODS_PER_NODE * nodes} priority-0 pods; filter over all nodes:\n"
        f"   priority-1000 pod: preemption off (floor) {floor:8.2f} ms   on {with_check:8.2f} ms "
        f"({(with_check - floor) / nodes * 1e3:.0f} us per node checked); every node judged alone "
        f"{alone:8.2f} ms ({(alone - floor) / nodes * 1e3:.0f} us per node)\n"
        f"   priority-0 pod:    preemption off        {peer_off:8.2f} ms   on {peer_on:8.2f} ms "
        "(nothing to check)"
    )
    snapshot = on.snapshot()
    chosen = {name: Candidate(()) for name in names[:candidates]}
    verb, answer = median_ms(lambda: preempt(snapshot, vip, chosen, budget=60.0), repeat)
    assert len(answer) == len(chosen) and all(len(c.uids) == 1 for c in answer.values())
    few = names[: min(10, candidates)]
    rebuilt, counts = median_ms(
        lambda: [rebuilt_select(snapshot, vip, state.nodes[n]) for n in few], max(1, repeat // 2)
    )
    assert counts == [1] * len(few)
    per_node_now = verb / len(chosen)
    per_node_before = rebuilt / len(few)
    print(
        f"   preempt verb, {len(chosen)} placeholder candidates: {verb:8.2f} ms "
        f"({per_node_now:.2f} ms per node); rebuilding what-ifs: {per_node_before:.2f} ms per node "
        f"({per_node_before / per_node_now:.0f}x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--candidates", type=int, default=100)
    args = parser.parse_args()
    for nodes in args.nodes:
        run(nodes, args.repeat, args.candidates)


if __name__ == "__main__":
    main()
