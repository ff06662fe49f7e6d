"""The make-room mover (issue 52) on the embedded default's store: the Eviction API as
:class:`MemoryAPI` answers it (budgets checked and spent, the UID precondition), its owner
garbage collection releasing an evicted pod's claims, the real engine, planner and allocator.

Each bound has a test that fails when the bound is removed: leader only, dry run, one plan at a
time, the rate, the cooldown, abandon on change, a budget's 429, and never a device twice. What
the store must look like afterwards is checked on the store.

The cluster (:func:`objects`): the trainer (priority 100) wants 2 GPUs. node-1 has 2, one held
by ``mover`` (a ReplicaSet's, priority 1); node-2 has 1 held by ``vip``; node-3 has 1, free. The
plan moves ``mover`` to node-3 and places the trainer on node-1."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

from extender.cluster.api import ClusterAPIError
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.owner_gc import collect_owned_claims
from extender.model.timestamps import parse_timestamp
from extender.scheduling.config import Mover as MoverSettings
from extender.scheduling.config import NoObserver
from extender.scheduling.make_room_mover import Mover
from extender.service import debug
from extender.service.make_room_view import render
from tests.builders import (
    allocated,
    claim,
    device_class,
    exact,
    node,
    pod,
    pod_disruption_budget,
    reserve,
    resource_slice,
)
from tests.scheduling.preempt.test_make_room import Mover as Running
from tests.scheduling.preempt.test_make_room import gpus, running
from tests.scheduling.test_make_room_hints import Setup, setup

WAITING_SINCE = "2026-11-28T00:00:00Z"
#: The mover's wall clock: the waiting pods have waited an hour.
WAITED_AN_HOUR = (parse_timestamp(WAITING_SINCE) or 0.0) + 3600


class Counted(NoObserver):
    def __init__(self) -> None:
        self.plans: list[tuple[str, str]] = []
        self.evictions: list[str] = []

    def make_room_plan(self, outcome: str, reason: str = "") -> None:
        self.plans.append((outcome, reason))

    def make_room_eviction(self, outcome: str) -> None:
        self.evictions.append(outcome)


def owned_claim(m: Running, workload: str = "") -> list[dict[str, Any]]:
    """A running pod of a ReplicaSet (``workload``: its UID) with a claim it owns (as one made
    from a template): deleting the pod deletes the claim, as the garbage collector does."""
    c = claim(
        f"{m.name}-claim",
        requests=[exact(count=len(m.gpus))],
        allocation=allocated(*(("driver-a", m.node, f"gpu-{i}") for i in m.gpus)),
    )
    p = running(m, [f"{m.name}-claim"])
    p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]  # (budgets count it healthy)
    p["metadata"]["ownerReferences"][0]["uid"] = workload or f"rs-{m.name}"
    c["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": m.name, "uid": p["metadata"]["uid"], "controller": True}
    ]
    return [reserve(c, m.name), p]


def waiting(name: str, claim_name: str, count: int, priority: int = 100) -> list[dict[str, Any]]:
    p = pod(name, [claim_name], priority=priority)
    p["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": WAITING_SINCE,
            }
        ],
    }
    return [claim(claim_name, requests=[exact(count=count)]), p]


def objects(
    *,
    nodes: tuple[tuple[str, int], ...] = (("node-1", 2), ("node-2", 1), ("node-3", 1)),
    extra: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [device_class()]
    for name, count in nodes:
        out += [node(name), resource_slice(f"{name}-s", gpus(count), pool=name, node=name)]
    out += owned_claim(Running("mover", "node-1", (0,)))
    out += owned_claim(Running("vip", "node-2", (0,), priority=1000))
    out += waiting("trainer", "wanted", 2)
    return out + list(extra)


@dataclasses.dataclass
class World:
    s: Setup
    mover: Mover
    api: MemoryAPI
    observer: Counted
    leads: list[bool]

    @property
    def store(self) -> MemoryStore:
        return self.s.store

    def plan_for(self, *names: str) -> None:
        """Filter each pod (none fits: the planner is asked) and let the planner plan."""
        for name in names:
            self.s.engine.filter(self.s.pod(name), sorted(self.s.state.nodes))
        self.s.planner.drain()

    def step(self, times: int = 1, every: float = 0.5) -> None:
        async def steps() -> None:
            for _ in range(times):
                await self.mover.step()
                await asyncio.sleep(0)  # the events' tasks
                self.s.clock.now += every

        asyncio.run(steps())

    def pods(self) -> set[str]:
        return {p["metadata"]["name"] for p in self.store.all() if p.get("kind") == "Pod"}

    def events(self, reason: str) -> list[str]:
        return [e["involvedObject"]["name"] for e in self.api.events if e["reason"] == reason]


def world(objs: list[dict[str, Any]], *, api: type[MemoryAPI] = MemoryAPI, **mover: Any) -> World:
    settings = MoverSettings(**{"on": True, "after": 60.0, **mover})
    s = setup(objs, mover=settings, make_room_hint_seconds=30.0)
    collect_owned_claims(s.store)
    memory = api(s.store)
    observer = Counted()
    leads = [True]

    async def leading() -> bool:
        return leads[0]

    m = Mover(
        s.state,
        s.engine.tracker,
        s.engine.snapshots,
        memory,
        s.planner,
        lambda: s.engine.config,
        clock=s.clock,
        wall_clock=lambda: WAITED_AN_HOUR,
        leading=leading,
        observer=observer,
    )
    return World(s, m, memory, observer, leads)


# --- the plan carried out ----------------------------------------------------------------------


def test_a_plan_is_carried_out_through_the_eviction_api_and_the_room_is_kept_for_the_pod() -> None:
    w = world(objects())
    w.plan_for("trainer")
    w.step()
    # The hold comes first, then the eviction (the pod and, by its owner, its claim are gone).
    assert set(w.s.engine.tracker.room_holds) == {w.s.pod("trainer").uid}
    assert "mover" not in w.pods()
    assert w.observer.evictions == ["evicted"]
    assert w.events("MakingRoom") == ["trainer"] and w.events("MovedToMakeRoom") == ["mover"]
    # The mover's replacement (same ReplicaSet, same priority) is filtered: node-1's GPUs are
    # the trainer's now, node-3's free one is its.
    w.store.load(waiting("mover-2", "mover-2-claim", 1, priority=1))
    assert w.s.filter("mover-2").passed == ["node-3"]
    assert w.s.filter("trainer").passed == ["node-1"]
    w.step()  # the claim is gone: released
    assert w.mover.current is not None and w.mover.current.phase == "placing"
    assert w.events("MadeRoom") == ["trainer"]
    assert asyncio.run(w.s.engine.bind("default", "trainer", w.s.pod("trainer").uid, "node-1")) == ""
    w.step()
    assert w.observer.plans == [("started", ""), ("carried_out", "")]
    assert w.mover.current is None and not w.s.engine.tracker.room_holds
    assert w.store.get("Pod", "default", "trainer")["spec"]["nodeName"] == "node-1"
    assert_no_device_twice(w.store)


def assert_no_device_twice(store: MemoryStore) -> None:
    seen: dict[tuple[str, str, str], str] = {}
    for obj in store.all():
        if obj.get("kind") != "ResourceClaim":
            continue
        for result in (
            ((obj.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])
        ):
            device_id = (result["driver"], result["pool"], result["device"])
            assert device_id not in seen, (
                f"{device_id} given to {seen[device_id]} and {obj['metadata']['name']}"
            )
            seen[device_id] = obj["metadata"]["name"]


# --- the bounds, each with a test that fails without it --------------------------------------------


def test_only_the_leader_moves_pods() -> None:
    w = world(objects())
    w.plan_for("trainer")
    w.leads[0] = False
    w.step(4)
    assert "mover" in w.pods() and not w.s.engine.tracker.room_holds and w.observer.plans == []


def two_moves(**kw: Any) -> list[dict[str, Any]]:
    """node-1's two GPUs are held by ``mover`` and ``second`` (each its own ReplicaSet); node-3
    and node-4 have one free each: the trainer's plan moves both."""
    extra = [*owned_claim(Running("second", "node-1", (1,))), *kw.pop("extra", [])]
    return objects(nodes=(("node-1", 2), ("node-2", 1), ("node-3", 1), ("node-4", 1)), extra=extra, **kw)


