"""Devices kept after prioritize for the bind kube-scheduler has probably decided
(``--hold-after-prioritize``, issue 30 item 5)."""

from __future__ import annotations

import asyncio
from typing import Any

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.engine import Engine
from tests.builders import allocated, claim, device, device_class, node, pod, reserve, resource_slice

NODES = ["node-1", "node-2"]


def cluster(**config: Any) -> tuple[Engine, MemoryStore, list[float]]:
    """node-1 has one GPU free of four (binpack scores it best), node-2 four."""
    objects: list[dict[str, Any]] = [device_class()]
    for n in NODES:
        objects += [
            node(n),
            resource_slice(f"{n}-gpus", [device(f"gpu-{i}") for i in range(4)], pool=n, node=n),
        ]
    busy = claim("busy", allocation=allocated(*(("driver-a", "node-1", f"gpu-{i}") for i in range(3))))
    reserve(busy, "runner")
    objects += [busy, pod("runner", ["busy"], node_name="node-1")]
    for name in ("a", "b"):
        objects += [claim(f"{name}-claim"), pod(name, [f"{name}-claim"])]
    store = MemoryStore()
    store.load(objects)
    now = [100.0]
    engine = assemble(
        ClusterState.from_objects(objects),
        MemoryAPI(store),
        CelEnvironment(),
        EngineConfig(**config),
        clock=lambda: now[0],
    )
    return engine, store, now


def prioritize(e: Engine, name: str) -> dict[str, int]:
    return dict(e.prioritize(e.state.pods[("default", name)], NODES))


def filtered(e: Engine, name: str) -> list[str]:
    return e.filter(e.state.pods[("default", name)], NODES).passed


def test_the_best_node_s_devices_are_kept_until_the_bind() -> None:
    e, store, _now = cluster(hold_seconds=1.0)
    assert prioritize(e, "a")["node-1"] > prioritize(e, "b")["node-2"]
    # a's bind has not come yet: b no longer sees node-1's last GPU free.
    assert filtered(e, "b") == ["node-2"]
    assert not store.get("ResourceClaim", "default", "a-claim").get("status"), "a hold writes nothing"
    assert asyncio.run(e.bind("default", "a", "uid-a", "node-1")) == ""
    assert store.get("ResourceClaim", "default", "a-claim")["status"]["allocation"]


def test_off_by_default() -> None:
    e, _store, _now = cluster()
    prioritize(e, "a")
    assert filtered(e, "b") == NODES


def test_a_hold_ends_after_its_seconds() -> None:
    e, _store, now = cluster(hold_seconds=1.0)
    prioritize(e, "a")
    now[0] += 1.5  # a was bound elsewhere by another path, or not at all
    assert filtered(e, "b") == NODES


def test_the_pod_s_next_filter_ends_its_hold() -> None:
    e, _store, _now = cluster(hold_seconds=1.0)
    prioritize(e, "a")
    assert filtered(e, "a") == NODES  # its own hold does not count against it
    assert filtered(e, "b") == NODES


def test_a_bind_to_another_node_ends_the_hold() -> None:
    e, _store, _now = cluster(hold_seconds=1.0)
    prioritize(e, "a")
    assert asyncio.run(e.bind("default", "a", "uid-a", "node-2")) == ""
    assert filtered(e, "b") == NODES


def test_no_hold_on_a_tie() -> None:
    e, store, _now = cluster(hold_seconds=1.0)

    def free(obj: dict[str, Any]) -> None:
        obj["status"] = {}

    store.mutate("ResourceClaim", "default", "busy", free)
    e.state.apply(store.get("ResourceClaim", "default", "busy"))
    scores = prioritize(e, "a")
    assert scores["node-1"] == scores["node-2"]
    assert not e.tracker.assumed.holding
