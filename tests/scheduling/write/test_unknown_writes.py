"""A claim write whose outcome is unknown, sent again by the pod's next bind (PodClaimWrites.
settle_earlier), on an in-memory API server.

Found by the failover run on the real control plane (tests/realcluster/test_failover.py): a
leader frozen mid-bind kept its allocation write of claim A as "outcome unknown" (the write was
refused by the store fence when it arrived); a successor gave A's device to claim B; when the
old replica led again and kube-scheduler retried A's pod, it sent the old allocation again. The
claim was unchanged, so the precondition held, and one device sat in two claims. Sending again
is right only while nobody else holds the devices.
"""

from __future__ import annotations

import asyncio
from typing import Any

from extender.allocator.releases import release_of
from extender.cluster.api import ClusterAPIError
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.model.dra import parse_resource_claim
from extender.scheduling.engine import Engine
from extender.scheduling.inflight.assumed import WriteState, taken_by_others
from tests.builders import allocated, claim, device, device_class, node, pod, resource_slice
from tests.integration import invariants
from tests.scheduling.on_store import engine_on_store

NODE = "node-1"
POOL = "pool-1"


class CutOff(MemoryAPI):
    """While ``cut``: claim status writes and claim reads fail without reaching the store (a
    partition: the write's outcome is unknown to the writer)."""

    cut = False

    async def update_claim_status(self, claim: dict[str, Any]) -> dict[str, Any]:
        if CutOff.cut:
            raise ClusterAPIError("connection reset by peer")
        return await super().update_claim_status(claim)

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        if CutOff.cut:
            raise ClusterAPIError("connection reset by peer")
        return await super().get_claim(namespace, name)


def cluster(gpus: int) -> tuple[Engine, MemoryStore]:
    objects = [
        device_class(),
        node(NODE),
        resource_slice("s", [device(f"gpu-{i}") for i in range(gpus)], node=NODE, pool=POOL),
        claim("a"),
        claim("b"),
        pod("pa", ["a"]),
        pod("pb", ["b"]),
    ]
    return engine_on_store(objects, "", release_of(36), api=CutOff)


def bind(engine: Engine, name: str) -> str:
    return asyncio.run(engine.bind("default", name, f"uid-{name}", NODE))


def unknown_device(engine: Engine) -> str:
    """The device the pod's unknown write would take."""
    (record,) = [r for r in engine.tracker.assumed if r.state is WriteState.UNKNOWN]
    assert record.devices is not None
    (taken,) = record.devices.exclusive
    return taken.device


def successor_allocates(store: MemoryStore, name: str, gpu: str) -> None:
    """Another leader allocates ``gpu`` to claim ``name`` (and the cache follows the store)."""
    obj = store.get("ResourceClaim", "default", name)
    obj["status"] = {"allocation": allocated(("driver-a", POOL, gpu))}
    store.update(obj, status=True)


def holders(store: MemoryStore) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in store.objects("ResourceClaim"):
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            out.setdefault(r["device"], []).append(c["metadata"]["name"])
    return out


def violations(store: MemoryStore) -> list[str]:
    return invariants.check(
        {
            "resourceclaims": store.objects("ResourceClaim"),
            "pods": store.objects("Pod"),
            "resourceslices": store.objects("ResourceSlice"),
        }
    )


CASES = {
    # gpus: the retried bind takes the other device; one gpu: it fails, and nothing is written.
    "another device is free": (2, ""),
    "no other device": (1, "cannot"),
}


def run(gpus: int) -> tuple[str, str, MemoryStore]:
    engine, store = cluster(gpus)
    CutOff.cut = True
    try:
        first = bind(engine, "pa")
    finally:
        CutOff.cut = False
    assert "unknown" in first, first
    gpu = unknown_device(engine)
    successor_allocates(store, "b", gpu)
    return gpu, bind(engine, "pa"), store


def test_a_retried_bind_does_not_send_an_unknown_write_whose_devices_another_claim_took() -> None:
    for name, (gpus, answer) in CASES.items():
        gpu, retried, store = run(gpus)
        assert holders(store).get(gpu) == ["b"], (name, holders(store))
        assert all(len(names) == 1 for names in holders(store).values()), (name, holders(store))
        assert violations(store) == [], name
        if answer == "":
            assert retried == "", (name, retried)
        else:
            assert retried != "", name
            claim_a = store.get("ResourceClaim", "default", "a")
            assert not (claim_a.get("status") or {}).get("allocation"), name


def test_a_retried_bind_still_sends_an_unknown_write_nobody_else_took_the_devices_of() -> None:
    """The usual case (a lost answer, the same leader): the write goes again and binds."""
    engine, store = cluster(1)
    CutOff.cut = True
    try:
        assert "unknown" in bind(engine, "pa")
    finally:
        CutOff.cut = False
    gpu = unknown_device(engine)
    assert bind(engine, "pa") == ""
    assert holders(store) == {gpu: ["a"]}


def test_taken_by_others_reads_exclusive_and_shared_holds() -> None:
    def parsed(name: str, *devices: str, share: str | None = None) -> Any:
        return parse_resource_claim(
            claim(name, allocation=allocated(*(("driver-a", NODE, d) for d in devices), share=share))
        )

    mine = parsed("a", "gpu-0", "gpu-1")
    assert mine.allocation is not None
    others = [parsed("b", "gpu-1"), parsed("c", "gpu-2"), mine]
    assert {d.device for d in taken_by_others(others, mine.key, mine.allocation)} == {"gpu-1"}
    shared = parsed("d", "gpu-0", share="s1")
    assert {d.device for d in taken_by_others([shared], mine.key, mine.allocation)} == {"gpu-0"}
    mine_shared = parsed("e", "gpu-0", share="s2")
    assert mine_shared.allocation is not None
    assert not taken_by_others([shared], mine_shared.key, mine_shared.allocation)
