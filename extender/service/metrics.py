"""Prometheus metrics of one service instance (its own registry), and the device capacity
gauges, read from the latest :class:`~extender.scheduling.decide.capacity.Capacity` published by the
engine's loop (a scrape runs on the ops listener's thread and never reads the engine's state).
"""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import prometheus_client
from prometheus_client import (
    GC_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from extender import __version__
from extender.cel.environment import CelCounts
from extender.cluster.store_fence import STATES as STORE_FENCE_STATES
from extender.scheduling.decide.capacity import SHAPE_COUNTS, Capacity
from extender.scheduling.decide.held_claims import HeldClaims
from extender.scheduling.make_room_mover import ABANDON_REASONS, PLAN_OUTCOMES
from extender.scheduling.write import bind_failures
from extender.scheduling.write.evictions import EVICTION_OUTCOMES

#: Up to the longest a bind can take: several API calls of up to --api-timeout (30 s) each.
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 7.5, 10.0,
    30.0, 60.0, 120.0,
)  # fmt: skip
VERBS = ("filter", "prioritize", "bind", "preempt")
FILTER_CUTS = ("budget", "node_timeout", "not_ready")
PREEMPT_OUTCOMES = ("kept", "none", "not_ready")
#: What the bind path writes (the write-outcome counter exists at 0 for each from the start).
WRITTEN_RESOURCES = ("resourceclaims", "resourceclaims/status", "pods/binding", "pods/status")
CACHED_KINDS = ("Node", "Pod", "ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate")


T = TypeVar("T")