def test_a_replica_that_stops_leading_mid_plan_releases_its_hold_and_evicts_no_more() -> None:
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    assert w.observer.evictions == ["evicted"]  # the rate lets one go this minute
    w.leads[0] = False
    w.step(150, every=1.0)
    assert w.observer.evictions == ["evicted"] and "second" in w.pods()
    assert w.observer.plans == [("started", ""), ("abandoned", "not_leading")]
    assert not w.s.engine.tracker.room_holds
    assert w.events("MakeRoomAbandoned") == ["trainer"]


def test_the_rate_spaces_evictions_a_minute_apart() -> None:
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    assert w.pods() >= {"second"} and "mover" not in w.pods()
    w.step(118, every=0.5)  # 59 s later
    assert "second" in w.pods()
    w.step(4, every=0.5)  # past the minute
    assert "second" not in w.pods()
    assert w.observer.evictions == ["evicted", "evicted"]


def test_one_plan_at_a_time() -> None:
    """Two pods wait, each with a plan (the same room); only the first chosen starts, and the
    other is not started while the first is in flight, whatever the rate allows."""
    w = world(two_moves(extra=waiting("other", "other-claim", 2, priority=50)), rate=100.0)
    w.plan_for("trainer", "other")
    assert len(w.s.planner.plans()) == 2
    w.step(3)
    assert set(w.s.engine.tracker.room_holds) == {w.s.pod("trainer").uid}  # the more important
    assert [p for p, _ in w.observer.plans] == ["started"]
    w.plan_for("other")  # (planned again: it still fits nowhere but on the held node)
    w.step(3)
    assert [p for p, _ in w.observer.plans] == ["started"] and len(w.s.engine.tracker.room_holds) == 1


