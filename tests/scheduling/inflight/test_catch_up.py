"""The extender's cache behind kube-scheduler's view (issue 30 items 1 and 2).

Measured with a real kube-scheduler 1.36 and kube-controller-manager: a filter request carried a
pod whose status named its template claim while the extender's pod watch had not delivered that
update, and the bind, which names the pod only, failed "ResourceClaim not created yet"; a preempt
request came before the claim reached the claims cache, every candidate was answered away and
the pod was parked for five minutes. Here the cache is fed by the store's events, delayed or
withheld as a lagging watch would.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.model.core import Pod, parse_pod
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig, Observer
from extender.scheduling.engine import Engine
from extender.scheduling.inflight import catch_up
from extender.scheduling.preempt.victims import Candidate
from extender.scheduling.write import bind_failures
from tests.builders import allocated, claim, device, device_class, node, pod, reserve, resource_slice
from tests.virtual_time import VirtualTime

TEMPLATE_CLAIM = "worker-gpu-abc12"


def with_rv(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = str(rv)
    return out


def template_pod(*, created: bool, rv: int, priority: int | None = None) -> dict[str, Any]:
    """A pod with one template entry; ``created``: its status names the generated claim."""
    p = pod("worker", templates={"gpu": TEMPLATE_CLAIM}, priority=priority)
    if not created:
        del p["status"]
    return with_rv(p, rv)


def generated_claim(rv: int) -> dict[str, Any]:
    c = claim(TEMPLATE_CLAIM)
    c["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "worker", "uid": "uid-worker", "controller": True}
    ]
    c["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    return with_rv(c, rv)


def cluster(
    *objects: dict[str, Any],
    observer: Observer | None = None,
    clock: Callable[[], float] = time.monotonic,
    **config: Any,
) -> tuple[Engine, MemoryStore]:
    base = [
        device_class(),
        node("node-1"),
        resource_slice("gpus", [device("gpu-0")], pool="node-1", node="node-1"),
    ]
    store = MemoryStore()
    store.load([*base, *objects])
    state = ClusterState.from_objects(base)  # the cache: only what each test delivers
    for obj in objects:
        state.apply(obj)
    return assemble(
        state, MemoryAPI(store), CelEnvironment(), EngineConfig(**config), clock=clock, observer=observer
    ), store


# --- the newest version of a pod -----------------------------------------------------------------


def test_the_request_s_claim_statuses_count_when_they_are_newer() -> None:
    seen = catch_up.SeenPods()
    old, new = parse_pod(template_pod(created=False, rv=10)), parse_pod(template_pod(created=True, rv=12))
    seen.remember(new)
    merged = seen.newest(old, "uid-worker")
    assert merged is not None and merged.claim_statuses == {"gpu": TEMPLATE_CLAIM}
    assert merged.raw is old.raw  # everything else is the cache's
    # The cache's pod when it is the newer one, and nothing for a pod the cache does not have.
    newer_in_cache = parse_pod(template_pod(created=True, rv=20))
    assert seen.newest(newer_in_cache, "uid-worker") is newer_in_cache
    assert seen.newest(None, "uid-worker") is None
    # An older request never replaces a newer one remembered.
    seen.remember(old)
    assert seen.newest(old, "uid-worker") == merged


def test_a_made_up_request_cannot_change_what_the_pod_asks_for() -> None:
    seen = catch_up.SeenPods()
    cached = parse_pod(with_rv(pod("worker", ["mine"]), 10))
    seen.remember(parse_pod(with_rv(pod("worker", ["someone-elses"]), 99)))
    assert seen.newest(cached, "uid-worker") is cached


def test_seen_pods_are_bounded() -> None:
    seen = catch_up.SeenPods(size=2)
    pods = [parse_pod(template_pod(created=False, rv=1)), parse_pod(pod("p1")), parse_pod(pod("p2"))]
    seen.remember(parse_pod(template_pod(created=True, rv=2)))
    for p in pods[1:]:
        seen.remember(p)
    assert len(seen) == 2 and seen.newest(pods[0], "uid-worker") is pods[0]


def seen_pod(uid: str) -> Pod:
    raw = pod(uid)
    return parse_pod({**raw, "metadata": {**raw["metadata"], "uid": uid}})


def test_seen_pods_forget_the_pods_gone_or_bound_once_they_have_grown_a_step() -> None:
    seen = catch_up.SeenPods()
    pods = [seen_pod(f"uid-{i}") for i in range(catch_up.PRUNE_STEP)]
    # In the cache: every third pod as sent, every third bound, every third gone (or another
    # pod of that name, with another UID).
    cached = {}
    for i, p in enumerate(pods):
        if i % 3 == 0:
            cached[(p.namespace, p.name)] = p
        elif i % 3 == 1:
            cached[(p.namespace, p.name)] = dataclasses.replace(p, node_name="gpu-node-1")
        elif i % 6 == 2:
            cached[(p.namespace, p.name)] = dataclasses.replace(p, uid="uid-another")
    for p in pods[:-1]:
        seen.remember(p)
    seen.forget_gone(cached)  # not grown a step yet: nothing looked at
    assert len(seen) == catch_up.PRUNE_STEP - 1
    seen.remember(pods[-1])
    seen.forget_gone(cached)
    kept = [p for i, p in enumerate(pods) if i % 3 == 0]
    assert len(seen) == len(kept)
    assert all(seen.newest(p, p.uid) is p for p in kept)
    seen.forget(kept[0].uid)
    assert len(seen) == len(kept) - 1


def test_pods_waited_for_in_vain_are_forgotten_once_their_while_has_passed() -> None:
    now = [0.0]
    stuck = catch_up.Stuck(lambda: now[0], seconds=60.0)
    for i in range(10):
        stuck.mark(f"uid-{i}")
        now[0] += 10.0
    # At 100: uid-i was marked at 10 i and ends at 10 i + 60. The last mark (at 90) dropped
    # uid-0..uid-3; uid-4 has just ended, uid-5.. have not.
    assert "uid-9" in stuck and "uid-5" in stuck and "uid-4" not in stuck
    assert len(stuck) == 6
    now[0] += 60.0
    stuck.mark("uid-last")
    assert len(stuck) == 1


LAGS = [
    ("a claim the status names is missing", True, 5, "", True, True),
    ("the claims cache is past the pod: a spec claim does not exist", False, 5, "9", True, False),
    ("the claims cache is behind the pod: a spec claim may just be created", False, 5, "3", True, True),
    ("filter does not wait for spec claims", False, 5, "3", False, False),
]


@pytest.mark.parametrize(
    ("why", "from_status", "pod_rv", "claims_rv", "spec_claims", "behind"), LAGS, ids=[x[0] for x in LAGS]
)
def test_lag(
    why: str, from_status: bool, pod_rv: int, claims_rv: str, spec_claims: bool, behind: bool
) -> None:
    state = ClusterState()
    state.claims_seen_rv = claims_rv
    raw = template_pod(created=True, rv=pod_rv) if from_status else with_rv(pod("worker", ["mine"]), pod_rv)
    assert (catch_up.lag(state, parse_pod(raw), spec_claims=spec_claims) is not None) == behind, why


# --- bind ------------------------------------------------------------------------------------------


def test_bind_decides_on_the_pod_the_filter_saw_when_the_pod_watch_lags() -> None:
    """The cache has the claim and the pod without its claim status; the filter request had it."""
    e, store = cluster(template_pod(created=False, rv=10), generated_claim(11))
    as_sent = parse_pod(template_pod(created=True, rv=12))
    assert e.filter(as_sent, ["node-1"]).passed == ["node-1"]
    assert asyncio.run(e.bind("default", "worker", "uid-worker", "node-1")) == ""
    written = store.get("ResourceClaim", "default", TEMPLATE_CLAIM)["status"]
    assert [r["uid"] for r in written["reservedFor"]] == ["uid-worker"]
    assert store.get("Pod", "default", "worker")["spec"]["nodeName"] == "node-1"


def test_without_the_filter_s_pod_the_lagging_cache_still_says_why() -> None:
    e, _store = cluster(template_pod(created=False, rv=10), generated_claim(11))
    error = asyncio.run(e.bind("default", "worker", "uid-worker", "node-1"))
    assert "ResourceClaim not created yet" in error


def test_bind_waits_for_a_claim_the_claims_watch_has_not_delivered() -> None:
    e, store = cluster(template_pod(created=True, rv=12))
    store.create(generated_claim(11))

    async def scenario() -> str:
        bind = asyncio.create_task(e.bind("default", "worker", "uid-worker", "node-1"))
        await asyncio.sleep(0.05)
        e.state.apply(store.get("ResourceClaim", "default", TEMPLATE_CLAIM))  # the watch delivers it
        return await bind

    assert asyncio.run(scenario()) == ""
    assert store.get("ResourceClaim", "default", TEMPLATE_CLAIM)["status"]["allocation"]


def test_a_request_s_pod_under_another_name_is_not_bound() -> None:
    e, _store = cluster(template_pod(created=True, rv=12), generated_claim(11))
    e.filter(parse_pod(template_pod(created=True, rv=12)), ["node-1"])
    error = asyncio.run(e.bind("default", "impostor", "uid-worker", "node-1"))
    assert error and "nodeName" not in _store.get("Pod", "default", "worker")["spec"]


# --- filter ----------------------------------------------------------------------------------------


def test_filter_waits_briefly_for_a_claim_the_pod_s_status_names() -> None:
    e, store = cluster()
    store.create(generated_claim(11))
    as_sent = parse_pod(template_pod(created=True, rv=12))

    async def scenario() -> list[str]:
        async def deliver() -> None:
            await asyncio.sleep(0.05)
            e.state.apply(store.get("ResourceClaim", "default", TEMPLATE_CLAIM))

        task = asyncio.create_task(deliver())
        await e.caught_up(as_sent)
        await task
        return e.filter(as_sent, ["node-1"]).passed

    assert asyncio.run(scenario()) == ["node-1"]


def test_filter_does_not_wait_for_a_claim_nobody_created() -> None:
    clock = VirtualTime()
    e, _store = cluster(catch_up_wait=30.0, clock=clock)
    as_sent = parse_pod(with_rv(pod("worker", ["never-created"]), 5))
    assert waited(e, as_sent, clock) == 0.0
    assert "not found" in e.filter(as_sent, ["node-1"]).unresolvable["node-1"]


# --- preempt ---------------------------------------------------------------------------------------


def full_node() -> list[dict[str, Any]]:
    holder = claim("low-claim", allocation=allocated(("driver-a", "node-1", "gpu-0")))
    reserve(holder, "low")
    low = pod("low", ["low-claim"], node_name="node-1", priority=1)
    low["status"] = {"startTime": "2026-11-01T00:00:00Z", "phase": "Running"}
    return [holder, low]


def preempted(e: Engine, as_sent: Pod, deliver: list[dict[str, Any]]) -> dict[str, Candidate]:
    async def scenario() -> dict[str, Candidate]:
        async def later() -> None:
            await asyncio.sleep(0.05)
            for obj in deliver:
                e.state.apply(obj)

        task = asyncio.create_task(later())
        pod = await e.preemptor(as_sent)
        await task
        return e.preempt(pod, {"node-1": Candidate(())})

    return asyncio.run(scenario())


def test_preempt_resolves_claims_that_reach_the_cache_after_the_request() -> None:
    e, _store = cluster(*full_node(), template_pod(created=True, rv=12, priority=100))
    as_sent = parse_pod(template_pod(created=True, rv=12, priority=100))
    assert preempted(e, as_sent, [generated_claim(11)]) == {"node-1": Candidate(("uid-low",))}


def test_preempt_waits_for_the_controller_to_create_the_claims() -> None:
    """The request's pod has no claim status yet; the controller's claim and the pod's update
    arrive a moment later."""
    e, _store = cluster(*full_node(), template(), template_pod(created=False, rv=10, priority=100))
    as_sent = parse_pod(template_pod(created=False, rv=10, priority=100))
    answer = preempted(e, as_sent, [generated_claim(11), template_pod(created=True, rv=12, priority=100)])
    assert answer == {"node-1": Candidate(("uid-low",))}


def test_preempt_for_claims_that_never_come_answers_no_candidate_after_the_wait() -> None:
    e, _store = cluster(
        *full_node(), template(), template_pod(created=False, rv=10, priority=100), catch_up_wait=0.1
    )
    as_sent = parse_pod(template_pod(created=False, rv=10, priority=100))
    assert preempted(e, as_sent, []) == {}


# --- claims from templates not created yet (the in-tree plugin's PreEnqueue) ---------------------


def template() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "template", "namespace": "default", "uid": "uid-template"},
        "spec": {"spec": claim("x")["spec"]},
    }


def test_filter_waits_for_the_controller_to_create_a_template_s_claim() -> None:
    e, _store = cluster(template(), template_pod(created=False, rv=10))
    as_sent = parse_pod(template_pod(created=False, rv=10))

    async def scenario() -> list[str]:
        async def controller() -> None:
            await asyncio.sleep(0.05)
            e.state.apply(generated_claim(11))
            e.state.apply(template_pod(created=True, rv=12))

        task = asyncio.create_task(controller())
        pod = await e.caught_up(as_sent)
        await task
        assert pod.claim_statuses == {"gpu": TEMPLATE_CLAIM}
        assert e.prioritize(as_sent, ["node-1"]) == e.prioritize(pod, ["node-1"])
        return e.filter(pod, ["node-1"]).passed

    assert asyncio.run(scenario()) == ["node-1"]


def waited(e: Engine, pod: Pod, clock: VirtualTime) -> float:
    """How long the filter's catch-up waited, on the engine's clock (``clock``)."""
    started = clock()
    clock.run(e.caught_up(pod))
    return clock() - started


def test_a_pod_whose_claims_never_come_is_waited_for_once() -> None:
    clock = VirtualTime()
    e, _store = cluster(template(), template_pod(created=False, rv=10), catch_up_wait=0.2, clock=clock)
    as_sent = parse_pod(template_pod(created=False, rv=10))
    assert waited(e, as_sent, clock) == pytest.approx(0.2)
    assert waited(e, as_sent, clock) == 0.0  # kube-scheduler's queue is not stalled on every attempt
    assert "ResourceClaim not created yet" in e.filter(as_sent, ["node-1"]).unresolvable["node-1"]


def test_no_wait_for_a_template_that_does_not_exist() -> None:
    clock = VirtualTime()
    e, _store = cluster(template_pod(created=False, rv=10), catch_up_wait=30.0, clock=clock)
    assert waited(e, parse_pod(template_pod(created=False, rv=10)), clock) == 0.0


def test_a_pod_being_deleted_is_not_bound_and_nothing_is_written() -> None:
    doomed = template_pod(created=True, rv=12)
    doomed["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    e, store = cluster(doomed, generated_claim(11))
    assert asyncio.run(e.bind("default", "worker", "uid-worker", "node-1")) == "pod is being deleted"
    assert not store.get("ResourceClaim", "default", TEMPLATE_CLAIM).get("status")


def test_a_pod_deleted_before_its_binding_gets_its_claims_released() -> None:
    """The Binding is answered 404: the pod is gone, nothing can bind it any more, so what the
    bind wrote is released at once (not left to kube-controller-manager) and the failure says so."""
    e, store = cluster(template_pod(created=True, rv=12), generated_claim(11))
    api = e.binder.api
    assert isinstance(api, MemoryAPI)
    original = api.bind_pod

    async def deleted_first(namespace: str, name: str, uid: str, node: str) -> None:
        store.delete("Pod", namespace, name)
        await original(namespace, name, uid, node)

    api.bind_pod = deleted_first  # type: ignore[method-assign]
    error = asyncio.run(e.bind("default", "worker", "uid-worker", "node-1"))
    assert "failed" in error and "outcome unknown" not in error
    assert bind_failures.reason(error) == "pod-deleted", error
    status = store.get("ResourceClaim", "default", TEMPLATE_CLAIM).get("status") or {}
    assert not status.get("allocation") and not status.get("reservedFor"), status


def test_a_pod_deleted_while_its_claims_are_written_is_not_sent_a_binding() -> None:
    """The pod watch shows the deletion during the claim writes: what was written is released
    and no Binding is sent (the API server would refuse it)."""
    e, store = cluster(template_pod(created=True, rv=12), generated_claim(11))
    api = e.binder.api
    assert isinstance(api, MemoryAPI)
    original, bindings = api.update_claim_status, []

    async def deleted_meanwhile(claim: dict[str, Any]) -> dict[str, Any]:
        answer = await original(claim)
        if ("default", "worker") in e.state.pods:  # the first write: the pod goes meanwhile
            gone = store.get("Pod", "default", "worker")
            store.delete("Pod", "default", "worker")
            e.state.remove(gone)  # the watch event
        return answer

    async def binding(namespace: str, name: str, uid: str, node: str) -> None:
        bindings.append(name)

    api.update_claim_status = deleted_meanwhile  # type: ignore[method-assign]
    api.bind_pod = binding  # type: ignore[method-assign]
    error = asyncio.run(e.bind("default", "worker", "uid-worker", "node-1"))
    assert error == "pod is being deleted" and bindings == []
    status = store.get("ResourceClaim", "default", TEMPLATE_CLAIM).get("status") or {}
    assert not status.get("allocation") and not status.get("reservedFor"), status
