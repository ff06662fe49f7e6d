"""The soak: template-claim churn for a long while against the real kube-scheduler,
kube-apiserver and kube-controller-manager (issue 40, item 4), measuring whether the extender
leaks: its RSS and every in-flight map (``dra_extender_in_flight_entries``) over time.

The cluster is races.py's (10 nodes x 4 GPUs and 4 CPUs, the real resourceclaim controller and
garbage collector, a thread playing the kubelet, pods with a 30 s grace period). One cycle:

1. 40 low-priority pods, one template claim (1 GPU) and one CPU each: every GPU and CPU taken;
2. 4 high-priority pods of the same shape: kube-scheduler preempts a low pod for each (the
   nodes are CPU-full, so its dry run needs a victim and asks the extender's preempt verb);
3. every pod of the cycle deleted, and waited for until they and their claims are gone;
4. 40 more pods deleted 0.3 s after they were created (deletions mid-scheduling), waited for;
5. at rest: the store's invariants, ``dra_extender_claims_held_for_unbound_pods`` back to 0 and
   the maps that empty when nothing is in flight (:data:`EMPTY_AT_REST`) empty.

A thread samples the extender's RSS and its in-flight maps every :data:`SAMPLE_EVERY` seconds
throughout. ``python -m bench.soak_bench`` runs it for 30 minutes; the suite runs a short one.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import psutil

from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.timeout_memo import MAX_REMEMBERED_TIMEOUTS
from extender.scheduling.inflight.catch_up import SEEN_PODS
from extender.scheduling.inflight.expected_binds import PRUNE_AT
from extender.scheduling.preempt.nominated import MAX_REMEMBERED_PREEMPTIONS
from tests.realcluster.api import Api
from tests.realcluster.components import Extender
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.races import (
    EXTENDER,
    GRACE,
    NODES,
    TEMPLATE,
    bind_failures,
    bound_count,
    build_cluster,
    classify,
    cpu_containers,
    create_all,
    delete_pods,
    metric_samples,
    owned_claims,
    pods_named,
    running,
    wait_until,
)
from tests.realcluster.workload import pod_with_claims, store_violations

SAMPLE_EVERY = 5.0
#: The first part of a run that is warm-up: caches fill, memories bounded by a time fill up.
WARM_UP = 1 / 3
#: The longest any in-flight map keeps an entry by design (a preemption's victims, 10 minutes):
#: growth is judged only after a warm-up at least this long, so that such a map is full by then.
LONGEST_MEMORY = EngineConfig().preemption_memory_seconds
#: Samples after warm-up that a trend is judged on, at the least.
JUDGED_SAMPLES = 24
#: A map whose trend after warm-up rose by more than this many entries is still growing: a
#: steady leak of half an entry a minute over the 20 minutes after a 30-minute run's warm-up.
GROWN_BY = 8
#: Pods per cycle step: one per GPU (and CPU) of the cluster, and the preemptors.
FILL = NODES * 4
HIGH = 4
#: Maps that hold entries only while something is in flight: empty at rest.
EMPTY_AT_REST = (
    "binds",
    "claim_records",
    "claims_dirty",
    "claims_creating",
    "holds",
    "placing",
    "unanswered_bindings",
    "make_room_holds",
    "background_writes",
    "group_filters",
)
#: The other maps' bounds: what the extender caps them at (a pod kube-scheduler filtered but
#: never bound leaves an expected bind until the map is pruned; remembered pods, preemptions and
#: timed-out nodes are kept up to a size). ``claims_touched`` is drained by the next decision.
CAPPED = {
    "seen_pods": SEEN_PODS,
    "claims_waited_in_vain": SEEN_PODS,
    "preemptions": MAX_REMEMBERED_PREEMPTIONS,
    "expected_binds": PRUNE_AT + FILL,
    "timed_out_claim_sets": MAX_REMEMBERED_TIMEOUTS,
    "claims_touched": 2 * (FILL + HIGH),
    "finalizers_watched": 2 * (FILL + HIGH),
}


@dataclass
class Sample:
    #: Seconds since the soak started.
    at: float
    rss_mib: float
    entries: dict[str, int]


@dataclass
class Rest:
    """What the extender and the store showed at the end of a cycle."""

    cycle: int
    at: float
    held_for_unbound: float
    #: Maps of :data:`EMPTY_AT_REST` still holding entries 20 s after the cycle settled.
    not_empty: dict[str, int]
    violations: list[str]


@dataclass
class SoakResult:
    seconds: float
    cycles: int
    pods: int
    samples: list[Sample] = field(default_factory=list)
    rests: list[Rest] = field(default_factory=list)
    #: Pods of a cycle not bound in time (steps 1-2), or still there when they should be gone.
    stuck_pods: int = 0
    leftover_claims: int = 0
    failed_binds_by_reason: dict[str, int] = field(default_factory=dict)
    refused_writes: list[str] = field(default_factory=list)
    #: Every pod the soak deleted (all of them, some while they were being scheduled).
    deleted_pods: set[str] = field(default_factory=set)
    #: The extender process died or logged a traceback.
    crashed: str = ""

    def after_warm_up(self, fraction: float = WARM_UP) -> list[Sample]:
        return [s for s in self.samples if s.at >= self.seconds * fraction]

    def judges_growth(self) -> bool:
        """Whether the run can tell growth from warm-up: its warm-up outlasts every memory
        bounded by a time (:data:`LONGEST_MEMORY`) and :data:`JUDGED_SAMPLES` samples follow.
        A short run is all warm-up: RSS and the maps still fill."""
        return self.seconds * WARM_UP >= LONGEST_MEMORY and len(self.after_warm_up()) >= JUDGED_SAMPLES

    def rss_growth_mib(self, warm_up: float = WARM_UP) -> float:
        """What RSS grew by after warm-up, along its trend (:func:`trend`): a steady leak shows
        in full, the collector's and the allocator's ups and downs do not."""
        rise = trend([(s.at, s.rss_mib) for s in self.after_warm_up(warm_up)])
        return round(rise[1] - rise[0], 1) if rise else 0.0

    def peaks(self, samples: list[Sample] | None = None) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.samples if samples is None else samples:
            for name, count in s.entries.items():
                out[name] = max(out.get(name, 0), count)
        return out

    def grown(self) -> dict[str, tuple[float, float]]:
        """Maps still growing after warm-up: their trend (:func:`trend`) over the samples
        after warm-up rose by more than :data:`GROWN_BY` entries; by map, the trend's level
        where warm-up ended and at the end. Every map is bounded by what happened within a time
        (a pod's bind, a preemption's 10 minutes), so it is flat once warm-up outlasts that
        (:meth:`judges_growth`), whatever it does from one cycle to the next; a leak of a few
        entries a minute rises under the churn as at rest."""
        later = self.after_warm_up()
        names = sorted({name for s in later for name in s.entries})
        out = {}
        for name in names:
            rise = trend([(s.at, float(s.entries.get(name, 0))) for s in later])
            if rise and rise[1] - rise[0] > GROWN_BY:
                out[name] = (round(rise[0], 1), round(rise[1], 1))
        return out

    def over_bounds(self) -> dict[str, int]:
        """Maps whose peak passed their bound (:data:`CAPPED`, or the cluster's pod count)."""
        bound = FILL + HIGH + FILL
        return {n: c for n, c in self.peaks().items() if c > CAPPED.get(n, bound)}

    def summary(self) -> dict[str, Any]:
        rss = [s.rss_mib for s in self.samples]
        return {
            "seconds": round(self.seconds),
            "cycles": self.cycles,
            "pods": self.pods,
            "rss_mib_first_last_max": [rss[0], rss[-1], max(rss)] if rss else [],
            "growth_judged": self.judges_growth(),
            "rss_growth_after_warm_up_mib": self.rss_growth_mib(),
            "peaks_warm_up": self.peaks([s for s in self.samples if s.at < self.seconds * WARM_UP]),
            "peaks_after": self.peaks(self.after_warm_up()),
            "grown_after_warm_up": self.grown(),
            "held_for_unbound_at_rest_max": max((r.held_for_unbound for r in self.rests), default=0),
            "not_empty_at_rest": [(r.cycle, r.not_empty) for r in self.rests if r.not_empty],
            "violations": [v for r in self.rests for v in r.violations],
            "stuck_pods": self.stuck_pods,
            "leftover_claims": self.leftover_claims,
            "failed_binds_by_reason": self.failed_binds_by_reason,
            "refused_writes": self.refused_writes[:5],
            "crashed": self.crashed,
        }


def trend(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """The Theil-Sen line through ``points`` (time, value), as its values at the first and the
    last time; None for fewer than two times. Its slope is the median of the slopes between
    every two points, so spikes and cycles (the soak's churn fills a map and empties it again
    every cycle) leave it flat, and a steady rise shows in full."""
    if len({t for t, _ in points}) < 2:
        return None
    slopes = [(b - a) / (u - t) for i, (t, a) in enumerate(points) for u, b in points[i + 1 :] if u != t]
    slope = statistics.median(slopes)
    level = statistics.median(v - slope * t for t, v in points)
    first, last = min(t for t, _ in points), max(t for t, _ in points)
    return level + slope * first, level + slope * last


class Sampler:
    """The extender's RSS and in-flight maps every ``period`` seconds, on a thread."""

    def __init__(self, extender: Extender, started: float, period: float = SAMPLE_EVERY) -> None:
        self.extender = extender
        self.started = started
        self.period = period
        self.samples: list[Sample] = []
        self._process = psutil.Process(extender.process.pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def take(self) -> None:
        try:
            entries = self.extender.get("/debug/inflight")["entries"]
            rss = self._process.memory_info().rss / 2**20
        except (httpx.HTTPError, psutil.Error):
            return  # busy past the timeout, or gone (the soak reports a crash on its own)
        self.samples.append(Sample(round(time.monotonic() - self.started, 1), round(rss, 1), entries))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.take()

    def __enter__(self) -> Sampler:
        self.take()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.take()


def held_for_unbound(extender: Extender) -> float:
    (sample,) = [
        v for _, v in metric_samples(extender.metrics(), "dra_extender_claims_held_for_unbound_pods")
    ]
    return sample


def soak_pod(name: str, priority: str) -> dict[str, Any]:
    return pod_with_claims(
        name,
        templates={"gpu": TEMPLATE},
        priority_class=priority,
        containers=cpu_containers("1"),
        grace=GRACE,
    )


def gone(api: Api, prefix: str) -> Callable[[], bool]:
    return lambda: not pods_named(api, prefix) and not owned_claims(api, prefix)


def delete_all(api: Api, prefix: str, result: SoakResult) -> None:
    names = [p["metadata"]["name"] for p in pods_named(api, prefix)]
    result.deleted_pods.update(names)
    delete_pods(api, names)


def cycle(api: Api, n: int, result: SoakResult, timeout: float) -> None:
    """Steps 1-4 of the module's cycle; what got stuck is added to ``result``."""
    prefix = f"c{n}-"
    low = [f"{prefix}low-{i:02d}" for i in range(FILL)]
    high = [f"{prefix}high-{i}" for i in range(HIGH)]
    create_all(api, [soak_pod(name, "low") for name in low])
    if not wait_until(lambda: bound_count(api, prefix) >= FILL, timeout, period=0.2):
        result.stuck_pods += FILL - bound_count(api, prefix)
    create_all(api, [soak_pod(name, "high") for name in high])
    if not wait_until(lambda: bound_count(api, f"{prefix}high-") >= HIGH, timeout, period=0.2):
        result.stuck_pods += HIGH - bound_count(api, f"{prefix}high-")
    delete_all(api, prefix, result)
    mid = f"c{n}-mid-"
    create_all(api, [soak_pod(f"{mid}{i:02d}", "low") for i in range(FILL)])
    time.sleep(0.3)
    delete_all(api, mid, result)
    result.pods += 2 * FILL + HIGH
    if not wait_until(gone(api, prefix), timeout, period=0.5):
        result.stuck_pods += len(pods_named(api, prefix))
        result.leftover_claims += len(owned_claims(api, prefix))


def at_rest(api: Api, extender: Extender, n: int, started: float) -> Rest:
    """Step 5: wait (up to 20 s) for the extender to show nothing in flight and nothing held."""
    not_empty: dict[str, int] = {}
    held = -1.0

    def settled() -> bool:
        nonlocal not_empty, held
        entries = extender.get("/debug/inflight")["entries"]
        not_empty = {m: entries[m] for m in EMPTY_AT_REST if entries.get(m)}
        held = held_for_unbound(extender)  # recomputed at most every 5 s: polled until 0
        return not not_empty and held == 0

    wait_until(settled, 20.0, period=1.0)
    return Rest(n, round(time.monotonic() - started, 1), held, not_empty, store_violations(api))


def crashed(extender: Extender) -> str:
    if not extender.process.alive():
        return "the extender exited"
    return "a traceback in the extender's log" if "Traceback" in extender.log() else ""


def soak(plane: ControlPlane, seconds: float, *, cycle_timeout: float = 60.0) -> SoakResult:
    """Cycles until ``seconds`` have passed (the last one finishes); see the module."""
    build_cluster(plane)
    api = plane.api
    result = SoakResult(seconds=0.0, cycles=0, pods=0)
    started = time.monotonic()
    with running(plane, EXTENDER) as run:
        assert run.extender is not None
        with Sampler(run.extender, started) as sampler:
            while time.monotonic() - started < seconds:
                cycle(api, result.cycles, result, cycle_timeout)
                result.rests.append(at_rest(api, run.extender, result.cycles, started))
                result.cycles += 1
                if crashed(run.extender):
                    break
        result.seconds = time.monotonic() - started
        result.samples = sampler.samples
        errors, _ = bind_failures(run, lambda name: name.startswith("c"))
        result.failed_binds_by_reason = dict(Counter(classify(e) for e in errors))
        result.refused_writes = run.refused_writes(result.deleted_pods)
        result.crashed = crashed(run.extender)
    return result