def test_a_dry_run_logs_the_plan_and_evicts_and_holds_nothing() -> None:
    w = world(objects(), dry_run=True)
    w.plan_for("trainer")
    w.step(10)
    assert "mover" in w.pods() and not w.s.engine.tracker.room_holds
    assert w.observer.plans == [("dry_run", "")]  # once, not every step
    assert w.observer.evictions == []


def test_a_pod_that_has_not_waited_long_enough_is_left_alone() -> None:
    w = world(objects(), after=7200.0)  # two hours; it waited one
    w.plan_for("trainer")
    w.step(4)
    assert "mover" in w.pods() and w.observer.plans == []


def test_the_freed_devices_are_kept_from_other_pods_while_the_plan_runs() -> None:
    """Between the first eviction and the last, node-1's freed GPU is the trainer's: a newcomer
    (the moved pod's replacement, or any pod of no higher priority) is sent elsewhere."""
    w = world(two_moves(extra=waiting("newcomer", "newcomer-claim", 1, priority=1)), rate=1.0)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods() and "second" in w.pods()
    refused = w.s.filter("newcomer")
    assert "node-1" not in refused.passed
    kept = "devices here are kept for default/trainer, for whom pods are being moved off this node"
    assert kept in refused.unresolvable["node-1"]
    assert w.s.filter("newcomer").passed  # node-3 or node-4


