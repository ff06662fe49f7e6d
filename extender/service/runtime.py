"""Building a running service from configuration: the embedded default, and the parts every
mode has (the metrics); cluster mode is wired in :mod:`extender.service.cluster_mode`."""

from __future__ import annotations

import logging
import logging.handlers
import time
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from extender.cel import CelEnvironment, CelOptions
from extender.cluster.api import ClusterAPI
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import Event, MemoryStore
from extender.cluster.owner_gc import collect_owned_claims
from extender.cluster.state import KINDS, ClusterState, Key
from extender.defaults import DEFAULT_MAX_STATE_BYTES
from extender.scheduling.assembly import assemble, in_flight_view
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.capacity import capacity_steps
from extender.scheduling.decide.class_health import classes_not_compiling
from extender.scheduling.decide.held_claims import held_claim_steps
from extender.scheduling.engine import Engine
from extender.scheduling.inflight.snapshots import Snapshots
from extender.scheduling.inflight.tracker import Tracker
from extender.scheduling.make_room_hints import HintPlanner
from extender.scheduling.make_room_mover import Mover
from extender.service.app import DEFAULT_MAX_BODY_BYTES, Service
from extender.service.logs import decision_log
from extender.service.metrics import LoopFeed, Metrics
from extender.service.worker import EngineWorker
from extender.statefile import load_objects

log = logging.getLogger("dra_extender")


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
    loading: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> tuple[Service, MemoryStore]:
    """The embedded default: state files in an in-memory store that plays the API server
    (``api``: how writes reach the store; tests put faults in between). ``loading``: what
    the state's loading runs inside (``serve`` pauses the garbage collector there)."""
    features = config.engine.features
    cel = CelEnvironment(CelOptions(list_type_attributes=features.list_type_attributes))
    store = MemoryStore()
    state = ClusterState()
    follow(store, state)
    collect_owned_claims(store)
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
        hints=hint_planner(state, cel, config.engine, view, worker, metrics, clock=clock),
    )
    with loading():
        objects, problems = load_objects(paths, max_bytes=config.max_state_bytes, kinds=KINDS)
        store.load(objects, owned=True)  # freshly decoded: nobody else holds them
        engine.snapshot()  # index the inventory now, not on the first request
    for problem in [*problems, *state.problems]:
        log.warning("state: %s", problem)
    log.info("deciding as Kubernetes %s", config.engine.release.name)
    mover = make_room_mover(engine, engine.binder.api, metrics, always_leading, clock=clock)
    service = Service(
        engine=engine,
        metrics=metrics,
        ready=lambda: True,
        mode="embedded",
        worker=worker,
        startup=mover.start if mover is not None else None,
        shutdown=mover.close if mover is not None else None,
    )
    metrics.watch_health(lambda: True, lambda: True, list)  # the store is the cache: no informers
    metrics.watch_entries(engine.entries)
    return service, store


def hint_planner(
    state: ClusterState,
    cel: CelEnvironment,
    config: EngineConfig,
    view: tuple[Tracker, Snapshots],
    worker: EngineWorker,
    metrics: Metrics,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> HintPlanner:
    """Filter's make-room hint line, planned off filter's path: what it reads is copied on the
    engine's loop after the verb that asked (``worker.call_soon``), the plan made on a thread of
    its own (:mod:`extender.scheduling.make_room_hints`)."""
    return HintPlanner(state, view[1], cel, config, clock=clock, schedule=worker.call_soon, observer=metrics)


async def always_leading() -> bool:
    """The embedded default has one replica: it always leads."""
    return True


def make_room_mover(
    engine: Engine,
    api: ClusterAPI,
    metrics: Metrics,
    leading: Callable[[], Awaitable[bool]],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Mover | None:
    """The make-room mover (``--make-room``; :mod:`extender.scheduling.make_room_mover`), over
    the engine's cache, tracker and background planner, writing through ``api``; None when off.
    ``leading``: whether this replica may move pods now."""
    if not engine.config.mover.on or not isinstance(engine.hints, HintPlanner):
        return None
    return Mover(
        engine.state,
        engine.tracker,
        engine.snapshots,
        api,
        engine.hints,
        lambda: engine.config,
        clock=clock,
        wall_clock=time.time,
        leading=leading,
        observer=metrics,
    )


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
