"""Bind waits for its devices' binding conditions (upstream PreBind, v1.37.0
pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go: PreBind ->
wait.PollUntilContextTimeout(isPodReadyForBinding, bindingTimeout)), within a budget a bind verb
can afford (kube-scheduler's httpTimeout), and what the API server's store holds after each way
the wait can end.

The store is the embedded API server; the engine's cache follows it as an informer would.
A "driver" task writes the device's conditions into the claim's status while the bind waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.model.timestamps import rfc3339
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.binding import pod_binding_state
from extender.scheduling.engine import Engine
from extender.service.runtime import follow
from tests.builders import claim, device, device_class, device_status, node, pod, resource_slice

WAITING_DEVICE = device("d0", bindingConditions=["Attached"], bindingFailureConditions=["AttachFailed"])
CLUSTER = [device_class(), claim("c"), node("node-1"), resource_slice("s", [WAITING_DEVICE]), pod("p", ["c"])]


def engine_on(store: MemoryStore, wall_clock: Callable[[], float] = time.time, **config: Any) -> Engine:
    state = ClusterState()
    follow(store, state)
    store.load(CLUSTER)
    defaults: dict[str, Any] = {"binding_wait": 0.5, "binding_poll": 0.01}
    configured = EngineConfig(**{**defaults, **config})
    return assemble(state, MemoryAPI(store), CelEnvironment(), configured, wall_clock=wall_clock)


def set_conditions(store: MemoryStore, **conditions: str) -> None:
    """What the DRA driver does once the device is attached (or failed to attach)."""
    raw = store.get("ResourceClaim", "default", "c")
    raw["status"]["devices"] = device_status(**conditions)
    store.update(raw, status=True)


def claim_status(store: MemoryStore) -> dict[str, Any]:
    status: dict[str, Any] = store.get("ResourceClaim", "default", "c").get("status") or {}
    return status


def node_of(store: MemoryStore) -> str | None:
    name: str | None = store.get("Pod", "default", "p")["spec"].get("nodeName")
    return name


async def bind_while(store: MemoryStore, engine: Engine, driver: Any) -> str:
    """Bind p; ``driver`` runs once the claim is allocated in the store."""

    async def play_driver() -> None:
        while not claim_status(store).get("allocation"):
            await asyncio.sleep(0.005)
        await driver()

    task = asyncio.ensure_future(play_driver())
    try:
        return await engine.bind("default", "p", "uid-p", "node-1")
    finally:
        task.cancel()


def test_the_bind_waits_until_the_device_is_attached_then_binds() -> None:
    store = MemoryStore()
    engine = engine_on(store)

    async def attach() -> None:
        await asyncio.sleep(0.1)
        assert node_of(store) is None  # not bound while the device is not attached
        set_conditions(store, Attached="True")

    assert asyncio.run(bind_while(store, engine, attach)) == ""
    assert node_of(store) == "node-1"
    status = claim_status(store)
    result = status["allocation"]["devices"]["results"][0]
    assert result["bindingConditions"] == ["Attached"]
    assert status["allocation"]["allocationTimestamp"]  # upstream sets it with binding conditions
    assert [e["uid"] for e in status["reservedFor"]] == ["uid-p"]
    assert isinstance(engine.binder.api, MemoryAPI)
    (event,) = [e for e in engine.binder.api.events if e["reason"] == "BindingConditionsPending"]
    assert event["type"] == "Normal"
    assert event["message"] == "waiting for binding conditions for device on node node-1"


def test_a_bind_waiting_for_its_conditions_is_parked_not_waiting_on_the_api_server() -> None:
    """Back-pressure (extender/service/bind_pressure.py) leaves parked binds out of its count."""
    store = MemoryStore()
    engine = engine_on(store)
    seen: list[dict[str, float | None]] = []

    async def attach() -> None:
        await asyncio.sleep(0.05)
        seen.append(engine.tracker.parked_binds())
        set_conditions(store, Attached="True")

    assert asyncio.run(bind_while(store, engine, attach)) == ""
    assert seen == [{"uid-p": None}]  # waiting: not counted at all
    assert engine.tracker.parked_binds() == {}  # the bind is over


def test_not_attached_within_the_budget_keeps_the_claim_and_the_retry_binds() -> None:
    store = MemoryStore()
    engine = engine_on(store)

    async def nothing() -> None:
        return None

    error = asyncio.run(bind_while(store, engine, nothing))
    assert error.startswith("binding pod to node-1: binding conditions not met after 0.5s")
    assert "driver-a/pool-1/d0: Attached" in error
    assert node_of(store) is None
    status = claim_status(store)  # kept: the driver may be attaching the device right now
    assert status["allocation"]["devices"]["results"][0]["device"] == "d0"
    assert [e["uid"] for e in status["reservedFor"]] == ["uid-p"]
    # kube-scheduler retries: filter still sends the pod to node-1, and the bind completes.
    assert engine.filter(engine.state.pods[("default", "p")], ["node-1"]).passed == ["node-1"]
    set_conditions(store, Attached="True")
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    assert node_of(store) == "node-1"


def test_a_failure_condition_releases_the_claim_and_the_pod_stays_unbound() -> None:
    store = MemoryStore()
    engine = engine_on(store)

    async def fail() -> None:
        set_conditions(store, AttachFailed="True")

    error = asyncio.run(bind_while(store, engine, fail))
    assert error.startswith("binding pod to node-1: binding conditions failed: claim c binding failed")
    assert node_of(store) is None
    # Released at once (upstream leaves it to the next cycle's PostFilter): the device, its
    # reservation and the driver's conditions are cleared, so the retry allocates afresh.
    assert claim_status(store) == {}


def test_a_failure_after_an_earlier_attempt_is_deallocated_by_the_next_bind() -> None:
    store = MemoryStore()
    engine = engine_on(store)

    async def nothing() -> None:
        return None

    assert "not met" in asyncio.run(bind_while(store, engine, nothing))
    set_conditions(store, AttachFailed="True")
    error = asyncio.run(engine.bind("default", "p", "uid-p", "node-1"))
    assert error == (
        "cannot bind to node-1: resourceclaim not available on the node: "
        'claim c binding failed: reason=Driver, message="AttachFailed is True"'
    )
    # Freed before the answer: kube-scheduler's retry (bind errors go to back-off) allocates
    # afresh. Upstream's next PostFilter deallocates it and a claim event requeues the pod; no
    # claim event requeues a pod an extender rejected.
    assert claim_status(store) == {}


def test_past_the_binding_timeout_the_bind_gives_up() -> None:
    store = MemoryStore()
    now = [1e9]
    engine = engine_on(store, wall_clock=lambda: now[0], binding_timeout=60.0)

    async def time_passes() -> None:
        now[0] += 61.0  # past allocationTimestamp + bindingTimeout, conditions still not True

    error = asyncio.run(bind_while(store, engine, time_passes))
    assert error == "binding pod to node-1: binding conditions failed: claim c binding timeout"
    assert node_of(store) is None
    assert not claim_status(store).get("reservedFor")


def test_without_the_gates_devices_with_binding_conditions_are_not_used() -> None:
    store = MemoryStore()
    features = Features(device_binding=False)
    engine = engine_on(store, features=features)
    error = asyncio.run(engine.bind("default", "p", "uid-p", "node-1"))
    assert error.startswith("cannot bind to node-1")
    assert not claim_status(store).get("allocation")


# --- the pure judgement, case by case ------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    conditions: dict[str, str] | None
    ready: bool
    failure: str | None = None
    timed_out: bool = False
    age: float = 1.0


CASES = [
    Case("no-status-yet", None, False),
    Case("attached", {"Attached": "True"}, True),
    Case("attached-false", {"Attached": "False"}, False),
    Case("failure-wins-over-ready", {"Attached": "True", "AttachFailed": "True"}, False, "binding failed"),
    Case("failure-false-ignored", {"Attached": "True", "AttachFailed": "False"}, True),
    Case("timed-out", None, False, "binding timeout", timed_out=True, age=601.0),
    Case("ready-after-the-timeout-still-binds", {"Attached": "True"}, True, age=601.0),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pod_binding_state(case: Case) -> None:
    from extender.model.dra import parse_resource_claim

    allocation = {
        "devices": {
            "results": [
                {
                    "request": "req-0",
                    "driver": "driver-a",
                    "pool": "pool-1",
                    "device": "d0",
                    "bindingConditions": ["Attached"],
                    "bindingFailureConditions": ["AttachFailed"],
                }
            ]
        },
        "allocationTimestamp": rfc3339(1000.0),
    }
    raw = claim("c", allocation=allocation)
    if case.conditions is not None:
        raw["status"]["devices"] = [
            {
                "driver": "driver-a",
                "pool": "pool-1",
                "device": "d0",
                "conditions": [
                    {"type": t, "status": s, "reason": "R", "message": "m", "lastTransitionTime": rfc3339(0)}
                    for t, s in case.conditions.items()
                ],
            }
        ]
    state = pod_binding_state([parse_resource_claim(raw)], now=1000.0 + case.age, timeout=600.0)
    assert state.ready is case.ready
    assert (state.failure is None) is (case.failure is None)
    if case.failure:
        assert state.failure is not None and case.failure in state.failure
    assert state.timed_out is case.timed_out
    if not case.ready and case.failure is None:
        assert state.pending == ["driver-a/pool-1/d0: Attached"]


def test_a_claim_the_cache_has_not_seen_allocated_is_pending() -> None:
    from extender.model.dra import parse_resource_claim

    state = pod_binding_state([parse_resource_claim(claim("c")), None], now=0.0, timeout=600.0)
    assert not state.ready and state.failure is None and len(state.pending) == 2


def test_config_defaults_stay_below_the_shipped_http_timeout() -> None:
    config = EngineConfig()
    assert 0 < config.binding_wait < 10.0  # scheduler-config/*.yaml httpTimeout: 10s
    assert replace(config, binding_wait=1.0).binding_wait == 1.0
