"""Bind under faults and concurrency: never a half-written allocation, never a device twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from extender.cluster.api import ApiConflict, ClusterAPIError
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.scheduling.engine import Engine
from extender.service.runtime import ServeConfig, build_embedded
from tests.builders import allocated, claim, device, device_class, node, pod, resource_slice
from tests.shared import REPO


class FaultyAPI(MemoryAPI):
    """MemoryAPI with injectable failures: ``fail[method] = [exception, ...]`` (consumed in order)."""

    def __init__(self, store: MemoryStore) -> None:
        super().__init__(store)
        self.fail: dict[str, list[Exception]] = {}
        self.calls: list[str] = []
        self.before_status_write: Any = None
        #: Awaited before every status write with the object being written; may raise.
        self.status_write_hook: Callable[[dict[str, Any]], Awaitable[None]] | None = None

    def _maybe_fail(self, method: str) -> None:
        self.calls.append(method)
        queue = self.fail.get(method)
        if queue:
            raise queue.pop(0)

    async def update_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("update_claim")
        return await super().update_claim(claim)

    async def update_claim_status(self, claim: dict[str, Any]) -> dict[str, Any]:
        if self.before_status_write is not None:
            hook, self.before_status_write = self.before_status_write, None
            hook()
        self._maybe_fail("update_claim_status")
        if self.status_write_hook is not None:
            await self.status_write_hook(claim)
        return await super().update_claim_status(claim)

    async def create_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("create_claim")
        return await super().create_claim(claim)

    async def delete_claim(self, namespace: str, name: str, uid: str) -> None:
        self._maybe_fail("delete_claim")
        await super().delete_claim(namespace, name, uid)

    async def patch_pod_status(
        self, namespace: str, name: str, uid: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        self._maybe_fail("patch_pod_status")
        return await super().patch_pod_status(namespace, name, uid, status)

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        self._maybe_fail("get_pod")
        return await super().get_pod(namespace, name)

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        self._maybe_fail("bind_pod")
        await super().bind_pod(namespace, name, uid, node)


def engine_for(
    objects: list[dict[str, Any]], tmp_path: Any, clock: Callable[[], float] = time.monotonic
) -> tuple[Engine, MemoryStore, FaultyAPI]:
    import yaml

    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    service, store = build_embedded([str(path)], ServeConfig(), clock=clock, api=FaultyAPI)
    api = service.engine.binder.api
    assert isinstance(api, FaultyAPI)
    return service.engine, store, api


def bind_concurrently(
    engine: Engine, api: FaultyAPI, pods: list[str], node_name: str, *, delay: float
) -> list[str]:
    """Bind ``pods`` (uid ``uid-<name>``) all at once, every status write taking ``delay``."""

    async def slow(_claim: dict[str, Any]) -> None:
        await asyncio.sleep(delay)

    api.status_write_hook = slow

    async def all_binds() -> list[str]:
        return list(await asyncio.gather(*(engine.bind("default", p, f"uid-{p}", node_name) for p in pods)))

    return asyncio.run(all_binds())


def base(n_devices: int = 2) -> list[dict[str, Any]]:
    return [device_class(), resource_slice("s", [device(f"d{i}") for i in range(n_devices)]), node("node-1")]


def status(store: MemoryStore, name: str) -> dict[str, Any]:
    result: dict[str, Any] = store.get("ResourceClaim", "default", name).get("status") or {}
    return result


def api_error(code: int, message: str = "") -> ClusterAPIError:
    error = ClusterAPIError(message or f"{code} from the API server")
    error.code = code
    return error


def test_a_refused_binding_releases_the_claims_it_allocated(tmp_path: Any) -> None:
    engine, store, api = engine_for([*base(), claim("c"), pod("p", ["c"])], tmp_path)
    api.fail["bind_pod"] = [api_error(403, "403 forbidden")]
    error = asyncio.run(engine.bind("default", "p", "uid-p", "node-1"))
    assert "binding pod to node-1 failed" in error
    # Still exactly as we wrote it: allocation and reservation cleared in one write.
    assert status(store, "c") == {}
    assert not engine.tracker.binds
    assert api.events[-1]["reason"] == "FailedBinding"
    # A retry succeeds.
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert status(store, "c")["reservedFor"][0]["uid"] == "uid-p"


def test_a_binding_with_unknown_outcome_keeps_the_reservations_and_a_retry_binds(tmp_path: Any) -> None:
    # Issue 9, items 2 and 5: a 500 (or a lost answer) on the Binding may still have bound the pod;
    # its claims are never released then, and the scheduler's retry completes the bind.
    engine, store, api = engine_for([*base(), claim("c"), pod("p", ["c"])], tmp_path)
    api.fail["bind_pod"] = [api_error(500, "500 Internal Server Error")]
    error = asyncio.run(engine.bind("default", "p", "uid-p", "node-1"))
    assert "outcome unknown" in error
    assert status(store, "c")["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert store.get("Pod", "default", "p")["spec"]["nodeName"] == "node-1"
    assert api.calls.count("update_claim_status") == 1  # the retry only created the Binding


def test_a_bound_pod_gets_missing_reservations_repaired(tmp_path: Any) -> None:
    # Issue 9, item 5: the Binding went through, the claims lost their reservation; a retried bind
    # answers success only once the reservation is back.
    engine, store, _api = engine_for([*base(), claim("c"), pod("p", ["c"])], tmp_path)
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""

    def drop_reservation(obj: dict[str, Any]) -> None:
        obj["status"].pop("reservedFor")

    store.mutate("ResourceClaim", "default", "c", drop_reservation)
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert status(store, "c")["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]


def test_conflicts_on_the_status_write_are_retried_with_a_fresh_read(tmp_path: Any) -> None:
    engine, store, api = engine_for([*base(), claim("c"), pod("p", ["c"])], tmp_path)
    api.fail["update_claim_status"] = [ApiConflict("409"), ApiConflict("409")]
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert api.calls.count("update_claim_status") == 3
    assert len(status(store, "c")["allocation"]["devices"]["results"]) == 1


def test_a_claim_allocated_elsewhere_meanwhile_fails_the_bind(tmp_path: Any) -> None:
    engine, store, api = engine_for([*base(), claim("c"), pod("p", ["c"])], tmp_path)

    def someone_else_allocates() -> None:
        def change(obj: dict[str, Any]) -> None:
            obj["status"] = {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "req-0", "driver": "driver-a", "pool": "pool-1", "device": "d1"}
                        ]
                    }
                },
                "reservedFor": [{"resource": "pods", "name": "other", "uid": "uid-other"}],
            }

        store.mutate("ResourceClaim", "default", "c", change)

    api.before_status_write = someone_else_allocates
    error = asyncio.run(engine.bind("default", "p", "uid-p", "node-1"))
    assert "got allocated elsewhere in the meantime" in error
    final = status(store, "c")
    assert final["allocation"]["devices"]["results"][0]["device"] == "d1"  # theirs, untouched
    assert final["reservedFor"] == [{"resource": "pods", "name": "other", "uid": "uid-other"}]
    assert not store.get("Pod", "default", "p")["spec"].get("nodeName")


def test_second_claim_failing_releases_the_first(tmp_path: Any) -> None:
    engine, store, api = engine_for([*base(), claim("a"), claim("b"), pod("p", ["a", "b"])], tmp_path)
    api.fail["update_claim"] = [api_error(403, "403 forbidden")]
    # First claim: finalizer update refused -> nothing written at all.
    assert "403" in asyncio.run(engine.bind("default", "p", "uid-p", "node-1"))
    assert status(store, "a") == {} and status(store, "b") == {}
    assert len(engine.tracker.assumed) == 0

    # Now let the first claim succeed and the second claim's status write be refused.
    async def second_refused(obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "b":
            raise api_error(422, "422 invalid")

    api.status_write_hook = second_refused
    assert "422" in asyncio.run(engine.bind("default", "p", "uid-p", "node-1"))
    assert status(store, "a") == {} and status(store, "b") == {}
    assert not store.get("Pod", "default", "p")["spec"].get("nodeName")


def test_a_status_write_with_unknown_outcome_keeps_its_devices_taken(tmp_path: Any) -> None:
    # Issue 9, item 1: no answer for the status write and no way to read the claim back: the
    # devices stay taken (no other pod gets them) until the outcome is known; the retry settles it.
    engine, store, api = engine_for(
        [*base(1), claim("a"), claim("b"), pod("p", ["a"]), pod("q", ["b"])], tmp_path
    )

    async def no_answer(obj: dict[str, Any]) -> None:
        raise api_error(0, "connection reset")

    api.status_write_hook = no_answer
    original_get = api.get_claim

    async def unreachable(namespace: str, name: str) -> dict[str, Any]:
        raise api_error(0, "connection refused")

    api.get_claim = unreachable  # type: ignore[method-assign]
    assert "outcome" in asyncio.run(engine.bind("default", "p", "uid-p", "node-1"))
    [record] = list(engine.tracker.assumed)
    assert record.state.value == "unknown" and record.key == ("default", "a")
    # The only device is held for p: q does not fit, in filter and in bind.
    q = engine.state.pods[("default", "q")]
    assert engine.filter(q, ["node-1"]).passed == []
    assert "cannot bind" in asyncio.run(engine.bind("default", "q", "uid-q", "node-1"))
    # The API server is back: p's retry sends the same write again and binds.
    api.status_write_hook = None
    api.get_claim = original_get  # type: ignore[method-assign]
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert status(store, "a")["reservedFor"][0]["uid"] == "uid-p"
    assert status(store, "b") == {}
    engine.snapshot()
    assert len(engine.tracker.assumed) == 0  # the cache shows every write: nothing is assumed any more


def test_shared_claim_gets_one_allocation_and_two_reservations(tmp_path: Any) -> None:
    engine, store, _ = engine_for(
        [*base(), claim("shared"), pod("p1", ["shared"]), pod("p2", ["shared"])], tmp_path
    )
    assert asyncio.run(engine.bind("default", "p1", "uid-p1", "node-1")) == ""
    first = status(store, "shared")["allocation"]
    assert asyncio.run(engine.bind("default", "p2", "uid-p2", "node-1")) == ""
    final = status(store, "shared")
    assert final["allocation"] == first
    assert [e["uid"] for e in final["reservedFor"]] == ["uid-p1", "uid-p2"]


def test_concurrent_binds_never_give_a_device_twice(tmp_path: Any) -> None:
    n_pods, n_devices = 12, 5
    objects = [*base(n_devices)]
    for i in range(n_pods):
        objects += [claim(f"c{i}"), pod(f"p{i}", [f"c{i}"])]
    engine, store, api = engine_for(objects, tmp_path)

    async def slow_status(obj: dict[str, Any]) -> None:
        await asyncio.sleep(0.001)  # interleave the binds at every write

    api.status_write_hook = slow_status

    async def all_binds() -> list[str]:
        return await asyncio.gather(
            *(engine.bind("default", f"p{i}", f"uid-p{i}", "node-1") for i in range(n_pods))
        )

    errors = asyncio.run(all_binds())
    assert errors.count("") == n_devices
    taken = [
        r["device"]
        for i in range(n_pods)
        for r in (status(store, f"c{i}").get("allocation") or {}).get("devices", {}).get("results", [])
    ]
    assert sorted(taken) == sorted(f"d{i}" for i in range(n_devices))  # each device exactly once
    for i in range(n_pods):
        s = status(store, f"c{i}")
        bound = store.get("Pod", "default", f"p{i}")["spec"].get("nodeName") == "node-1"
        assert bound == bool(s.get("allocation")) == bool(s.get("reservedFor"))
    assert not engine.tracker.binds


def test_same_bind_twice_concurrently_gives_one_answer(tmp_path: Any) -> None:
    engine, _store, api = engine_for([*base(), claim("c"), pod("p", ["c"])], tmp_path)

    async def twice() -> list[str]:
        return list(
            await asyncio.gather(
                engine.bind("default", "p", "uid-p", "node-1"), engine.bind("default", "p", "uid-p", "node-1")
            )
        )

    assert asyncio.run(twice()) == ["", ""]
    assert api.calls.count("bind_pod") == 1


def test_an_exception_in_the_writes_answers_every_waiter_and_leaves_nothing_behind(tmp_path: Any) -> None:
    # Issue 9, item 4: an unexpected exception (here: a malformed answer) never leaves the bind's
    # entry, its waiters or a half-written claim behind.
    engine, store, api = engine_for([*base(1), claim("c"), pod("p", ["c"])], tmp_path)

    async def broken(obj: dict[str, Any]) -> None:
        raise RuntimeError("unexpected")

    api.status_write_hook = broken

    async def twice() -> list[str]:
        return list(
            await asyncio.gather(
                engine.bind("default", "p", "uid-p", "node-1"), engine.bind("default", "p", "uid-p", "node-1")
            )
        )

    first, second = asyncio.run(asyncio.wait_for(twice(), 5))
    assert "internal error" in first and first == second
    assert not engine.tracker.binds
    assert status(store, "c") == {}
    api.status_write_hook = None
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""


def test_null_status_answers_are_handled(tmp_path: Any) -> None:
    engine, store, api = engine_for([*base(), claim("c"), pod("p", ["c"])], tmp_path)
    original = api.update_claim

    async def null_status(obj: dict[str, Any]) -> dict[str, Any]:
        answer = await original(obj)
        answer["status"] = None
        return answer

    api.update_claim = null_status  # type: ignore[method-assign,assignment]
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert status(store, "c")["reservedFor"][0]["uid"] == "uid-p"


def test_claim_writes_are_not_expired_by_age_only_settled_by_the_cache(tmp_path: Any) -> None:
    # Issue 9, item 3: a write still queued keeps its devices, however old.
    now = [0.0]
    engine, store, api = engine_for(
        [*base(1), claim("a"), claim("b"), pod("p", ["a"]), pod("q", ["b"])], tmp_path, lambda: now[0]
    )
    release = asyncio.Event()

    async def queued(obj: dict[str, Any]) -> None:
        now[0] += 3600.0
        await release.wait()

    api.status_write_hook = queued

    async def scenario() -> str:
        binding = asyncio.create_task(engine.bind("default", "p", "uid-p", "node-1"))
        await asyncio.sleep(0.01)
        q = engine.state.pods[("default", "q")]
        assert engine.filter(q, ["node-1"]).passed == []  # an hour later, still taken
        release.set()
        return await binding

    assert asyncio.run(scenario()) == ""
    assert [r["device"] for r in status(store, "a")["allocation"]["devices"]["results"]] == ["d0"]


def test_examples_state_loads() -> None:
    service, store = build_embedded([str(REPO / "examples")], ServeConfig())
    assert service.ready() and len(store.objects("Node")) == 4


def test_pod_and_node_updates_keep_the_snapshot_claim_updates_replace_it(tmp_path: Any) -> None:
    engine, store, _ = engine_for([*base(), claim("c"), pod("p", ["c"])], tmp_path)
    first = engine.snapshot()
    store.mutate(
        "Pod", "default", "p", lambda o: o.setdefault("metadata", {}).setdefault("labels", {}).update(x="y")
    )
    store.mutate("Node", "", "node-1", lambda o: o["metadata"].setdefault("annotations", {}).update(a="b"))
    assert engine.snapshot() is first
    store.mutate(
        "ResourceClaim", "default", "c", lambda o: o["metadata"].setdefault("labels", {}).update(x="y")
    )
    assert engine.snapshot() is not first


def on_node(allocation: dict[str, Any], node_name: str) -> dict[str, Any]:
    allocation["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }
    return allocation


def two_nodes(reserved_for: list[str]) -> list[dict[str, Any]]:
    c = claim("c", allocation=on_node(allocated(("driver-a", "pool-2", "d0")), "node-2"))
    c["status"]["reservedFor"] = [{"resource": "pods", "name": u, "uid": f"uid-{u}"} for u in reserved_for]
    return [
        device_class(),
        resource_slice("s1", [device("d0")], node="node-1", pool="pool-1"),
        node("node-1"),
        c,
        pod("p", ["c"]),
    ]


def filter_then_settle(engine: Engine, names: list[str]) -> list[str]:
    async def run() -> list[str]:
        p = engine.state.pods[("default", "p")]
        passed = engine.filter(p, names).passed
        for _ in range(20):  # let the background deallocation run
            await asyncio.sleep(0)
        return passed

    return asyncio.run(run())


def test_no_node_fits_an_allocated_claim_nobody_uses_so_it_is_deallocated(tmp_path: Any) -> None:
    # Issue 9, item 6 (upstream PostFilter): the claim's node is gone; the pod fits again once the
    # claim reserved for nobody but this pod is deallocated.
    for reserved in ([], ["p"]):
        engine, store, _api = engine_for(two_nodes(reserved), tmp_path)
        assert filter_then_settle(engine, ["node-1"]) == []
        assert not status(store, "c").get("allocation") and not status(store, "c").get("reservedFor")
        assert filter_then_settle(engine, ["node-1"]) == ["node-1"]


def stuck_binding(timestamp: str) -> list[dict[str, Any]]:
    """A claim on node-1's device waiting for binding conditions since ``timestamp``."""
    allocation = on_node(allocated(("driver-a", "pool-1", "d0")), "node-1")
    result = allocation["devices"]["results"][0]
    result["bindingConditions"] = ["Attached"]
    allocation["allocationTimestamp"] = timestamp
    c = claim("c", allocation=allocation)
    c["status"]["devices"] = [
        {"driver": "driver-a", "pool": "pool-1", "device": "d0", "conditions": []},
    ]
    return [
        device_class(),
        resource_slice("s1", [device("d0")], node="node-1", pool="pool-1"),
        node("node-1"),
        c,
        pod("p", ["c"]),
    ]


