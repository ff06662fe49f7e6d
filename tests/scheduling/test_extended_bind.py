"""Binding pods with extended resources, under faults, on the embedded store (the engine's view
is not trusted: every assertion reads the store, which plays the API server)."""

from __future__ import annotations

import asyncio
from typing import Any

from extender.cluster.memstore import MemoryStore
from extender.model.core import parse_pod
from extender.scheduling.engine import Engine
from tests.builders import container, device, device_class, node, pod, resource_slice, with_allocatable
from tests.service.test_bind import FaultyAPI, api_error, bind_concurrently, engine_for

ER = "example.com/gpu"


def cluster() -> list[dict[str, Any]]:
    """node-1: two devices through DRA; node-2: a device plugin offering example.com/gpu."""
    return [
        device_class("gpu", extended_resource=ER),
        resource_slice("s", [device("d0"), device("d1")]),
        node("node-1"),
        with_allocatable(node("node-2"), {ER: 4}),
        pod("p", containers=[container("main", {ER: 1})]),
        pod("q", containers=[container("main", {ER: 2})]),
    ]


def setup(tmp_path: Any) -> tuple[Engine, MemoryStore, FaultyAPI]:
    return engine_for(cluster(), tmp_path)


def claims(store: MemoryStore) -> list[dict[str, Any]]:
    return store.objects("ResourceClaim")


def pod_status(store: MemoryStore, name: str) -> dict[str, Any]:
    status: dict[str, Any] = store.get("Pod", "default", name).get("status") or {}
    return status


def filter_q(engine: Engine, store: MemoryStore) -> list[str]:
    """Filter pod q on node-1, then let the background work it started (PostFilter) run."""

    async def filter_then_wait() -> list[str]:
        result = engine.filter(parse_pod(store.get("Pod", "default", "q")), ["node-1"])
        await asyncio.sleep(0.05)
        return result.passed

    return asyncio.run(filter_then_wait())


def bind(engine: Engine, name: str, node_name: str) -> str:
    return asyncio.run(engine.bind("default", name, f"uid-{name}", node_name))


def test_a_refused_binding_takes_back_the_claim_and_the_pod_status(tmp_path: Any) -> None:
    engine, store, api = setup(tmp_path)
    api.fail["bind_pod"] = [api_error(422)]
    assert "422" in bind(engine, "p", "node-1")
    assert claims(store) == []
    assert "extendedResourceClaimStatus" not in pod_status(store, "p")
    # The retry lands on the device-plugin node: no claim, and no status naming a deleted one.
    assert bind(engine, "p", "node-2") == ""
    assert claims(store) == [] and "extendedResourceClaimStatus" not in pod_status(store, "p")


def test_a_status_left_by_an_earlier_attempt_is_cleared_before_binding(tmp_path: Any) -> None:
    engine, store, api = setup(tmp_path)
    api.fail["bind_pod"] = [api_error(422)]
    # The release's clearing of the pod status is refused: it still names the deleted claim.
    original = api.patch_pod_status
    refused: list[str] = []

    async def flaky(namespace: str, name: str, uid: str, status: dict[str, Any]) -> dict[str, Any]:
        if status["extendedResourceClaimStatus"] is None and not refused:
            refused.append(name)
            raise api_error(403)
        return await original(namespace, name, uid, status)

    api.patch_pod_status = flaky  # type: ignore[method-assign]
    assert "422" in bind(engine, "p", "node-1")
    assert pod_status(store, "p")["extendedResourceClaimStatus"]["resourceClaimName"]
    assert bind(engine, "p", "node-2") == ""
    assert "extendedResourceClaimStatus" not in pod_status(store, "p")


def test_a_refused_status_write_deletes_the_claim_for_good(tmp_path: Any) -> None:
    # The finalizer was added (first step of the status write), then the status write refused:
    # the claim is deleted entirely, not left deleting behind its finalizer.
    engine, store, api = setup(tmp_path)
    api.fail["update_claim_status"] = [api_error(422)]
    assert "422" in bind(engine, "p", "node-1")
    assert claims(store) == []
    assert bind(engine, "p", "node-1") == ""
    [created] = claims(store)
    assert created["status"]["reservedFor"][0]["uid"] == "uid-p"


def test_a_refused_create_leaves_nothing(tmp_path: Any) -> None:
    engine, store, api = setup(tmp_path)
    api.fail["create_claim"] = [api_error(403)]
    assert "403" in bind(engine, "p", "node-1")
    assert claims(store) == []
    assert len(engine.tracker.assumed) == 0  # nothing held: a refused create took no device


def test_a_claim_kept_after_an_unanswered_binding_is_not_deleted_by_postfilter(tmp_path: Any) -> None:
    # The Binding may still land: the claim it needs must stay, even though the next attempt's
    # filter finds it (and would otherwise delete it, as upstream PostFilter does).
    engine, store, api = setup(tmp_path)
    api.fail["bind_pod"] = [api_error(0, "connection reset")]
    api.fail["get_pod"] = [api_error(503)]
    assert "outcome unknown" in bind(engine, "q", "node-1")
    [kept] = claims(store)

    assert filter_q(engine, store) == []
    assert claims(store) == [kept]


def test_postfilter_deletes_a_leftover_claim(tmp_path: Any) -> None:
    engine, store, api = setup(tmp_path)
    # A bind that could record the claim in the pod's status neither, nor delete it afterwards:
    # the claim is left allocated and reserved for the unbound pod (as after a crash).
    api.fail["patch_pod_status"] = [api_error(0, "connection reset")] * 5
    api.fail["delete_claim"] = [api_error(503)]
    assert "connection reset" in bind(engine, "q", "node-1")
    [left] = claims(store)
    assert left["status"]["reservedFor"][0]["uid"] == "uid-q"

    assert filter_q(engine, store) == []
    assert claims(store) == []
    assert filter_q(engine, store) == ["node-1"]
    assert bind(engine, "q", "node-1") == ""


def test_concurrent_binds_of_extended_pods_never_share_a_device(tmp_path: Any) -> None:
    objects = [
        device_class("gpu", extended_resource=ER),
        resource_slice("s", [device(f"d{i}") for i in range(3)]),
        node("node-1"),
        *(pod(f"p{i}", containers=[container("main", {ER: 1})]) for i in range(8)),
    ]
    engine, store, api = engine_for(objects, tmp_path)

    errors = bind_concurrently(engine, api, [f"p{i}" for i in range(8)], "node-1", delay=0.01)
    assert sum(1 for e in errors if e == "") == 3
    held = [
        r["device"]
        for c in claims(store)
        for r in (c.get("status") or {}).get("allocation", {}).get("devices", {}).get("results", [])
    ]
    assert sorted(held) == ["d0", "d1", "d2"]
