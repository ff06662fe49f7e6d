"""Building a running service from configuration: the one place that wires everything."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import logging.handlers
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s

from extender.allocator import FeatureGateError, Features
from extender.cel import CelEnvironment, CelOptions
from extender.cluster.api import ClusterAPI, ClusterAPIError
from extender.cluster.async_kube import AsyncKube, write_window
from extender.cluster.kube import (
    POD_GROUP_VERSIONS,
    RESOURCE_GROUP,
    SCHEDULING_GROUP,
    KubeAPI,
    Paths,
    RawKube,
    bounded_retries,
)
from extender.cluster.leader import LeaseElector
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import Event, MemoryStore
from extender.cluster.owner_gc import collect_owned_claims
from extender.cluster.reflector import Reflector
from extender.cluster.state import KINDS, ClusterState, Key
from extender.defaults import DEFAULT_MAX_STATE_BYTES
from extender.scheduling.assembly import assemble, in_flight_view
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.capacity import capacity_steps
from extender.scheduling.decide.class_health import classes_not_compiling
from extender.scheduling.decide.held_claims import held_claim_steps
from extender.scheduling.inflight.snapshots import Snapshots
from extender.scheduling.inflight.tracker import Tracker
from extender.service.app import DEFAULT_MAX_BODY_BYTES, Service
from extender.service.logs import decision_log
from extender.service.metrics import InformerState, LoopFeed, Metrics
from extender.service.versions import ServerVersion, device_preemption_fallback, features_for, release_for
from extender.service.worker import Batches, EngineWorker
from extender.statefile import load_objects

log = logging.getLogger("dra_extender")
#: How long a graceful shutdown waits for the Lease to be released.
RELEASE_WAIT_SECONDS = 5.0


@dataclass(frozen=True)
class LeaderElection:
    namespace: str
    name: str = "dra-extender"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True)
class ServeConfig:
    engine: EngineConfig = field(default_factory=EngineConfig)
    prefix: str = "/scheduler"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: Cluster mode with several replicas: only the Lease holder binds.
    leader_election: LeaderElection | None = None
    #: Seconds to wait for one API server request (cluster mode).
    api_timeout: float = 30.0
    #: Cluster mode: an informer down this long makes the cache stale (not ready, no binds).
    cache_stale_after: float = 30.0
    #: ``--feature-gates`` as given (``engine.features`` applies them to ``engine.release``).
    gates: Mapping[str, bool] = field(default_factory=dict)
    #: No ``--kubernetes-version`` in cluster mode: follow the API server's ``/version``.
    release_from_server: bool = False
    #: Embedded mode: the largest state file read.
    max_state_bytes: int = DEFAULT_MAX_STATE_BYTES


def follow(store: MemoryStore, state: ClusterState) -> None:
    """Keep ``state`` equal to ``store``: the embedded default's informer."""

    def on_event(event: Event) -> None:
        if event.type == "DELETED":
            state.remove(event.object)
        else:
            state.apply(event.object)

    store.subscribe(on_event)


def build_embedded(
    paths: Sequence[str],
    config: ServeConfig,
    *,
    clock: Callable[[], float] = time.monotonic,
    api: Callable[[MemoryStore], ClusterAPI] = MemoryAPI,
) -> tuple[Service, MemoryStore]:
    """The embedded default: state files in an in-memory store that plays the API server
    (``api``: how writes reach the store; tests put faults in between)."""
    objects, problems = load_objects(paths, max_bytes=config.max_state_bytes, kinds=KINDS)
    store = MemoryStore()
    state = ClusterState()
    follow(store, state)
    collect_owned_claims(store)
    store.load(objects)
    for problem in [*problems, *state.problems]:
        log.warning("state: %s", problem)
    features = config.engine.features
    cel = CelEnvironment(CelOptions(list_type_attributes=features.list_type_attributes))
    worker = EngineWorker()
    view = in_flight_view(state, cel, config.engine, clock=clock)
    metrics = observed(state, cel, config.engine, view, worker)
    engine = assemble(
        state,
        api(store),
        cel,
        config.engine,
        clock=clock,
        observer=metrics,
        log_sink=decision_log(),
        view=view,
    )
    engine.snapshot()  # index the inventory now, not on the first request
    log.info("deciding as Kubernetes %s", config.engine.release.name)
    service = Service(engine=engine, metrics=metrics, ready=lambda: True, mode="embedded", worker=worker)
    metrics.watch_health(lambda: True, lambda: True, list)  # the store is the cache: no informers
    return service, store