def test_a_claim_whose_binding_timed_out_is_deallocated_in_the_store(tmp_path: Any) -> None:
    # Upstream Filter -> isClaimTimeout marks it unavailable; PostFilter clears allocation,
    # reservedFor and status.devices so the pod gets devices afresh.
    engine, store, _api = engine_for(stuck_binding("2020-01-01T00:00:00Z"), tmp_path)
    assert filter_then_settle(engine, ["node-1"]) == []
    after = status(store, "c")
    assert not after.get("allocation") and not after.get("reservedFor") and not after.get("devices")
    assert filter_then_settle(engine, ["node-1"]) == ["node-1"]
    # Still within the binding timeout: available, and left as it is.
    engine, store, _api = engine_for(stuck_binding("2099-01-01T00:00:00Z"), tmp_path)
    assert filter_then_settle(engine, ["node-1"]) == ["node-1"]
    assert status(store, "c")["allocation"]


def test_claims_used_by_another_pod_or_a_bound_pod_are_never_deallocated(tmp_path: Any) -> None:
    for objects in (two_nodes(["other"]), two_nodes(["p", "other"])):
        engine, store, _api = engine_for(objects, tmp_path)
        assert filter_then_settle(engine, ["node-1"]) == []
        assert status(store, "c")["allocation"]
    # The cache says unbound, the API server says bound (a lagging watch): left alone.
    engine, store, api = engine_for(two_nodes(["p"]), tmp_path)
    original = api.get_pod

    async def bound(namespace: str, name: str) -> dict[str, Any]:
        current = await original(namespace, name)
        current["spec"]["nodeName"] = "node-2"
        return current

    api.get_pod = bound  # type: ignore[method-assign]
    assert filter_then_settle(engine, ["node-1"]) == []
    assert status(store, "c")["allocation"]