class LoopFeed(Generic[T]):
    """The latest value (device capacity, held claims), recomputed on the engine's loop at most
    every ``min_interval`` seconds, when a scrape asks (the scrape gets the one before: it never
    waits for the engine).

    ``steps`` starts a computation (:func:`~extender.scheduling.decide.capacity.capacity_steps` on a
    fresh snapshot); ``schedule`` runs a call on the engine's loop (``EngineWorker.call_soon``).
    The computation runs in slices of about ``slice_seconds``, each a call of its own, so the
    verbs run in between (``python -m bench.capacity_bench``: 25 ms in all at 500 nodes x 10
    devices and 105 ms at 2000; a first one, before CEL results are cached, 70 and 400 ms).
    """

    def __init__(
        self,
        steps: Callable[[], Generator[None, None, T]],
        schedule: Callable[[Callable[[], None]], None],
        *,
        min_interval: float = 15.0,
        slice_seconds: float = 0.01,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._steps = steps
        self._schedule = schedule
        self.min_interval = min_interval
        self.slice_seconds = slice_seconds
        self.clock = clock
        self.latest: T | None = None
        self.computed_at = 0.0  # wall time of latest, for the scrape
        self._asked_at: float | None = None
        self._running: Generator[None, None, T] | None = None
        self._lock = threading.Lock()

    def ask(self) -> T | None:
        with self._lock:
            now = self.clock()
            if self._asked_at is None or now - self._asked_at >= self.min_interval:
                self._asked_at = now
                self._schedule(self._start)
            return self.latest

    def _start(self) -> None:
        if self._running is None:  # one computation at a time
            self._running = self._steps()
            self._step()

    def _step(self) -> None:
        """On the engine's loop: advance the computation for one slice, then yield the loop."""
        assert self._running is not None
        until = self.clock() + self.slice_seconds
        try:
            while self.clock() < until:
                next(self._running)
        except StopIteration as done:
            self._running = None
            with self._lock:
                self.latest, self.computed_at = done.value, time.time()
            return
        except Exception:
            self._running = None  # the next scrape starts afresh instead of never again
            raise
        self._schedule(self._step)


class ScrapeTimeCollector(Collector):
    """Families read when scraped; none is described at registration (what they hold depends on
    the cluster, and describing would run a collection)."""

    def describe(self) -> list[Metric]:
        return []


class CapacityCollector(ScrapeTimeCollector):
    def __init__(self, feed: LoopFeed[Capacity]) -> None:
        self.feed = feed

    def collect(self) -> Iterator[Metric]:
        capacity = self.feed.ask()
        if capacity is None:
            return
        nodes = GaugeMetricFamily(
            "dra_extender_node_devices",
            "Devices a node can allocate, by driver and state (allocated; tainted: not allocated, but "
            "a NoSchedule or NoExecute taint keeps it; free); a network-attached device counts on "
            "every node that reaches it.",
            labels=["node", "driver", "state"],
        )
        for n in capacity.nodes:
            nodes.add_metric([n.node, n.driver, "allocated"], n.allocated)
            nodes.add_metric([n.node, n.driver, "tainted"], n.tainted)
            nodes.add_metric([n.node, n.driver, "free"], n.free)
        classes = GaugeMetricFamily(
            "dra_extender_class_devices",
            "Distinct devices a DeviceClass selects, by product and state (free: a one-device "
            "request of the class would get it; unavailable: in use or tainted).",
            labels=["device_class", "product", "state"],
        )
        for c in capacity.classes:
            classes.add_metric([c.device_class, c.product, "free"], c.free)
            classes.add_metric([c.device_class, c.product, "unavailable"], c.total - c.free)
        fits = _per_class_and_count(
            "dra_extender_class_pods_fit",
            "Pods asking for `count` devices of the class that still fit (sum over nodes of free "
            "// count; constraints ignored: an estimate of fragmentation).",
            capacity,
            capacity.pods_that_fit,
        )
        stranded = _per_class_and_count(
            "dra_extender_class_stranded_devices",
            "Free devices of the class that no pod asking for `count` of them can use (sum over "
            "nodes of free % count; constraints ignored): fragmentation, which make room cures.",
            capacity,
            capacity.stranded,
        )
        age = GaugeMetricFamily(
            "dra_extender_capacity_computed_timestamp_seconds",
            "When the device capacity gauges were computed (Unix time).",
            value=self.feed.computed_at,
        )
        yield from (nodes, classes, fits, stranded, age)


class CelCollector(ScrapeTimeCollector):
    def __init__(self, counts: Callable[[], CelCounts], failing_classes: LoopFeed[list[str]] | None) -> None:
        self._counts = counts
        self._failing_classes = failing_classes

    def collect(self) -> Iterator[Metric]:
        counts = self._counts()
        yield CounterMetricFamily(
            "dra_extender_cel_compile_errors",
            "CEL expressions (DeviceClass and claim selectors, derived attributes) that did not "
            "compile; each expression counted once while it stays cached.",
            value=counts.compile_errors,
        )
        evaluations = CounterMetricFamily(
            "dra_extender_cel_evaluation_errors",
            "CEL evaluations that failed, by kind: cost_limit (the runtime cost limit stopped it), "
            "error (any other runtime error). A result reused from the memo is not counted again.",
            labels=["kind"],
        )
        evaluations.add_metric(["error"], counts.evaluation_errors - counts.cost_limit_hits)
        evaluations.add_metric(["cost_limit"], counts.cost_limit_hits)
        yield evaluations
        if self._failing_classes is not None:
            failing = self._failing_classes.ask() or []
            yield GaugeMetricFamily(
                "dra_extender_device_classes_not_compiling",
                "DeviceClasses with a selector that does not compile now (recomputed at most every "
                "15 s when scraped): pods asking for them fail to schedule.",
                value=len(failing),
            )


class HeldClaimsCollector(ScrapeTimeCollector):
    def __init__(self, feed: LoopFeed[HeldClaims]) -> None:
        self.feed = feed

    def collect(self) -> Iterator[Metric]:
        held = self.feed.ask() or HeldClaims()
        yield GaugeMetricFamily(
            "dra_extender_claims_held_for_unbound_pods",
            "ResourceClaims allocated and reserved for a pod of this scheduler that is not bound "
            "(a bind between its claim writes and its Binding, or one that stopped there).",
            value=held.count,
        )
        yield GaugeMetricFamily(
            "dra_extender_claims_held_for_unbound_pods_oldest_seconds",
            "Seconds the longest-held of those claims has been allocated (from its "
            "allocationTimestamp, else from when this replica first saw it held); 0 when none is.",
            value=held.oldest_seconds,
        )


@dataclass(frozen=True, slots=True)
class InformerState:
    """One informer as /metrics shows it (read from its reflector at scrape time)."""

    resource: str
    synced: bool
    seconds_since_event: float | None
    down_seconds: float
    relists: int
    errors: int


class HealthCollector(ScrapeTimeCollector):
    """Readiness, leadership and each informer's state, read when scraped (nothing on a hot path)."""

    def __init__(
        self,
        ready: Callable[[], bool],
        leader: Callable[[], bool],
        informers: Callable[[], list[InformerState]],
    ) -> None:
        self._ready, self._leader, self._informers = ready, leader, informers

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "dra_extender_ready",
            "1 while /readyz answers 200 (the cache can be trusted), else 0.",
            value=int(self._ready()),
        )
        yield GaugeMetricFamily(
            "dra_extender_leader",
            "1 while this replica may write (it holds the Lease, or runs without leader election).",
            value=int(self._leader()),
        )
        synced = GaugeMetricFamily(
            "dra_extender_informer_synced", "1 once the informer listed, by resource.", labels=["resource"]
        )
        age = GaugeMetricFamily(
            "dra_extender_informer_last_event_age_seconds",
            "Seconds since the informer's last list, watch event or bookmark, by resource.",
            labels=["resource"],
        )
        down = GaugeMetricFamily(
            "dra_extender_informer_down_seconds",
            "Seconds the informer's list or watch has not been working (0 while it works), by resource.",
            labels=["resource"],
        )
        relists = CounterMetricFamily(
            "dra_extender_informer_lists",
            "Lists (the first and every relist), by resource.",
            labels=["resource"],
        )
        errors = CounterMetricFamily(
            "dra_extender_informer_errors", "Failed lists and watches, by resource.", labels=["resource"]
        )
        for informer in self._informers():
            synced.add_metric([informer.resource], int(informer.synced))
            if informer.seconds_since_event is not None:
                age.add_metric([informer.resource], informer.seconds_since_event)
            down.add_metric([informer.resource], informer.down_seconds)
            relists.add_metric([informer.resource], informer.relists)
            errors.add_metric([informer.resource], informer.errors)
        yield from (synced, age, down, relists, errors)