def test_a_workload_moved_rests_for_the_cooldown() -> None:
    """``mover`` and ``sibling`` belong to one ReplicaSet. The trainer's plan moves ``mover``;
    ``late`` needs ``sibling`` moved off node-5: not within the cooldown, and after it, yes."""
    sibling = owned_claim(Running("sibling", "node-5", (0,)), workload="rs-mover")
    extra = [*sibling, *waiting("late", "late-claim", 2, priority=100)]
    nodes = (("node-1", 2), ("node-2", 1), ("node-3", 1), ("node-5", 2), ("node-6", 1))
    w = world(objects(nodes=nodes, extra=extra), cooldown=600.0)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods()
    w.step(2)
    asyncio.run(w.s.engine.bind("default", "trainer", w.s.pod("trainer").uid, "node-1"))
    w.step()
    assert w.observer.plans[-1] == ("carried_out", "")
    w.s.clock.now += 60
    w.plan_for("late")
    w.step(4)
    assert "sibling" in w.pods() and w.observer.evictions == ["evicted"]
    w.s.clock.now += 600
    w.plan_for("late")
    w.step()
    assert "sibling" not in w.pods() and w.observer.evictions == ["evicted", "evicted"]


def test_a_plan_that_no_longer_holds_is_abandoned_and_never_loops() -> None:
    """Mid-plan a pod of higher priority than the trainer takes node-1's freed GPU: the plan is
    abandoned (hold released, nothing more evicted) and the trainer is not planned for again
    within the cooldown, however often it is filtered."""
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    taker = claim(
        "vip2-claim", requests=[exact(count=1)], allocation=allocated(("driver-a", "node-1", "gpu-0"))
    )
    vip2 = running(Running("vip2", "node-1", (0,), priority=1000), ["vip2-claim"])
    w.store.load([reserve(taker, "vip2"), vip2])
    w.step()
    assert w.observer.plans == [("started", ""), ("abandoned", "changed")]
    assert not w.s.engine.tracker.room_holds
    for _ in range(5):
        w.s.clock.now += 61
        w.plan_for("trainer")
        w.step(3)
    assert "second" in w.pods() and w.observer.evictions == ["evicted"]
    assert_no_device_twice(w.store)


def test_a_budget_that_tightens_mid_plan_stops_it_with_the_429() -> None:
    """``second``'s budget allowed one disruption when the plan was made and none at its turn:
    the Eviction API answers 429 (DisruptionBudget), the plan ends there, ``second`` stays."""
    pdb = pod_disruption_budget("second-pdb", {"app": "second"}, allowed=1)
    objs = two_moves(extra=[pdb])
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "second":
            obj["metadata"]["labels"] = {"app": "second"}
    w = world(objs, rate=1.0)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods()
    w.store.mutate(
        "PodDisruptionBudget", "default", "second-pdb", lambda pdb: pdb["status"].update(disruptionsAllowed=0)
    )
    w.step(125, every=0.5)
    assert "second" in w.pods()
    assert w.observer.evictions == ["evicted", "budget"]
    assert w.observer.plans == [("started", ""), ("abandoned", "budget")]
    assert not w.s.engine.tracker.room_holds


class LostAnswers(MemoryAPI):
    """Evictions whose answer is lost: ``after`` the store applied them, or before."""

    applied = True

    async def evict_pod(self, namespace: str, name: str, uid: str) -> None:
        if self.applied:
            await super().evict_pod(namespace, name, uid)
        raise ClusterAPIError("connection reset")


def test_an_eviction_whose_answer_was_lost_counts_when_the_store_shows_it() -> None:
    w = world(objects(), api=LostAnswers)
    w.plan_for("trainer")
    w.step(2)
    assert w.observer.evictions == ["evicted"] and w.mover.current is not None


def test_an_eviction_lost_before_it_landed_abandons_the_plan_and_moves_nothing() -> None:
    LostAnswers.applied = False
    try:
        w = world(objects(), api=LostAnswers)
        w.plan_for("trainer")
        w.step(2)
    finally:
        LostAnswers.applied = True
    assert "mover" in w.pods() and w.observer.evictions == ["error"]
    assert w.observer.plans == [("started", ""), ("abandoned", "error")]