def test_concurrent_binds_of_multi_claim_pods_never_give_a_device_twice(tmp_path: Any) -> None:
    # A pod's decision takes all its claims' devices before the first write: another bind running
    # while the first claim is being written cannot get the second claim's devices.
    n_pods, n_devices = 6, 5
    objects = [*base(n_devices)]
    for i in range(n_pods):
        objects += [claim(f"a{i}"), claim(f"b{i}"), pod(f"p{i}", [f"a{i}", f"b{i}"])]
    engine, store, api = engine_for(objects, tmp_path)
    errors = bind_concurrently(engine, api, [f"p{i}" for i in range(n_pods)], "node-1", delay=0.002)
    assert errors.count("") == n_devices // 2
    taken = [
        r["device"]
        for i in range(n_pods)
        for c in (f"a{i}", f"b{i}")
        for r in (status(store, c).get("allocation") or {}).get("devices", {}).get("results", [])
    ]
    assert len(taken) == len(set(taken)) == 2 * (n_devices // 2)


# Issue 10: bind refuses what kube-scheduler would never ask.
REFUSED = [
    ("no PodUID", "", "names no PodUID"),
    ("another pod's UID", "uid-other", "UID mismatch"),
]


def test_bind_refuses_requests_kube_scheduler_never_sends(tmp_path: Any) -> None:
    engine, store, _api = engine_for(
        [*base(), claim("c"), pod("p", ["c"]), claim("d"), pod("q", ["d"], scheduler="default-scheduler")],
        tmp_path,
    )
    for _name, uid, message in REFUSED:
        assert message in asyncio.run(engine.bind("default", "p", uid, "node-1"))
    assert "schedulerName 'default-scheduler'" in asyncio.run(engine.bind("default", "q", "uid-q", "node-1"))
    assert status(store, "c") == {} and status(store, "d") == {}
    assert not store.get("Pod", "default", "p")["spec"].get("nodeName")