def observed(
    state: ClusterState,
    cel: CelEnvironment,
    config: EngineConfig,
    view: tuple[Tracker, Snapshots],
    worker: EngineWorker,
) -> Metrics:
    """The engine's metrics: with the device capacity and held-claims gauges, computed on its
    loop from the snapshots and the cache (``config``: the scheduler names, which no
    reconfiguration changes)."""
    tracker, snapshots = view
    capacity = LoopFeed(lambda: capacity_steps(snapshots.current()), worker.call_soon)
    first_seen: dict[Key, float] = {}

    held = LoopFeed(
        lambda: held_claim_steps(state, config.scheduler_names, time.time(), first_seen),
        worker.call_soon,
        min_interval=5.0,
    )

    def class_steps() -> Generator[None, None, list[str]]:
        yield  # one step, on the engine's loop
        return classes_not_compiling(state, cel)

    return Metrics(
        state.counts,
        lambda: len(tracker.assumed),
        capacity,
        held,
        lambda: cel.counts,
        LoopFeed(class_steps, worker.call_soon),
    )


#: kind -> collection resource; DeviceTaintRules only when the gate is on and the server serves them,
#: PodGroups likewise (DRAWorkloadResourceClaims: they decide whom a claim is reserved for).
#: PodDisruptionBudgets only inform preemption: see OPTIONAL.
WATCHED = (
    ("Node", "nodes"),
    ("Pod", "pods"),
    ("ResourceSlice", "resourceslices"),
    ("DeviceClass", "deviceclasses"),
    ("ResourceClaim", "resourceclaims"),
    ("ResourceClaimTemplate", "resourceclaimtemplates"),
    ("DeviceTaintRule", "devicetaintrules"),
    ("PodDisruptionBudget", "poddisruptionbudgets"),
    ("PodGroup", "podgroups"),
)
#: Informers whose outage does not make the cache stale: allocation and binding never read them
#: (without PodDisruptionBudgets, preemption spares no pod for a budget it does not know).
OPTIONAL = {"PodDisruptionBudget"}
#: The API group/version of the kinds outside resource.k8s.io.
OUTSIDE_DRA = {"Node": "v1", "Pod": "v1", "PodDisruptionBudget": "policy/v1"}


class ClusterHealth:
    """Whether the cluster-mode cache can be trusted: discovery done, every informer watching."""

    def __init__(self, stale_after: float) -> None:
        self.stale_after = stale_after
        #: The informers binds depend on (those of OPTIONAL kinds log their outages, nothing more).
        self.reflectors: list[Reflector] = []
        #: Why discovery has not succeeded yet ('' once it has).
        self.discovery = "not started"
        self._synced_lock = threading.Lock()
        self._synced_logged = False

    def reflector_synced(self) -> None:
        """After any informer's list (on its thread): log once when every informer has listed."""
        with self._synced_lock:
            if self._synced_logged or not self.reflectors:
                return
            if all(r.synced.is_set() for r in self.reflectors):
                self._synced_logged = True
                objects = ", ".join(r.kind for r in self.reflectors)
                log.info("cache synced: every informer has listed", extra={"fields": {"informers": objects}})

    def stale(self) -> str | None:
        """Why the cache is stale (binds are refused), or None."""
        if self.discovery:
            return f"waiting for API discovery: {self.discovery}"
        for reflector in self.reflectors:
            down = reflector.down_for()
            if down > self.stale_after or not reflector.synced.is_set():
                what = "not listed yet" if not reflector.synced.is_set() else f"down for {down:.0f} s"
                return f"watch of {reflector.path} {what} ({reflector.last_error})"
        return None

    def not_ready(self) -> str | None:
        if self.discovery:
            return f"waiting for API discovery: {self.discovery}"
        if not self.reflectors or not all(r.synced.is_set() for r in self.reflectors):
            return "the cache has not synced"
        return self.stale()


