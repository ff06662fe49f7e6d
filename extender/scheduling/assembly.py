"""Building an engine with its parts, in one place: the tracker (in-flight state), the
snapshots over the cache and the tracker, the binder (the write room) and the engine (the
verbs). Each part gets what it uses when it is made; nothing is set afterwards.

``service/runtime.py`` builds the service's engine here; tests, benchmarks and ``simulate`` too.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from extender.cel import CelEnvironment
from extender.cluster.api import ClusterAPI
from extender.cluster.state import ClusterState
from extender.scheduling.config import EngineConfig, Observer
from extender.scheduling.decision_log import DecisionLog, Sink
from extender.scheduling.engine import Engine
from extender.scheduling.hint_line import Hints
from extender.scheduling.inflight.snapshots import Snapshots
from extender.scheduling.inflight.tracker import Tracker
from extender.scheduling.write.binder import Binder


def in_flight_view(
    state: ClusterState,
    cel: CelEnvironment,
    config: EngineConfig,
    *,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
) -> tuple[Tracker, Snapshots]:
    """The tracker, and the snapshots that lay its writes over the cache (metrics read both,
    so the service makes them before the engine)."""
    tracker = Tracker(clock, preemption_memory_seconds=config.preemption_memory_seconds)
    return tracker, Snapshots(state, tracker, cel, config, clock=clock, wall_clock=wall_clock)


def assemble(
    state: ClusterState,
    api: ClusterAPI,
    cel: CelEnvironment,
    config: EngineConfig | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], float] = time.time,
    observer: Observer | None = None,
    log_sink: Sink | None = None,
    fence: Callable[[], str | None] = lambda: None,
    cache_stale: Callable[[], str | None] = lambda: None,
    view: tuple[Tracker, Snapshots] | None = None,
    hints: Hints | None = None,
) -> Engine:
    """An engine over ``state`` that writes through ``api``. ``fence``: why this replica may not
    write now (leader election), or None; ``cache_stale``: why the cache cannot be trusted for
    binding now, or None; ``view``: the tracker and snapshots, when made beforehand; ``hints``: the
    background make-room planner of filter's hint line (the service's), or none."""
    config = config or EngineConfig()
    tracker, snapshots = view or in_flight_view(state, cel, config, clock=clock, wall_clock=wall_clock)
    log = DecisionLog(config.decision_log_size, clock=clock, wall_clock=wall_clock, sink=log_sink)
    binder = Binder(
        state,
        api,
        config,
        tracker,
        snapshots,
        clock=clock,
        wall_clock=wall_clock,
        log=log,
        observer=observer,
        fence=fence,
        cache_stale=cache_stale,
    )
    return Engine(
        state,
        cel,
        config,
        tracker,
        snapshots,
        binder,
        log,
        clock=clock,
        wall_clock=wall_clock,
        observer=observer,
        hints=hints,
    )