class Metrics:
    """Implements the engine's Observer; ``render`` produces the text exposition format."""

    def __init__(
        self,
        cache_sizes: Callable[[], dict[str, int]],
        in_flight: Callable[[], int],
        capacity: LoopFeed[Capacity] | None = None,
        held: LoopFeed[HeldClaims] | None = None,
        cel_counts: Callable[[], CelCounts] | None = None,
        failing_classes: LoopFeed[list[str]] | None = None,
    ) -> None:
        # *_created series double every counter for a timestamp nobody reads (process-wide switch).
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.registry.register(GC_COLLECTOR)
        if capacity is not None:
            self.registry.register(CapacityCollector(capacity))
        if held is not None:
            self.registry.register(HeldClaimsCollector(held))
        if cel_counts is not None:
            self.registry.register(CelCollector(cel_counts, failing_classes))
        build = Gauge(
            "dra_extender_build_info",
            "1, labelled with the running version.",
            ["version", "python"],
            registry=self.registry,
        )
        build.labels(__version__, platform.python_version()).set(1)
        self.latency = Histogram(
            "dra_extender_request_duration_seconds",
            "Time to answer a request, by verb.",
            ["verb"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS,
        )
        self.filter_held = Histogram(
            "dra_extender_filter_held_seconds",
            "Time a filter answer was held back because binds queued (--scheduler-http-timeout; "
            "extender/service/bind_pressure.py); only filters that were held are observed.",
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0),
        )
        self.filters_held = Gauge(
            "dra_extender_filters_held",
            "Filter answers being held back now because binds queue (--scheduler-http-timeout; "
            "extender/service/bind_pressure.py).",
            registry=self.registry,
        )
        self.filter_nodes = Counter(
            "dra_extender_filter_nodes_total",
            "Nodes judged by filter, by outcome (names the cache does not know are not counted).",
            ["outcome"],
            registry=self.registry,
        )
        self.filter_errors = Counter(
            "dra_extender_filter_errors_total", "Filter calls answered with an Error.", registry=self.registry
        )
        self.binds = Counter(
            "dra_extender_binds_total", "Bind calls, by outcome.", ["outcome"], registry=self.registry
        )
        self.bind_failures = Counter(
            "dra_extender_bind_failures_total",
            "Failed binds, by reason (extender/scheduling/write/bind_failures.py).",
            ["reason"],
            registry=self.registry,
        )
        self.conflicts = Counter(
            "dra_extender_claim_write_conflicts_total",
            "409 Conflicts met while writing claims.",
            registry=self.registry,
        )
        self.claim_creates = Counter(
            "dra_extender_resourceclaim_creates_total",
            "Extended-resource claims created by binds (as scheduler_resourceclaim_creates_total), "
            "by outcome: success, reused (found from an earlier attempt), failure.",
            ["outcome"],
            registry=self.registry,
        )
        self.make_room_hints = Counter(
            "dra_extender_make_room_hints_total",
            "Make-room plans computed off filter's path for the hint line of a pod no node fits, by "
            "outcome: plan (a plan with moves: the line is shown), none (no plan, or none needed), "
            "skipped (the queue was full, the pod gone, or planning failed).",
            ["outcome"],
            registry=self.registry,
        )
        self.make_room_plans = Counter(
            "dra_extender_make_room_plans_total",
            "Make-room plans the mover (--make-room) acted on, by outcome: started, carried_out "
            "(the waiting pod was bound), abandoned (see dra_extender_make_room_abandoned_total), "
            "dry_run (logged only).",
            ["outcome"],
            registry=self.registry,
        )
        self.make_room_abandoned = Counter(
            "dra_extender_make_room_abandoned_total",
            "Make-room plans the mover abandoned (its hold released), by reason: budget (a "
            "PodDisruptionBudget refused an eviction), throttled, refused, error, changed (the plan "
            "no longer holds), target_gone, not_leading, timeout, stopped.",
            ["reason"],
            registry=self.registry,
        )
        self.make_room_evictions = Counter(
            "dra_extender_make_room_evictions_total",
            "Evictions the mover asked for (pods/eviction, the pod's UID as precondition), by "
            "outcome: evicted, gone (deleted or replaced already), budget (429 from a "
            "PodDisruptionBudget), throttled (another 429), refused (403, 500), error.",
            ["outcome"],
            registry=self.registry,
        )
        self.binding_waits = Counter(
            "dra_extender_binding_conditions_waits_total",
            "Binds that waited for their devices' binding conditions (as kube-scheduler's "
            "scheduler_dra_bindingconditions_allocations_total), by outcome: success, pending (the "
            "wait budget ran out; kube-scheduler retries the bind), failed, timeout.",
            ["outcome"],
            registry=self.registry,
        )
        self.bad_requests = Counter(
            "dra_extender_bad_requests_total",
            "Requests rejected as malformed, by verb.",
            ["verb"],
            registry=self.registry,
        )
        self.filter_cut = Counter(
            "dra_extender_filter_cut_short_total",
            "Filter answers that did not judge every node in full, by cause: budget (the "
            "--filter-budget ran out; the rest were not evaluated), node_timeout (a node's "
            "allocation ran past --node-timeout), not_ready (every node refused: the cache "
            "cannot be trusted yet).",
            ["cause"],
            registry=self.registry,
        )
        self.preempts = Counter(
            "dra_extender_preempt_total",
            "Preempt calls, by outcome: kept (some candidate nodes kept, with the victims that make "
            "room for the pod's devices), none (no candidate node helps the pod's devices), not_ready "
            "(answered with no node: the cache cannot be trusted yet).",
            ["outcome"],
            registry=self.registry,
        )
        self.api_requests = Counter(
            "dra_extender_api_requests",
            "Requests to the API server, by verb, resource and HTTP code (<error>: no answer).",
            ["verb", "resource", "code"],
            registry=self.registry,
        )
        self.writes_unknown = Counter(
            "dra_extender_write_outcome_unknown",
            "Writes of the bind path sent with no answer or a server error: the API server may or "
            "may not have applied them (the extender reads back before going on), by resource.",
            ["resource"],
            registry=self.registry,
        )
        self.fence_refusals = Counter(
            "dra_extender_writes_refused_by_fence",
            "Writes the API server refused because another replica holds the Lease (the store fence "
            "of manifests/*leader-fence.yaml): this replica stood down, by resource.",
            ["resource"],
            registry=self.registry,
        )
        self.store_fence = Gauge(
            "dra_extender_store_fence",
            "Whether the API server refuses this replica's writes when it does not lead: 1 for the "
            "state found (enforced, absent, unusable, unknown), 0 for the others; all 0 in embedded mode.",
            ["state"],
            registry=self.registry,
        )
        self.api_latency = Histogram(
            "dra_extender_api_request_duration_seconds",
            "Time to an API server's answer (a watch: to its headers), by verb and resource.",
            ["verb", "resource"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS,
        )
        self.cache_objects = Gauge(
            "dra_extender_cache_objects", "Objects in the cache, by kind.", ["kind"], registry=self.registry
        )
        self.in_flight = Gauge(
            "dra_extender_in_flight_allocations",
            "Claim writes the cache does not show yet (their devices are held).",
            registry=self.registry,
        )
        self.in_flight_entries = Gauge(
            "dra_extender_in_flight_entries",
            "Entries in each map of in-flight state (binds, claim writes, expected binds, "
            "remembered preemptions ...): flat under steady load, back to their floor at rest.",
            ["map"],
            registry=self.registry,
        )
        self._cache_sizes = cache_sizes
        self._in_flight_count = in_flight
        self._entries: Callable[[], dict[str, int]] = dict
        #: Labelled children by (metric, values): ``labels()`` takes a lock and checks its
        #: values on every call, a few microseconds on each verb's path.
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        # Every label value known up front, so each series exists (at 0) before its first event.
        for verb in VERBS:
            self.latency.labels(verb)
            self.bad_requests.labels(verb)
        self._passed = self.filter_nodes.labels("passed")
        self._rejected = self.filter_nodes.labels("rejected")
        for outcome in ("success", "failure"):
            self.binds.labels(outcome)
        for reason in bind_failures.ALL:
            self.bind_failures.labels(reason)
        for outcome in ("success", "reused", "failure"):
            self.claim_creates.labels(outcome)
        for outcome in ("success", "pending", "failed", "timeout"):
            self.binding_waits.labels(outcome)
        for outcome in ("plan", "none", "skipped"):
            self.make_room_hints.labels(outcome)
        for outcome in PLAN_OUTCOMES:
            self.make_room_plans.labels(outcome)
        for reason in ABANDON_REASONS:
            self.make_room_abandoned.labels(reason)
        for outcome in EVICTION_OUTCOMES:
            self.make_room_evictions.labels(outcome)
        for kind in CACHED_KINDS:
            self.cache_objects.labels(kind)
        for cause in FILTER_CUTS:
            self.filter_cut.labels(cause)
        for outcome in PREEMPT_OUTCOMES:
            self.preempts.labels(outcome)
        for resource in WRITTEN_RESOURCES:
            self.writes_unknown.labels(resource)
            self.fence_refusals.labels(resource)
        for state in STORE_FENCE_STATES:
            self.store_fence.labels(state)

    def child(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)``, remembered."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*values)
        return found

    def answered(self, verb: str, seconds: float) -> None:
        """A verb answered 200 in ``seconds``."""
        self.child(self.latency, verb).observe(seconds)

    # Observer
    def filtered(self, passed: int, failed: int, error: bool) -> None:
        self._passed.inc(passed)
        self._rejected.inc(failed)
        if error:
            self.filter_errors.inc()

    def filter_cut_short(self, cause: str) -> None:
        self.filter_cut.labels(cause).inc()

    def api_request(self, verb: str, resource: str, code: str, seconds: float) -> None:
        """One API request (:data:`~extender.cluster.api_calls.RequestObserver`)."""
        self.child(self.api_requests, verb, resource, code).inc()
        self.child(self.api_latency, verb, resource).observe(seconds)

    def write_outcome_unknown(self, resource: str) -> None:
        self.writes_unknown.labels(resource).inc()

    def refused_by_fence(self, resource: str) -> None:
        self.fence_refusals.labels(resource).inc()

    def store_fence_is(self, state: str) -> None:
        for known in STORE_FENCE_STATES:
            self.store_fence.labels(known).set(1 if known == state else 0)

    def bound(self, outcome: str, reason: str = "") -> None:
        self.child(self.binds, outcome).inc()
        if reason:
            self.child(self.bind_failures, reason).inc()

    def conflict(self) -> None:
        self.conflicts.inc()

    def claim_created(self, outcome: str) -> None:
        self.claim_creates.labels(outcome).inc()

    def binding_waited(self, outcome: str) -> None:
        self.binding_waits.labels(outcome).inc()

    def make_room_hint(self, outcome: str) -> None:
        self.make_room_hints.labels(outcome).inc()

    def make_room_plan(self, outcome: str, reason: str = "") -> None:
        self.make_room_plans.labels(outcome).inc()
        if reason:
            self.make_room_abandoned.labels(reason).inc()

    def make_room_eviction(self, outcome: str) -> None:
        self.make_room_evictions.labels(outcome).inc()

    def watch_health(
        self,
        ready: Callable[[], bool],
        leader: Callable[[], bool],
        informers: Callable[[], list[InformerState]],
    ) -> None:
        """Expose readiness, leadership and the informers' state (read at each scrape)."""
        self.registry.register(HealthCollector(ready, leader, informers))

    def watch_held_filters(self, holding: Callable[[], int]) -> None:
        """Expose how many filters back-pressure holds now (read at each scrape)."""
        self.filters_held.set_function(holding)

    def watch_entries(self, entries: Callable[[], dict[str, int]]) -> None:
        """Expose the in-flight maps' sizes (``Engine.entries``, read at each scrape)."""
        self._entries = entries

    def render(self) -> bytes:
        for kind, count in self._cache_sizes().items():
            self.cache_objects.labels(kind).set(count)
        self.in_flight.set(self._in_flight_count())
        for name, count in self._entries().items():
            self.in_flight_entries.labels(name).set(count)
        return generate_latest(self.registry)


def _per_class_and_count(
    name: str, documentation: str, capacity: Capacity, measure: Callable[[str, int], int]
) -> GaugeMetricFamily:
    """A gauge of ``measure(class, count)`` for every class and each of :data:`SHAPE_COUNTS`."""
    family = GaugeMetricFamily(name, documentation, labels=["device_class", "count"])
    for device_class in sorted(capacity.free_by_class):
        for count in SHAPE_COUNTS:
            family.add_metric([device_class, str(count)], measure(device_class, count))
    return family