#: Read-only resources that may be read at an older version than the one claims are written at.
READ_ELSEWHERE = ("devicetaintrules",)


def discover(raw: RawKube, health: ClusterHealth, stop: threading.Event) -> tuple[Paths, set[str]] | None:
    """The paths of the served resource.k8s.io version (and of a read-only resource served only
    at an older one: 1.36's DeviceTaintRules are v1beta2) and the resources served; retried with
    back-off until it works."""
    delay = 0.2
    rng = random.Random()
    failures = 0
    while not stop.is_set():
        try:
            version, *older = raw.served_dra_versions()
            served = raw.served_resources(version)
            elsewhere: dict[str, str] = {}
            for resource in READ_ELSEWHERE:
                if resource in served:
                    continue
                found = next((v for v in older if resource in raw.served_resources(v)), None)
                if found is not None:
                    elsewhere[resource] = found
            if failures:
                log.info("API discovery works again", extra={"fields": {"failures": failures}})
            return Paths(version, elsewhere), served | set(elsewhere)
        except ClusterAPIError as exc:
            # Once per outage (the retries at DEBUG), and a line when it works again.
            if not failures:
                log.warning("API discovery failed (retrying; logged again when it works): %s", exc)
            else:
                log.debug("API discovery failed again: %s", exc)
            failures += 1
            health.discovery = str(exc)
        stop.wait(delay * (0.5 + rng.random() / 2))
        delay = min(10.0, delay * 2)
    return None


def pod_group_version(raw: RawKube, stop: threading.Event) -> str | None:
    """The scheduling.k8s.io version to read PodGroups at, with DRAWorkloadResourceClaims on.

    None, with a warning, when the API server serves none (GenericWorkload off, or 1.36
    without ``--runtime-config scheduling.k8s.io/v1alpha2=true``): then a pod in a PodGroup is
    unschedulable with "podgroup ... not found", which is what kube-scheduler's lister says.
    A failed discovery is retried with back-off (the service is not ready meanwhile).
    """
    delay = 0.2
    while True:
        try:
            version = raw.pod_group_version()
            break
        except ClusterAPIError as exc:
            if delay == 0.2:
                log.warning(
                    "reading which %s versions serve podgroups failed (retrying): %s", SCHEDULING_GROUP, exc
                )
            if stop.wait(delay):
                return None
            delay = min(10.0, delay * 2)
    if version is None:
        log.warning(
            "DRAWorkloadResourceClaims is on but the API server serves no %s podgroups (%s)",
            SCHEDULING_GROUP,
            ", ".join(POD_GROUP_VERSIONS),
        )
    return version


def watched(paths: Paths, served: set[str], features: Features) -> list[tuple[str, str, str]]:
    """(kind, resource, group/version) of every kind to watch against this API server:
    DeviceTaintRules only with the gate on and served, PodGroups only where found, DRA kinds
    only where served (with a warning for each that is not)."""
    out = []
    for kind, resource in WATCHED:
        if resource == "devicetaintrules" and (not features.device_taint_rules or resource not in served):
            continue
        if resource == "podgroups":
            if paths.pod_groups is None:
                continue
            group_version = f"{SCHEDULING_GROUP}/{paths.pod_groups}"
        elif kind not in OUTSIDE_DRA and resource not in served:
            log.warning("%s/%s does not serve %s", RESOURCE_GROUP, paths.dra_version, resource)
            continue
        else:
            group_version = OUTSIDE_DRA.get(kind, f"{RESOURCE_GROUP}/{paths.version_of(resource)}")
        out.append((kind, resource, group_version))
    return out