def test_a_plan_whose_pod_was_deleted_is_abandoned() -> None:
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    w.store.delete("Pod", "default", "trainer")
    w.step()
    assert w.observer.plans[-1] == ("abandoned", "target_gone") and not w.s.engine.tracker.room_holds


def test_claims_never_released_end_the_plan_at_the_timeout() -> None:
    """The moved pod's claim is not its own (no garbage collection releases it here): the
    devices never come back; after ``timeout`` the plan is abandoned and its hold released."""
    objs = objects()
    for obj in objs:
        if obj["kind"] == "ResourceClaim" and obj["metadata"]["name"] == "mover-claim":
            del obj["metadata"]["ownerReferences"]
    w = world(objs, timeout=30.0)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods()
    w.step(50, every=0.5)
    assert w.mover.current is not None  # 25 s: still waiting for the release
    w.step(20, every=0.5)
    assert w.observer.plans == [("started", ""), ("abandoned", "timeout")]
    assert not w.s.engine.tracker.room_holds


def test_a_bound_pod_not_running_yet_is_never_moved() -> None:
    """The Eviction API deletes a Pending pod without checking its budgets: such a pod (bound,
    its image still pulling) is never planned for moving."""
    objs = objects()
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "mover":
            obj["status"]["phase"] = "Pending"
    w = world(objs)
    w.plan_for("trainer")
    assert w.s.planner.plans() == []
    w.step(3)
    assert "mover" in w.pods() and w.observer.evictions == []


class Graceful(MemoryAPI):
    """Evictions that leave the pod terminating (its grace period), as a kubelet would, until
    the test deletes it."""

    async def evict_pod(self, namespace: str, name: str, uid: str) -> None:
        def terminating(obj: dict[str, Any]) -> None:
            obj["metadata"]["deletionTimestamp"] = "2026-11-28T01:00:00Z"

        self.store.mutate("Pod", namespace, name, terminating)


def test_pods_under_one_budget_are_evicted_one_at_a_time() -> None:
    """``mover`` and ``second`` share a budget: ``second`` is evicted only once ``mover`` is gone,
    however fast the rate would allow."""
    pdb = pod_disruption_budget("both", {"app": "both"}, allowed=2)
    objs = two_moves(extra=[pdb])
    for obj in objs:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] in ("mover", "second"):
            obj["metadata"]["labels"] = {"app": "both"}
    w = world(objs, api=Graceful, rate=100.0)
    w.plan_for("trainer")
    w.step(6)
    assert w.observer.evictions == ["evicted"]
    w.store.delete("Pod", "default", "mover")
    w.step()
    assert w.observer.evictions == ["evicted", "evicted"]


def test_the_plan_frees_only_a_node_kube_scheduler_s_own_filters_passed() -> None:
    """kube-scheduler sent node-2 and node-3 only (node-1 failed its own filters, CPU say): no
    plan frees node-1, so nothing moves for the trainer."""
    w = world(objects())
    w.s.engine.filter(w.s.pod("trainer"), ["node-2", "node-3"])
    w.s.planner.drain()
    assert w.s.planner.plans() == []
    w.step(3)
    assert "mover" in w.pods() and w.observer.evictions == []


def test_the_debug_views_show_the_hold_while_a_plan_runs() -> None:
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    trainer = w.s.pod("trainer")
    assert debug.in_flight(w.s.engine)["makeRoomHolds"] == [
        {
            "pod": "default/trainer",
            "podUID": trainer.uid,
            "node": "node-1",
            "movingUIDs": ["uid-mover", "uid-second"],
        }
    ]
    view = debug.make_room_view(w.s.engine, trainer)
    assert view["heldByMover"]["node"] == "node-1"
    assert "the mover is making room on node-1" in render(view)
    w.leads[0] = False
    w.step()
    assert debug.in_flight(w.s.engine)["makeRoomHolds"] == []


