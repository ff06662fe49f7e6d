"""An engine over an in-memory API server holding some objects: what the write-path tests use to
compare the store afterwards with upstream's expectations."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from extender.allocator import Features
from extender.allocator.releases import Release
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.engine import Engine
from extender.service.runtime import follow


def engine_on_store(
    objects: Iterable[dict[str, Any]],
    gates: str,
    release: Release,
    *,
    api: type[MemoryAPI] = MemoryAPI,
    following: bool = True,
) -> tuple[Engine, MemoryStore]:
    """``objects`` in a store; an engine whose cache follows it (``following``: with every change;
    else it keeps what the store held at the start, as a lagging watch) and writes to it."""
    store = MemoryStore()
    store.load(objects)
    state = ClusterState()
    for obj in store.all():
        state.apply(obj)
    if following:
        follow(store, state)
    features = Features.parse(gates, allow_locked=True, release=release)
    config = EngineConfig(features=features, release=release)
    return assemble(state, api(store), CelEnvironment(), config), store