def deciding_config(config: ServeConfig, server: ServerVersion, health: ClusterHealth) -> EngineConfig | None:
    """The engine's configuration for the API server's release (with --feature-gates judged
    against it), or the flags' when the release is not taken from the server; None when the
    gates cannot be had there (then the service stays not ready, with the reason)."""
    engine_config = config.engine
    if config.release_from_server:
        release, warning = release_for(server)
        if warning is not None:
            log.warning("%s", warning)
        try:
            features, ignored = features_for(release, config.gates)
        except FeatureGateError as exc:
            # Deciding without the gate would answer otherwise than kube-scheduler: never ready.
            log.error("%s (Kubernetes %s, from the API server)", exc, release.name)
            health.discovery = f"--feature-gates for Kubernetes {release.name}: {exc}"
            return None
        for line in ignored:
            log.warning("%s", line)
        engine_config = dataclasses.replace(engine_config, release=release, features=features)
    if engine_config.device_preemption:
        given = None if config.release_from_server else engine_config.release
        fallback = device_preemption_fallback(server, given)
        if fallback is not None:
            log.warning("%s", fallback)
            engine_config = dataclasses.replace(engine_config, device_preemption=False)
    log.info(
        "deciding as Kubernetes %s (API server %s)",
        engine_config.release.name,
        server.shown,
        extra={"fields": {"source": "API server" if config.release_from_server else "flag or default"}},
    )
    return engine_config


def leader_elector(raw: RawKube, config: ServeConfig) -> LeaseElector | None:
    """The Lease elector of ``--leader-elect`` (None without it)."""
    le = config.leader_election
    if le is None:
        return None
    return LeaseElector(
        raw,
        le.namespace,
        le.name,
        le.identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}",
        lease_duration=le.lease_duration,
        renew_deadline=le.renew_deadline,
        retry_period=le.retry_period,
        takeover_delay=write_window(config.api_timeout),
    )


