"""Prometheus metrics of one service instance (its own registry: no process-global state)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """Implements the engine's Observer; ``render`` produces the text exposition format."""

    def __init__(self, cache_sizes: Callable[[], dict[str, int]], in_flight: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "dra_extender_request_duration_seconds",
            "Time to answer a request, by verb.",
            ["verb"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS,
        )
        self.filter_nodes = Counter(
            "dra_extender_filter_nodes_total",
            "Nodes judged by filter, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.filter_errors = Counter(
            "dra_extender_filter_errors_total", "Filter calls answered with an Error.", registry=self.registry
        )
        self.binds = Counter(
            "dra_extender_binds_total", "Bind calls, by outcome.", ["outcome"], registry=self.registry
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
        self.bad_requests = Counter(
            "dra_extender_bad_requests_total",
            "Requests rejected as malformed, by verb.",
            ["verb"],
            registry=self.registry,
        )
        self.cache_objects = Gauge(
            "dra_extender_cache_objects", "Objects in the cache, by kind.", ["kind"], registry=self.registry
        )
        self.in_flight = Gauge(
            "dra_extender_in_flight_allocations",
            "Claim writes the cache does not show yet (their devices are held).",
            registry=self.registry,
        )
        self._cache_sizes = cache_sizes
        self._in_flight_count = in_flight

    # Observer
    def filtered(self, passed: int, failed: int, error: bool) -> None:
        self.filter_nodes.labels("passed").inc(passed)
        self.filter_nodes.labels("rejected").inc(failed)
        if error:
            self.filter_errors.inc()

    def bound(self, outcome: str) -> None:
        self.binds.labels(outcome).inc()

    def conflict(self) -> None:
        self.conflicts.inc()

    def claim_created(self, outcome: str) -> None:
        self.claim_creates.labels(outcome).inc()

    def render(self) -> bytes:
        for kind, count in self._cache_sizes().items():
            self.cache_objects.labels(kind).set(count)
        self.in_flight.set(self._in_flight_count())
        return generate_latest(self.registry)
