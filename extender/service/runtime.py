"""Building a running service from configuration: the one place that wires everything."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import orjson

from extender.cel import CelEnvironment, CelOptions
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import Event, MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.engine import Engine, EngineConfig
from extender.service.app import DEFAULT_MAX_BODY_BYTES, Service
from extender.service.metrics import Metrics
from extender.statefile import load_objects

log = logging.getLogger("dra_extender")


@dataclass(frozen=True)
class ServeConfig:
    engine: EngineConfig = field(default_factory=EngineConfig)
    prefix: str = "/scheduler"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES


def follow(store: MemoryStore, state: ClusterState) -> None:
    """Keep ``state`` equal to ``store``: the embedded default's informer."""

    def on_event(event: Event) -> None:
        if event.type == "DELETED":
            state.remove(event.object)
        else:
            state.apply(event.object)

    store.subscribe(on_event)


def build_embedded(paths: Sequence[str], config: ServeConfig) -> tuple[Service, MemoryStore]:
    """The embedded default: state files in an in-memory store that plays the API server."""
    objects, problems = load_objects(paths)
    store = MemoryStore()
    state = ClusterState()
    follow(store, state)
    store.load(objects)
    for problem in [*problems, *state.problems]:
        log.warning("state: %s", problem)
    features = config.engine.features
    cel = CelEnvironment(CelOptions(list_type_attributes=features.list_type_attributes))
    api = MemoryAPI(store)
    engine = Engine(state, api, cel, config.engine)
    metrics = Metrics(state.counts, lambda: len(engine.in_flight))
    engine.observer = metrics
    decisions = logging.getLogger("dra_extender.decisions")
    engine.log_sink = lambda entry: decisions.info("%s", orjson.dumps(entry).decode())
    engine.snapshot()  # index the inventory now, not on the first request
    return Service(engine=engine, metrics=metrics, ready=lambda: True, mode="embedded"), store


class JsonFormatter(logging.Formatter):
    """One JSON object per line (time, level, logger, message)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


def configure_logging(level: str, log_format: str) -> None:
    handler = logging.StreamHandler()
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
