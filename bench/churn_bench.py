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

``--fragmentation`` (issue 51, 3) measures instead whether prioritize's fragmentation tie-break
(``--score-tie-break fragmentation``) helps pods of a whole node: on ``--nodes`` nodes of 8 GPUs,
pods of 1, 2, 4 and 8 GPUs (``SHAPE_MIX``) arrive and end at random (a seeded workload, the same
for every arm), the cluster about ``--load`` full, so that free GPUs end up scattered. Each tick
the pods that ended leave, the new ones join the queue and every waiting pod is tried in arrival
order (filter, prioritize, bind on a best-scored node, ties at random as kube-scheduler picks).
Arms: the tie-break off and on, and, for comparison only (no flag does this), fragmentation as
the first criterion: the fitting node where the pod strands the fewest GPUs, then the score.
After ``--warmup-ticks``: how many 8-GPU pods waited and for how long, the free GPUs stranded
for 2, 4 and 8 (``Capacity.stranded``, as the gauge), and, every 5 ticks an 8-GPU pod waits, how
many pods make room's planner (read-only) would move so that one fits; and how many placements
differ from the arm with the tie-break off (``--seeds``, ``--ticks``). With ``--first-available
SHARE`` that share of the 2- and 4-GPU pods ask for their GPUs or else half as many (a
prioritized list, whose score comes before the packing policy's).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from bench.allocator_bench import GPU, claim_object, cluster, pod_object
from bench.scheduling_bench import GPUS_PER_NODE
from extender.cluster.memstore import MemoryStore
from extender.cluster.owner_gc import release_and_delete
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.capacity import capacity
from extender.scheduling.decide.scores import stranded
from extender.scheduling.engine import Engine
from extender.scheduling.preempt.make_room import Plan, Rules, Shape, plan
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


# --- Fragmentation: the tie-break off and on (--fragmentation) ---------------------------------

#: GPUs per pod and how often each is asked for.
SHAPE_MIX = ((1, 0.4), (2, 0.3), (4, 0.2), (8, 0.1))
#: Pods' start time (make room moves only pods old enough; the planner is asked with age 0).
STARTED = "2026-11-01T00:00:00Z"
NOW = 1_800_000_000.0
#: Ticks between two make-room plans (a plan costs as much as a few dozen placements).
PLAN_EVERY = 5
#: The arms: (name, --score-tie-break, fragmentation first in the bench's own choice).
ARMS = (("off", "none", False), ("tie-break", "fragmentation", False), ("fgd-first", "none", True))


@dataclass(frozen=True)
class Arrival:
    tick: int
    gpus: int
    lifetime: int
    #: Asks for ``gpus``, or else half as many (a prioritized list: firstAvailable).
    fallback: bool = False

    def spec(self) -> dict[str, Any]:
        if not self.fallback:
            return {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU, "count": self.gpus}}]}
        subrequests = [
            {"name": "all", "deviceClassName": GPU, "count": self.gpus},
            {"name": "half", "deviceClassName": GPU, "count": self.gpus // 2},
        ]
        return {"requests": [{"name": "gpu", "firstAvailable": subrequests}]}

    @property
    def fewest(self) -> int:
        return self.gpus // 2 if self.fallback else self.gpus


def workload(
    seed: int, nodes: int, ticks: int, load: float, lifetime: float, first_available: float = 0.0
) -> list[Arrival]:
    """Arrivals (Poisson, so that about ``load`` of the GPUs are asked for) with their shapes
    and lifetimes (exponential, mean ``lifetime`` ticks), the same for every arm of a seed;
    ``first_available`` of the 2- and 4-GPU pods take half as many when no node has them all."""
    rng = random.Random(seed)
    mean_gpus = sum(g * w for g, w in SHAPE_MIX)
    rate = load * nodes * GPUS_PER_NODE / (mean_gpus * lifetime)
    shapes = [g for g, _ in SHAPE_MIX]
    weights = [w for _, w in SHAPE_MIX]
    out: list[Arrival] = []
    for tick in range(ticks):
        arrivals, budget = 0, rng.expovariate(1.0)
        while budget < rate:  # Poisson(rate) arrivals this tick
            arrivals += 1
            budget += rng.expovariate(1.0)
        for _ in range(arrivals):
            gpus = rng.choices(shapes, weights)[0]
            runs = max(1, round(rng.expovariate(1.0 / lifetime)))
            fallback = rng.random() < first_available and gpus in (2, 4)
            out.append(Arrival(tick, gpus, runs, fallback))
    return out


@dataclass
class ArmResult:
    arm: str
    placements: dict[int, str] = field(default_factory=dict)
    #: Per 8-GPU pod arrived after the warm-up: ticks it waited (one never placed: until the
    #: end of the run), and whether it was placed.
    waits_8: list[tuple[int, bool]] = field(default_factory=list)
    #: The same for the other pods (ticks waited).
    waits_other: list[int] = field(default_factory=list)
    #: Pods with a fallback (--first-available) placed after the warm-up, and those of them
    #: that got all the GPUs they asked for first.
    fallbacks: int = 0
    first_choices: int = 0
    stranded: dict[int, list[int]] = field(default_factory=lambda: {2: [], 4: [], 8: []})
    used: list[float] = field(default_factory=list)
    #: Every PLAN_EVERY ticks with an 8-GPU pod waiting: the moves make room's plan for 8 GPUs
    #: needs (None: no plan within its bounds, at most 3 moves).
    moves: list[int | None] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        plans = [m for m in self.moves if m is not None]
        return {
            "arm": self.arm,
            "pods_8": len(self.waits_8),
            "pods_8_waited": sum(1 for w, _ in self.waits_8 if w > 0),
            "pods_8_never_placed": sum(1 for _, placed in self.waits_8 if not placed),
            "pods_8_mean_wait_ticks": round(statistics.fmean(w for w, _ in self.waits_8), 1)
            if self.waits_8
            else None,
            "other_pods_waited": f"{sum(1 for w in self.waits_other if w > 0)}/{len(self.waits_other)}",
            "other_pods_mean_wait_ticks": round(statistics.fmean(self.waits_other), 2)
            if self.waits_other
            else None,
            "fallback_pods_first_choice": f"{self.first_choices}/{self.fallbacks}",
            "mean_stranded_for": {n: round(statistics.fmean(v), 1) for n, v in self.stranded.items() if v},
            "mean_used": round(statistics.fmean(self.used), 3) if self.used else None,
            "samples_with_8_waiting": len(self.moves),
            "make_room_mean_moves": round(statistics.fmean(plans), 2) if plans else None,
            "make_room_no_plan": len(self.moves) - len(plans),
        }


def growth(free: int, gpus: int) -> int:
    return stranded(free - gpus) - stranded(free)


async def fragmentation_arm(
    arm: tuple[str, str, bool], arrivals: list[Arrival], nodes: int, ticks: int, warmup: int, seed: int
) -> ArmResult:
    name, tie_break, fgd_first = arm
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.json"
        path.write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": cluster(nodes, GPUS_PER_NODE, 0.0)})
        )
        config = ServeConfig(engine=EngineConfig(score_tie_break=tie_break))
        service, store = build_embedded([str(path)], config)
    engine = service.engine
    names = sorted(engine.state.nodes)
    free = dict.fromkeys(names, GPUS_PER_NODE)
    ties = random.Random(seed)  # kube-scheduler's pick among equals, the same stream in every arm
    result = ArmResult(name)
    by_tick: dict[int, list[int]] = {}
    for i, a in enumerate(arrivals):
        by_tick.setdefault(a.tick, []).append(i)
    pending: list[int] = []
    ends: dict[int, list[int]] = {}
    rules = Rules(min_age=0.0, budget=2.0)
    taken: dict[int, int] = {}
    for tick in range(ticks):
        for i in ends.pop(tick, []):
            end_pod(store, i)
            free[result.placements[i]] += taken.pop(i)
        for i in by_tick.get(tick, []):
            store.create(claim_object(f"c-{i}", arrivals[i].spec()))
            obj = pod_object(f"p-{i}", f"c-{i}")
            obj["metadata"]["ownerReferences"] = [
                {"kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}
            ]
            obj["status"] = {"startTime": STARTED}
            store.create(obj)
            pending.append(i)
        waiting: list[int] = []
        for i in pending:
            gpus = arrivals[i].gpus
            if arrivals[i].fewest > max(free.values()):  # filter would find no node: spare the call
                waiting.append(i)
                continue
            pod = engine.state.pods[("default", f"p-{i}")]
            passed = engine.filter(pod, names).passed
            if not passed:
                waiting.append(i)
                continue
            scores = dict(engine.prioritize(pod, passed))
            if fgd_first:
                least = min(growth(free[n], min(gpus, free[n])) for n in passed)
                passed = [n for n in passed if growth(free[n], min(gpus, free[n])) == least]
            best = max(scores.get(n, 0) for n in passed)
            node = ties.choice([n for n in passed if scores.get(n, 0) == best])
            uid = engine.state.pods[("default", f"p-{i}")].uid
            if error := await engine.bind("default", f"p-{i}", uid, node):
                raise RuntimeError(f"p-{i} on {node}: {error}")
            allocation = store.get("ResourceClaim", "default", f"c-{i}")["status"]["allocation"]
            taken[i] = len(allocation["devices"]["results"])
            free[node] -= taken[i]
            result.placements[i] = node
            ends.setdefault(tick + arrivals[i].lifetime, []).append(i)
            if arrivals[i].tick >= warmup:
                if gpus == 8:
                    result.waits_8.append((tick - arrivals[i].tick, True))
                else:
                    result.waits_other.append(tick - arrivals[i].tick)
                if arrivals[i].fallback:
                    result.fallbacks += 1
                    result.first_choices += taken[i] == gpus
        pending = waiting
        if tick < warmup:
            continue
        snapshot = engine.snapshot()
        found = capacity(snapshot)
        for count in result.stranded:
            result.stranded[count].append(found.stranded(GPU, count))
        result.used.append(1 - sum(free.values()) / (len(names) * GPUS_PER_NODE))
        if (tick - warmup) % PLAN_EVERY == 0 and any(arrivals[i].gpus == 8 for i in pending):
            room = plan(snapshot, Shape(GPU, 8), rules, now=NOW, clock=time.monotonic)
            result.moves.append(len(room.moves) if isinstance(room, Plan) else None)
    for i, a in enumerate(arrivals):
        if a.tick >= warmup:
            if a.gpus == 8 and i not in result.placements:
                result.waits_8.append((ticks - a.tick, False))
            elif a.gpus != 8 and i not in result.placements:
                result.waits_other.append(ticks - a.tick)
    return result


async def fragmentation(
    seeds: list[int],
    nodes: int,
    ticks: int,
    warmup: int,
    load: float,
    lifetime: float,
    first_available: float = 0.0,
) -> list[dict[str, Any]]:
    logging.disable(logging.CRITICAL)
    out: list[dict[str, Any]] = []
    for seed in seeds:
        arrivals = workload(seed, nodes, ticks, load, lifetime, first_available)
        results = [await fragmentation_arm(arm, arrivals, nodes, ticks, warmup, seed) for arm in ARMS]
        off = results[0].placements
        for r in results:
            row = {"seed": seed, **r.summary()}
            row["placements_unlike_off"] = sum(1 for i, n in r.placements.items() if off.get(i) != n)
            print(json.dumps(row))
            out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, help="default 100 (32 with --fragmentation)")
    parser.add_argument("--cycles", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=1_000)
    parser.add_argument("--json", help="write the numbers to this file")
    parser.add_argument("--fragmentation", action="store_true", help="the tie-break off and on (see above)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--ticks", type=int, default=600)
    parser.add_argument("--warmup-ticks", type=int, default=150)
    parser.add_argument("--load", type=float, default=0.95)
    parser.add_argument("--lifetime", type=float, default=40.0, help="mean ticks a pod runs")
    parser.add_argument(
        "--first-available",
        type=float,
        default=0.0,
        help="share of the 2- and 4-GPU pods that take half as many when no node has them all",
    )
    args = parser.parse_args()
    result: Any
    if args.fragmentation:
        result = asyncio.run(
            fragmentation(
                args.seeds,
                args.nodes or 32,
                args.ticks,
                args.warmup_ticks,
                args.load,
                args.lifetime,
                args.first_available,
            )
        )
    else:
        result = asyncio.run(run(args.nodes or 100, args.cycles, args.warmup))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