def test_a_device_taken_while_the_target_s_bind_waits_is_never_written_twice() -> None:
    """The trainer's bind waits for ``mover``'s claim (evicted, not released yet). Meanwhile
    another writer allocates node-1's free GPU to a pod it placed by ``nodeName``: once the
    release comes, the bind must not write that GPU into the trainer's claim too. While the bind
    waits, the plan is not abandoned (the bind carries it out)."""
    objs = objects()
    for obj in objs:
        if obj["kind"] == "ResourceClaim" and obj["metadata"]["name"] == "mover-claim":
            del obj["metadata"]["ownerReferences"]  # released below, by the test
    w = world(objs)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods()

    async def scenario() -> str:
        trainer = w.s.pod("trainer")
        bind = asyncio.create_task(w.s.engine.bind("default", "trainer", trainer.uid, "node-1"))
        for _ in range(5):
            await asyncio.sleep(0.01)
        assert not bind.done()  # waiting for the release
        await w.mover.step()
        assert w.mover.current is not None  # not abandoned while its bind waits
        taker = claim(
            "other-claim", requests=[exact(count=1)], allocation=allocated(("driver-a", "node-1", "gpu-1"))
        )
        other = running(Running("other", "node-1", (1,), priority=1000), ["other-claim"])
        w.store.load([reserve(taker, "other"), other])
        w.store.delete("ResourceClaim", "default", "mover-claim")
        return await bind

    error = asyncio.run(scenario())
    assert "gpu-1 was allocated to claim default/other-claim" in error
    assert w.store.get("Pod", "default", "trainer")["spec"].get("nodeName") is None
    assert_no_device_twice(w.store)


def test_a_plan_gone_stale_before_it_starts_costs_no_cooldown_and_is_made_again() -> None:
    """Between the plan and its start a pod of higher priority takes node-1's free GPU: nothing
    starts (no count, no event, no hold), the plan is dropped, and the trainer's next filter asks
    for a new one at once rather than an interval (or a cooldown) later."""
    w = world(objects())
    w.plan_for("trainer")
    taker = claim(
        "vip2-claim", requests=[exact(count=1)], allocation=allocated(("driver-a", "node-1", "gpu-1"))
    )
    w.store.load(
        [reserve(taker, "vip2"), running(Running("vip2", "node-1", (1,), priority=1000), ["vip2-claim"])]
    )
    w.step()
    assert w.observer.plans == [] and not w.api.events and not w.s.engine.tracker.room_holds
    assert w.s.planner.plans() == [] and w.s.pod("trainer").uid not in w.mover.given_up
    w.s.engine.filter(w.s.pod("trainer"), sorted(w.s.state.nodes))
    assert w.s.planner.drain() == 1  # asked again at once


def test_a_waiting_pod_is_planned_for_again_without_a_filter() -> None:
    """kube-scheduler tries an unschedulable pod again only on an event it watches (or after 5
    minutes). node-3, the only place ``mover`` could go, is cordoned when the trainer is filtered:
    no plan. It is uncordoned with no filter after: once the interval has passed, the mover has
    the trainer planned for again and carries the plan out."""
    objs = objects()
    for obj in objs:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == "node-3":
            obj["spec"] = {"unschedulable": True}
    w = world(objs)
    w.plan_for("trainer")
    assert w.s.planner.plans() == []
    node3 = w.store.get("Node", "", "node-3")
    node3["spec"] = {}
    w.store.update(node3)
    w.step()
    assert w.s.planner.drain() == 0  # within the interval: not yet
    w.s.clock.now += 31
    w.step()
    assert w.s.planner.drain() == 1
    w.step()
    assert "mover" not in w.pods() and w.observer.plans == [("started", "")]
