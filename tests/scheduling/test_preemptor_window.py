"""A preemptor between its victims' deletion and the release of their claims (issue 30 item 3).

kube-scheduler retries a preemptor within milliseconds of its victim's deletion; the victim's
claim is released by kube-controller-manager a moment later. Until then the devices it holds
count as free for that preemptor on its nominated node (and for nobody else): its filter
passes there, and its bind holds those devices and writes only once the cache shows them
released. Checked on the store the binds write to, with the store's events feeding the cache
as a watch would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import Event, MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from tests.builders import allocated, claim, device, device_class, exact, node, pod, reserve, resource_slice
from tests.integration import invariants

NODES = ["node-1", "node-2"]


def holder(name: str, node_name: str, priority: int, gpus: tuple[int, ...]) -> list[dict[str, Any]]:
    c = claim(f"{name}-claim", allocation=allocated(*(("driver-a", node_name, f"gpu-{i}") for i in gpus)))
    reserve(c, name)
    c["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    p = pod(name, [f"{name}-claim"], node_name=node_name, priority=priority)
    p["status"] = {"startTime": "2026-11-01T00:00:00Z", "phase": "Running"}
    return [c, p]


def pending(name: str, priority: int, wanted: int, nominated: str = "") -> list[dict[str, Any]]:
    p = pod(name, [f"{name}-claim"], priority=priority)
    if nominated:
        p["status"] = {"nominatedNodeName": nominated}
    return [claim(f"{name}-claim", requests=[exact(count=wanted)]), p]


class Cluster:
    """A store, a cache fed by its events, and an engine over both."""

    def __init__(self, *objects: dict[str, Any], **config: Any) -> None:
        base: list[dict[str, Any]] = [device_class()]
        for n in NODES:
            devices = [device(f"gpu-{i}") for i in range(4)]
            base += [node(n), resource_slice(f"{n}-gpus", devices, pool=n, node=n)]
        self.store = MemoryStore()
        self.store.load([*base, *objects])
        self.state = ClusterState.from_objects(self.store.all())
        self.store.subscribe(self._watch)
        self.engine = assemble(
            self.state, MemoryAPI(self.store), CelEnvironment(), EngineConfig(release_wait=1.0, **config)
        )

    def _watch(self, event: Event) -> None:
        if event.type == "DELETED":
            self.state.remove(event.object)
        else:
            self.state.apply(event.object)

    def filter(self, name: str) -> list[str]:
        return self.engine.filter(self.state.pods[("default", name)], NODES).passed

    def delete_pod(self, name: str) -> None:
        """The victim is gone (kubelet confirmed); its claim is not released yet."""
        self.store.delete("Pod", "default", name)

    def release(self, claim_name: str) -> None:
        """kube-controller-manager's resourceclaim controller: the last consumer is gone."""

        def change(obj: dict[str, Any]) -> None:
            obj["status"] = {}

        self.store.mutate("ResourceClaim", "default", claim_name, change)

    def claim(self, name: str) -> dict[str, Any]:
        return self.store.get("ResourceClaim", "default", name)

    def violations(self) -> list[str]:
        """The store's invariants; a deleted victim's reservation is the window under test (its
        claim is released by kube-controller-manager), not a violation."""
        found = invariants.check(
            {
                "resourceclaims": self.store.objects("ResourceClaim"),
                "pods": self.store.objects("Pod"),
                "resourceslices": self.store.objects("ResourceSlice"),
            }
        )
        return [v for v in found if not v.endswith("(uid-victim), which is not bound")]


def victim_gone(c: Cluster) -> None:
    c.delete_pod("victim")