def build_cluster(configuration: Any, config: ServeConfig) -> Service:
    """Against an API server: informers (raw list+watch) feed the cache; writes go to the server.

    Nothing here talks to the API server: discovery (retried until it works) and the informers
    start with the service, so an unreachable API server means "not ready", not a crash loop.
    """
    api_client = k8s.ApiClient(bounded_retries(configuration))
    raw = RawKube(api_client, timeout=config.api_timeout)
    state = ClusterState()
    features = config.engine.features
    cel = CelEnvironment(CelOptions(list_type_attributes=features.list_type_attributes))
    http = AsyncKube(configuration, timeout=config.api_timeout)
    kube_api = KubeAPI(http, None)
    worker = EngineWorker()
    view = in_flight_view(state, cel, config.engine)
    metrics = observed(state, cel, config.engine, view, worker)
    raw.observe = http.observe = metrics.api_request
    http.unknown = metrics.write_outcome_unknown
    stop = threading.Event()
    health = ClusterHealth(config.cache_stale_after)
    elector = leader_elector(raw, config)
    if elector is not None:
        # The fence: every write checks it right before it is sent, and the verbs refuse (and
        # close the connection, so kube-scheduler reconnects through the Service) at once.
        http.fence = elector.may_write
    engine = assemble(
        state,
        kube_api,
        cel,
        config.engine,
        observer=metrics,
        log_sink=decision_log(),
        fence=elector.may_write if elector is not None else lambda: None,
        cache_stale=health.stale,
        view=view,
    )

    election_thread: list[threading.Thread] = []
    election_stop = threading.Event()  # set after the writes have drained (see shutdown)
    # Informer events change the cache on the engine's loop, between decisions, in bursts.
    changes = Batches(worker)

    def sink_for(kind: str) -> Any:
        def deliver(etype: str, obj: dict[str, Any] | None, items: list[dict[str, Any]] | None) -> None:
            rv = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
            if etype == "SYNCED":
                changes.put(state.replace_kind, kind, items or [], rv)
            elif etype == "BOOKMARK":
                changes.put(state.observed, kind, rv)
            elif etype == "DELETED" and obj is not None:
                changes.put(state.remove, obj)
            elif obj is not None:
                changes.put(state.apply, obj)

        return deliver

    def start_watching() -> None:
        found = discover(raw, health, stop)
        if found is None:
            return
        server = ServerVersion.read(raw)
        while config.release_from_server and server.version is None and config.gates and not stop.is_set():
            # Gates are judged against the server's release: a guess could refuse them for good.
            health.discovery = f"reading /version: {server.error}"
            stop.wait(5.0)
            server = ServerVersion.read(raw)
        engine_config = deciding_config(config, server, health)
        if engine_config is None:
            return
        if engine_config != config.engine:
            changes.put(engine.reconfigure, engine_config)  # before any informer delivers an object
        features = engine_config.features
        paths, served = found
        if features.workload_resource_claims:
            paths = dataclasses.replace(paths, pod_groups=pod_group_version(raw, stop))
        kube_api.paths = paths
        reflectors: list[Reflector] = []
        optional: list[Reflector] = []
        for kind, resource, group_version in watched(paths, served, features):
            (optional if kind in OPTIONAL else reflectors).append(
                Reflector(
                    raw,
                    paths.collection(resource),
                    kind,
                    sink_for(kind),
                    stop,
                    api_version=group_version,
                    on_synced=health.reflector_synced,
                )
            )
        health.reflectors = reflectors
        health.discovery = ""
        for reflector in [*reflectors, *optional]:
            reflector.start()
        log.info(
            "watching %d resources (%s %s%s)",
            len(reflectors) + len(optional),
            RESOURCE_GROUP,
            paths.dra_version,
            "".join(f", {r} at {v}" for r, v in paths.elsewhere.items()),
        )
        if elector is not None:
            election_thread.append(elector.start(election_stop))

    async def startup() -> None:
        threading.Thread(target=start_watching, name="discovery", daemon=True).start()

    async def shutdown() -> None:
        stop.set()
        await kube_api.close()  # no write is sent from here on
        if elector is not None and elector.is_leader():
            # A successor that finds the Lease released writes at once: release it only when
            # no write of ours can still land (the lease keeps being renewed meanwhile).
            drained = http.last_write + write_window(config.api_timeout) - time.monotonic()
            if drained > 0:
                log.info("releasing the Lease in %.1fs, once no write of this replica can land", drained)
                await asyncio.sleep(drained)
        election_stop.set()
        # The elector releases the Lease as it stops (a successor takes over at once instead of
        # after a whole lease duration): wait for that, not for ever.
        for thread in election_thread:
            await asyncio.to_thread(thread.join, RELEASE_WAIT_SECONDS)

    def not_ready() -> str | None:
        reason = health.not_ready()
        if reason is None and elector is not None and not elector.is_leader():
            return "standby: not the leader (the cache is synced; another replica holds the Lease)"
        if reason is None and elector is not None:
            reason = elector.may_write()  # taking over: not deciding until writes may start
        return reason

    def informers() -> list[InformerState]:
        return [
            InformerState(
                r.path.rsplit("/", 1)[-1],
                r.synced.is_set(),
                None if r.last_event is None else max(0.0, r.clock() - r.last_event),
                r.down_for(),
                r.relists,
                r.errors,
            )
            for r in list(health.reflectors)
        ]

    metrics.watch_health(
        lambda: not_ready() is None, elector.is_leader if elector is not None else (lambda: True), informers
    )
    return Service(
        engine=engine,
        metrics=metrics,
        ready=lambda: not_ready() is None,
        not_ready=not_ready,
        worker=worker,
        mode="cluster",
        startup=startup,
        shutdown=shutdown,
        fence=elector.may_write if elector is not None else None,
    )
