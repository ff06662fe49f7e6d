"""Cluster mode: the service against a real API server (informers feed the cache, writes go to
the server, an optional Lease decides which replica may write).

Nothing here talks to the API server while building: discovery (retried until it works) and
the informers start with the service, so an unreachable API server means "not ready", not a
crash loop. :func:`build_cluster` is the one place that wires cluster mode; its running parts
are a :class:`ClusterMode`, whose methods are the service's start, stop and readiness.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import threading
import time
import uuid
from typing import Any

from kubernetes import client as k8s

from extender.allocator import FeatureGateError, Features
from extender.cel import CelEnvironment, CelOptions
from extender.cluster import store_fence
from extender.cluster.api import ClusterAPIError
from extender.cluster.async_kube import AsyncKube, write_window
from extender.cluster.discovery import discover_once, watched
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
from extender.cluster.reflector import Reflector
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble, in_flight_view
from extender.scheduling.config import EngineConfig
from extender.service.app import Service, replica_name
from extender.service.logs import decision_log
from extender.service.metrics import InformerState
from extender.service.runtime import ServeConfig, hint_planner, make_room_mover, observed
from extender.service.versions import ServerVersion, device_preemption_fallback, features_for, release_for
from extender.service.worker import Batches, EngineWorker

log = logging.getLogger("dra_extender")
#: How long a graceful shutdown waits for the Lease to be released.
RELEASE_WAIT_SECONDS = 5.0
#: How often delete protection that protects nothing is looked for (:meth:`ClusterMode.sweep_finalizers`).
FINALIZER_SWEEP_SECONDS = 5.0
#: How often the store fence's installation is read again.
STORE_FENCE_CHECK_SECONDS = 300.0

#: Informers whose outage does not make the cache stale: allocation and binding never read them
#: (without PodDisruptionBudgets, preemption spares no pod for a budget it does not know).
OPTIONAL = {"PodDisruptionBudget"}


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


def discover(raw: RawKube, health: ClusterHealth, stop: threading.Event) -> tuple[Paths, set[str]] | None:
    """The paths of the served resource.k8s.io version (and of a read-only resource served only
    at an older one: 1.36's DeviceTaintRules are v1beta2) and the resources served; retried with
    back-off until it works."""
    delay = 0.2
    rng = random.Random()
    failures = 0
    while not stop.is_set():
        try:
            found = discover_once(raw)
            if failures:
                log.info("API discovery works again", extra={"fields": {"failures": failures}})
            return found
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


def default_identity() -> str:
    """``<pod name>_<random>``, as kube-scheduler's ``<hostname>_<uuid>``: the store fence
    (``manifests/*leader-fence.yaml``) admits writes from the pod whose name starts the Lease
    holder's identity. The pod name comes from ``$POD_NAME`` (the manifests set it from the
    downward API), else the hostname (a pod's, unless it runs on the host's network)."""
    return f"{replica_name()}_{uuid.uuid4().hex[:8]}"


def leader_elector(raw: RawKube, config: ServeConfig) -> LeaseElector | None:
    """The Lease elector of ``--leader-elect`` (None without it)."""
    le = config.leader_election
    if le is None:
        return None
    return LeaseElector(
        raw,
        le.namespace,
        le.name,
        le.identity or default_identity(),
        lease_duration=le.lease_duration,
        renew_deadline=le.renew_deadline,
        retry_period=le.retry_period,
        takeover_delay=write_window(config.api_timeout),
    )


def build_cluster(configuration: Any, config: ServeConfig) -> Service:
    """The service against the API server ``configuration`` names."""
    return ClusterMode(configuration, config).service()


class ClusterMode:
    """Cluster mode's parts: the API clients, the cache and its informers, the engine, the Lease
    elector; and the service's start (discovery, informers, election), stop and readiness."""

    def __init__(self, configuration: Any, config: ServeConfig) -> None:
        self.config = config
        self.raw = RawKube(k8s.ApiClient(bounded_retries(configuration)), timeout=config.api_timeout)
        self.http = AsyncKube(configuration, timeout=config.api_timeout)
        self.kube_api = KubeAPI(self.http, None)
        self.state = ClusterState()
        self.health = ClusterHealth(config.cache_stale_after)
        self.stop = threading.Event()
        #: Set after the writes have drained (see :meth:`shutdown`).
        self.election_stop = threading.Event()
        self.election_threads: list[threading.Thread] = []
        self.elector = leader_elector(self.raw, config)
        fence = self.elector.may_write if self.elector is not None else (lambda: None)
        if self.elector is not None:
            # The fence: every write checks it right before it is sent, and the verbs refuse (and
            # close the connection, so kube-scheduler reconnects through the Service) at once.
            self.http.fence = self.elector.may_write
        features = config.engine.features
        cel = CelEnvironment(CelOptions(list_type_attributes=features.list_type_attributes))
        self.worker = EngineWorker()
        view = in_flight_view(self.state, cel, config.engine)
        self.metrics = observed(self.state, cel, config.engine, view, self.worker)
        self.raw.observe = self.http.observe = self.metrics.api_request
        self.http.unknown = self.metrics.write_outcome_unknown
        self.http.fenced = self._refused_by_fence
        self.engine = assemble(
            self.state,
            self.kube_api,
            cel,
            config.engine,
            observer=self.metrics,
            log_sink=decision_log(),
            fence=fence,
            cache_stale=self.health.stale,
            view=view,
            hints=hint_planner(self.state, cel, config.engine, view, self.worker, self.metrics),
        )
        self.mover = make_room_mover(self.engine, self.kube_api, self.metrics, self.mover_leads)
        self._unsure_logged = False
        # Informer events change the cache on the engine's loop, between decisions, in bursts.
        self.changes = Batches(self.worker)
        self._sweeping: asyncio.Task[None] | None = None
        #: What the store fence check found last (:meth:`watch_store_fence`).
        self.fence_state = store_fence.FenceState("unknown", "not read yet")

    def service(self) -> Service:
        leading = self.elector.is_leader if self.elector is not None else (lambda: True)
        self.metrics.watch_health(lambda: self.not_ready() is None, leading, self.informers)
        self.metrics.watch_entries(self.engine.entries)
        return Service(
            engine=self.engine,
            metrics=self.metrics,
            ready=lambda: self.not_ready() is None,
            not_ready=self.not_ready,
            worker=self.worker,
            mode="cluster",
            startup=self.startup,
            shutdown=self.shutdown,
            fence=self.elector.may_write if self.elector is not None else None,
        )

    # --- start ------------------------------------------------------------------------------------

    async def startup(self) -> None:
        threading.Thread(target=self.start_watching, name="discovery", daemon=True).start()
        self._sweeping = asyncio.get_running_loop().create_task(self.sweep_finalizers())
        if self.mover is not None:
            await self.mover.start()

    async def sweep_finalizers(self) -> None:
        """Every :data:`FINALIZER_SWEEP_SECONDS`, on the engine's loop: delete protection that
        protects nothing, left by a replica deposed between its finalizer and its allocation,
        is removed once it has stood longer than twice the write window (no write of a deposed
        replica can still land by then)."""
        grace = 2 * write_window(self.config.api_timeout)
        while not self.stop.is_set():
            await asyncio.sleep(FINALIZER_SWEEP_SECONDS)
            try:
                if await self._fence_admits_us():
                    await self.engine.binder.sweep_finalizers(grace)
            except Exception:  # never let the sweep die: it runs for the life of the service
                log.exception("sweeping stale finalizers")

    async def _fence_admits_us(self) -> bool:
        """Without an election of its own (the sidecar), whether the store fence would admit this
        replica's writes now: the standby pod's extender does not sweep. With one, the process
        fence decides (the binder checks it)."""
        fence = self.fence_state
        if self.elector is not None or fence.lease is None:
            return True
        ns, name = fence.lease
        path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"
        try:
            lease = await asyncio.to_thread(self.raw.request, "GET", path)
        except ClusterAPIError:
            return False
        return fence.admits((lease.get("spec") or {}).get("holderIdentity"))

    async def mover_leads(self) -> bool:
        """Whether the make-room mover may evict now: with ``--leader-elect``, while this replica
        leads; in the sidecar, while the store fence's Lease names this pod (its kube-scheduler
        leads). A sidecar that cannot tell (no fence installed) never moves a pod: a standby
        replica must not evict."""
        if self.elector is not None:
            # Not only holding the Lease: past a takeover's write window too, or the eviction
            # would be refused by the process fence and the plan abandoned.
            return self.elector.may_write() is None
        if self.fence_state.lease is None:
            if not self._unsure_logged:
                self._unsure_logged = True
                log.warning(
                    "make room: not moving pods: without --leader-elect or the store fence "
                    "(manifests/leader-fence.yaml: %s) this replica cannot tell whether it leads",
                    self.fence_state.detail,
                )
            return False
        return await self._fence_admits_us()

    def start_watching(self) -> None:
        """Discovery, the release to decide as, then the informers and the election (on a
        thread of its own: each step is retried until it works or the service stops)."""
        found = discover(self.raw, self.health, self.stop)
        if found is None:
            return
        engine_config = self._engine_config()
        if engine_config is None:
            return
        if engine_config != self.config.engine:
            self.changes.put(self.engine.reconfigure, engine_config)  # before any informer delivers
        paths, served = found
        if engine_config.features.workload_resource_claims:
            paths = dataclasses.replace(paths, pod_groups=pod_group_version(self.raw, self.stop))
        self.kube_api.paths = paths
        self._start_informers(paths, served, engine_config.features)
        if self.elector is not None:
            self.election_threads.append(self.elector.start(self.election_stop))
        threading.Thread(target=self.watch_store_fence, name="store-fence", daemon=True).start()

    def _refused_by_fence(self, resource: str, message: str) -> None:
        """The API server refused a write: another replica holds the Lease. Stand down now (the
        verbs answer "not leading" and kube-scheduler goes to the replica that leads)."""
        self.metrics.refused_by_fence(resource)
        if self.elector is not None:
            self.elector.deposed(message)

    def watch_store_fence(self) -> None:
        """Whether the API server itself refuses this replica's writes when it does not lead
        (:mod:`extender.cluster.store_fence`): at start, then every
        :data:`STORE_FENCE_CHECK_SECONDS`, logged when it changes."""
        le = self.config.leader_election
        lease = (le.namespace, le.name) if le is not None else None
        identity = self.elector.identity if self.elector is not None else None
        last = None
        while True:
            found = store_fence.read(self.raw, identity, lease)
            self.fence_state = found
            self.metrics.store_fence_is(found.state)
            if found != last:
                level = logging.INFO if found.state == "enforced" else logging.WARNING
                log.log(level, "store fence %s: %s", found.state, found.detail)
                last = found
            if self.stop.wait(STORE_FENCE_CHECK_SECONDS):
                return

    def _engine_config(self) -> EngineConfig | None:
        """The configuration to decide with, for the API server's release (None: none can be)."""
        server = ServerVersion.read(self.raw)
        while self.config.release_from_server and server.version is None and self.config.gates:
            if self.stop.is_set():
                return None
            # Gates are judged against the server's release: a guess could refuse them for good.
            self.health.discovery = f"reading /version: {server.error}"
            self.stop.wait(5.0)
            server = ServerVersion.read(self.raw)
        return deciding_config(self.config, server, self.health)

    def _start_informers(self, paths: Paths, served: set[str], features: Features) -> None:
        reflectors: list[Reflector] = []
        optional: list[Reflector] = []
        for kind, resource, group_version in watched(
            paths, served, device_taint_rules=features.device_taint_rules
        ):
            (optional if kind in OPTIONAL else reflectors).append(
                Reflector(
                    self.raw,
                    paths.collection(resource),
                    kind,
                    self._deliver_to_cache(kind),
                    self.stop,
                    api_version=group_version,
                    on_synced=self.health.reflector_synced,
                )
            )
        self.health.reflectors = reflectors
        self.health.discovery = ""
        for reflector in [*reflectors, *optional]:
            reflector.start()
        log.info(
            "watching %d resources (%s %s%s)",
            len(reflectors) + len(optional),
            RESOURCE_GROUP,
            paths.dra_version,
            "".join(f", {r} at {v}" for r, v in paths.elsewhere.items()),
        )

    def _deliver_to_cache(self, kind: str) -> Any:
        """An informer's sink: its events change the cache on the engine's loop."""
        state, changes = self.state, self.changes

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

    # --- stop -------------------------------------------------------------------------------------

    async def shutdown(self) -> None:
        self.stop.set()
        if self._sweeping is not None:
            self._sweeping.cancel()
        if self.mover is not None:
            await self.mover.close()  # its hold goes; no eviction is sent from here on
        await self.kube_api.close()  # no write is sent from here on
        if self.elector is not None and self.elector.is_leader():
            # A successor that finds the Lease released writes at once: release it only when
            # no write of ours can still land (the lease keeps being renewed meanwhile).
            drained = self.http.last_write + write_window(self.config.api_timeout) - time.monotonic()
            if drained > 0:
                log.info("releasing the Lease in %.1fs, once no write of this replica can land", drained)
                await asyncio.sleep(drained)
        self.election_stop.set()
        # The elector releases the Lease as it stops (a successor takes over at once instead of
        # after a whole lease duration): wait for that, not for ever.
        for thread in self.election_threads:
            await asyncio.to_thread(thread.join, RELEASE_WAIT_SECONDS)

    # --- readiness --------------------------------------------------------------------------------

    def not_ready(self) -> str | None:
        reason = self.health.not_ready()
        if reason is None and self.elector is not None and not self.elector.is_leader():
            return "standby: not the leader (the cache is synced; another replica holds the Lease)"
        if reason is None and self.elector is not None:
            reason = self.elector.may_write()  # taking over: not deciding until writes may start
        return reason

    def informers(self) -> list[InformerState]:
        return [
            InformerState(
                r.path.rsplit("/", 1)[-1],
                r.synced.is_set(),
                None if r.last_event is None else max(0.0, r.clock() - r.last_event),
                r.down_for(),
                r.relists,
                r.errors,
            )
            for r in list(self.health.reflectors)
        ]