def victim_terminating(c: Cluster) -> None:
    def change(obj: dict[str, Any]) -> None:
        obj["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"

    c.store.mutate("Pod", "default", "victim", change)


WINDOWS: list[tuple[str, Callable[[Cluster], None]]] = [
    ("the victim was deleted, its claim not released yet", victim_gone),
    ("the victim is terminating", victim_terminating),
]


@pytest.mark.parametrize(
    "device_preemption", [False, True], ids=["1.34-1.37 preempt verb", "device preemption"]
)
@pytest.mark.parametrize(("why", "window"), WINDOWS, ids=[w[0] for w in WINDOWS])
def test_the_preemptor_fits_its_nominated_node_while_its_victims_claims_are_released(
    why: str, window: Callable[[Cluster], None], device_preemption: bool
) -> None:
    c = Cluster(
        *holder("victim", "node-1", 1, (2, 3)),
        *holder("busy", "node-2", 100, (0, 1, 2, 3)),
        *pending("vip", 100, 4, nominated="node-1"),
        device_preemption=device_preemption,
    )
    assert c.filter("vip") == [], "the victim still runs: no room"
    window(c)
    assert c.filter("vip") == ["node-1"], why


def test_only_the_preemptor_and_only_on_its_nominated_node() -> None:
    c = Cluster(
        *holder("victim", "node-1", 1, (2, 3)),
        *holder("low-2", "node-2", 1, (0, 1, 2, 3)),
        *pending("vip", 100, 4, nominated="node-1"),
        *pending("other", 100, 3),
        *pending("elsewhere", 100, 4, nominated="node-2"),
    )
    victim_gone(c)
    assert c.filter("vip") == ["node-1"]
    # Two devices of node-1 are free, the other two are being released for vip only.
    assert c.filter("other") == []
    # A pod nominated to node-2 gains nothing from node-1's release.
    assert c.filter("elsewhere") == []


def test_a_deleted_pod_of_equal_priority_is_no_victim_of_the_preemptor() -> None:
    c = Cluster(
        *holder("peer", "node-1", 100, (2, 3)),
        *holder("busy", "node-2", 100, (0, 1, 2, 3)),
        *pending("vip", 100, 4, nominated="node-1"),
    )
    c.delete_pod("peer")
    assert c.filter("vip") == []


def test_the_bind_holds_the_devices_and_writes_once_the_release_shows() -> None:
    c = Cluster(*holder("victim", "node-1", 1, (2, 3)), *pending("vip", 100, 4, nominated="node-1"))
    victim_gone(c)

    async def scenario() -> str:
        bind = asyncio.create_task(c.engine.bind("default", "vip", "uid-vip", "node-1"))
        await asyncio.sleep(0.2)
        # Waiting: nothing written for vip while the victim's claim holds gpu-2 and gpu-3.
        assert not c.claim("vip-claim").get("status"), c.claim("vip-claim")
        assert c.violations() == []
        # Waiting on the cluster, not on the API server: back-pressure leaves it out.
        assert c.engine.tracker.parked_binds() == {"uid-vip": None}
        c.release("victim-claim")
        return await bind

    assert asyncio.run(scenario()) == ""
    assert c.engine.tracker.parked_binds() == {}
    written = c.claim("vip-claim")["status"]
    assert sorted(r["device"] for r in written["allocation"]["devices"]["results"]) == [
        "gpu-0",
        "gpu-1",
        "gpu-2",
        "gpu-3",
    ]
    assert [e["uid"] for e in written["reservedFor"]] == ["uid-vip"]
    assert c.store.get("Pod", "default", "vip")["spec"]["nodeName"] == "node-1"
    assert c.violations() == []


def test_while_the_bind_waits_no_other_pod_gets_the_free_devices_it_holds() -> None:
    c = Cluster(
        *holder("victim", "node-1", 1, (2, 3)),
        *pending("vip", 100, 4, nominated="node-1"),
        *pending("other", 50, 1),
    )
    victim_gone(c)

    async def scenario() -> list[str]:
        bind = asyncio.create_task(c.engine.bind("default", "vip", "uid-vip", "node-1"))
        await asyncio.sleep(0.1)
        passed = c.filter("other")
        c.release("victim-claim")
        assert await bind == ""
        return passed

    assert asyncio.run(scenario()) == ["node-2"]
    assert c.violations() == []


def test_a_release_that_does_not_come_fails_the_bind_and_writes_nothing() -> None:
    c = Cluster(*holder("victim", "node-1", 1, (2, 3)), *pending("vip", 100, 4, nominated="node-1"))
    victim_gone(c)
    error = asyncio.run(c.engine.bind("default", "vip", "uid-vip", "node-1"))
    assert "still hold the devices after 1s" in error and "default/victim-claim" in error
    assert not c.claim("vip-claim").get("status")
    assert "nodeName" not in c.store.get("Pod", "default", "vip")["spec"]
    # Nothing is held any more: the two free devices are anyone's again.
    assert not list(c.engine.tracker.assumed)
    assert c.violations() == []


def test_a_claim_shared_with_a_pod_that_stays_is_not_released() -> None:
    c = Cluster(
        *holder("victim", "node-1", 1, (2, 3)),
        *holder("busy", "node-2", 100, (0, 1, 2, 3)),
        *pending("vip", 100, 4, nominated="node-1"),
    )

    def share(obj: dict[str, Any]) -> None:
        obj["status"]["reservedFor"].append({"resource": "pods", "name": "stays", "uid": "uid-stays"})

    c.store.mutate("ResourceClaim", "default", "victim-claim", share)
    victim_gone(c)
    assert c.filter("vip") == []
