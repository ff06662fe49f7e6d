"""A bind for a pod the extender's watch has not delivered yet: the API server is asked.

A real kube-scheduler 1.36 bound a pod within milliseconds of its creation, before the
extender's own pod watch had it ("pod not found in the DRA extender's cache").
"""

from __future__ import annotations

import asyncio

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.engine import Engine
from tests.builders import claim, device, device_class, node, pod, resource_slice

CLUSTER = [device_class(), claim("c"), node("node-1"), resource_slice("s", [device("d0")])]


def engine_without_the_pod() -> tuple[Engine, MemoryStore]:
    store = MemoryStore()
    store.load([*CLUSTER, pod("p", ["c"])])
    state = ClusterState.from_objects(CLUSTER)  # the cache has not seen the pod
    return assemble(state, MemoryAPI(store), CelEnvironment()), store


def test_a_pod_missing_from_the_cache_is_read_from_the_api_server_and_bound() -> None:
    engine, store = engine_without_the_pod()
    assert ("default", "p") not in engine.state.pods
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert store.get("Pod", "default", "p")["spec"]["nodeName"] == "node-1"
    status = store.get("ResourceClaim", "default", "c")["status"]
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == ["d0"]
    assert status["reservedFor"][0]["uid"] == "uid-p"


def test_another_pod_of_that_name_is_not_bound() -> None:
    engine, store = engine_without_the_pod()
    error = asyncio.run(engine.bind("default", "p", "uid-of-a-replaced-pod", "node-1"))
    assert error == "pod not found (neither in the DRA extender's cache nor in the API server)"
    assert "nodeName" not in store.get("Pod", "default", "p")["spec"]
    assert "status" not in store.get("ResourceClaim", "default", "c") or not store.get(
        "ResourceClaim", "default", "c"
    )["status"].get("allocation")


def test_names_no_pod_can_have_are_not_sent_to_the_api_server() -> None:
    engine, _store = engine_without_the_pod()
    asked: list[tuple[str, str]] = []
    original = engine.binder.api.get_pod

    async def recording(namespace: str, name: str) -> dict[str, object]:
        asked.append((namespace, name))
        return await original(namespace, name)

    engine.binder.api.get_pod = recording  # type: ignore[method-assign]
    for namespace, name in [("default", "?watch=true"), ("../..", "p"), ("default", "a/b"), ("Default", "p")]:
        error = asyncio.run(engine.bind(namespace, name, "uid-p", "node-1"))
        assert error.startswith("pod not found"), error
    assert asked == []
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert asked == [("default", "p")]
