"""The make-room mover (issue 52) attacked: a review's scenarios on the embedded default's store,
in the style of :mod:`tests.scheduling.test_make_room_mover`: the defects the review found
(each failed before its fix), and what it checked that held."""

from __future__ import annotations

import asyncio
import types
from typing import Any

from extender.cluster.api import ClusterAPIError
from extender.cluster.memory_api import MemoryAPI
from extender.service.cluster_mode import ClusterMode
from tests.builders import allocated, claim, exact, reserve
from tests.scheduling.preempt.test_make_room import Mover as Running
from tests.scheduling.preempt.test_make_room import running
from tests.scheduling.test_make_room_mover import (
    World,
    assert_no_device_twice,
    objects,
    owned_claim,
    two_moves,
    waiting,
    world,
)


def passed(w: World, name: str) -> list[str]:
    return w.s.engine.filter(w.s.pod(name), sorted(w.s.state.nodes)).passed


def test_the_hold_keeps_the_room_after_the_moved_pod_is_deleted_and_before_its_claim_is_released() -> None:
    """The moved pod is evicted and gone from the cache; its claim is still allocated (the
    resourceclaim controller or the garbage collector has not released it yet: 0-20 ms, longer
    under load; here it is not owned, so it stays). kube-scheduler retries the moved pod's
    replacement on the pod's deletion: node-1's other, free GPU must stay the trainer's."""
    objs = objects()
    for obj in objs:
        if obj["kind"] == "ResourceClaim" and obj["metadata"]["name"] == "mover-claim":
            del obj["metadata"]["ownerReferences"]
    w = world(objs)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods() and w.mover.current is not None  # evicted, claim not released
    w.store.load(waiting("mover-2", "mover-2-claim", 1, priority=1))
    assert "node-1" not in passed(w, "mover-2")  # node-1's gpu-1 is kept for the trainer


def test_a_pod_that_opts_out_after_the_plan_started_is_not_evicted() -> None:
    """The operator sees MakingRoom name ``second`` and annotates it
    ``dra.extender.io/make-room: never`` before its turn (the rate spaces the evictions)."""
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods() and "second" in w.pods()
    w.store.mutate(
        "Pod",
        "default",
        "second",
        lambda p: p["metadata"].setdefault("annotations", {}).update({"dra.extender.io/make-room": "never"}),
    )
    w.step(130, every=0.5)
    assert "second" in w.pods()


def test_nothing_is_evicted_for_a_pod_that_fits_elsewhere_now() -> None:
    """After the plan was made, node-4's two GPUs are freed (a job ended): the trainer fits
    there as it is. The mover still evicts ``mover`` for it."""
    done = claim(
        "done-claim",
        requests=[exact(count=2)],
        allocation=allocated(("driver-a", "node-4", "gpu-0"), ("driver-a", "node-4", "gpu-1")),
    )
    job = running(Running("job", "node-4", (0, 1), priority=1000), ["done-claim"])
    objs = objects(nodes=(("node-1", 2), ("node-2", 1), ("node-3", 1), ("node-4", 2)))
    w = world([*objs, reserve(done, "job"), job])
    w.plan_for("trainer")
    assert w.s.planner.plans()
    w.store.delete("Pod", "default", "job")
    w.store.delete("ResourceClaim", "default", "done-claim")
    assert "node-4" in passed(w, "trainer")  # it fits as it is
    w.step(3)
    assert "mover" in w.pods() and w.observer.evictions == []


class LostThenBlind(MemoryAPI):
    """The eviction lands, its answer is lost, and the GET that should tell fails too."""

    async def evict_pod(self, namespace: str, name: str, uid: str) -> None:
        await super().evict_pod(namespace, name, uid)
        raise ClusterAPIError("connection reset")

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        raise ClusterAPIError("connection refused")


def test_a_workload_evicted_with_its_answer_lost_still_rests_for_the_cooldown() -> None:
    """``mover`` and ``sibling`` are one ReplicaSet's. The trainer's eviction of ``mover`` lands
    with no answer and the GET after it fails: the plan is abandoned as ``error``. ``late``'s plan
    moves ``sibling``, a minute later, well within the cooldown."""
    sibling = owned_claim(Running("sibling", "node-5", (0,)), workload="rs-mover")
    extra = [*sibling, *waiting("late", "late-claim", 2, priority=100)]
    nodes = (("node-1", 2), ("node-2", 1), ("node-3", 1), ("node-5", 2), ("node-6", 1))
    w = world(objects(nodes=nodes, extra=extra), api=LostThenBlind, cooldown=600.0)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods()  # it was evicted
    assert w.observer.plans == [("started", ""), ("abandoned", "error")]
    # The trainer takes node-1 anyway (kube-scheduler retries it); ``late`` needs ``sibling`` moved.
    assert asyncio.run(w.s.engine.bind("default", "trainer", w.s.pod("trainer").uid, "node-1")) == ""
    w.s.clock.now += 60
    w.plan_for("late")
    w.step(4)
    assert "sibling" in w.pods()


class Gateway504(MemoryAPI):
    """The eviction lands; the answer is a proxy's 504 (kube-apiserver's own timeout answer too:
    the request may still be carried out)."""

    async def evict_pod(self, namespace: str, name: str, uid: str) -> None:
        await super().evict_pod(namespace, name, uid)
        error = ClusterAPIError("504: Gateway Timeout")
        error.code = 504
        raise error


def test_an_eviction_answered_504_that_landed_is_counted_and_the_plan_goes_on() -> None:
    w = world(objects(), api=Gateway504)
    w.plan_for("trainer")
    w.step(2)
    assert "mover" not in w.pods()
    assert w.observer.evictions == ["evicted"] and w.mover.current is not None


def test_the_mover_does_not_lead_during_the_takeover_write_window() -> None:
    elector = types.SimpleNamespace(
        is_leader=lambda: True,
        may_write=lambda: "took the Lease over 1.0s ago; writes start 15s after a takeover",
    )
    mode = types.SimpleNamespace(elector=elector)
    assert asyncio.run(ClusterMode.mover_leads(mode)) is False  # type: ignore[arg-type]


# --- what held --------------------------------------------------------------------------------------


def test_a_same_named_replacement_is_never_evicted_in_the_original_s_place() -> None:
    """``second`` is deleted and a pod of the same name (another UID) takes its place on node-1
    before its turn: the mover never evicts the replacement (the UID precondition, and the
    cache's UID check), and no device is given twice."""
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    assert "mover" not in w.pods()
    original = w.store.get("Pod", "default", "second")
    w.store.delete("Pod", "default", "second")
    again = running(Running("second", "node-1", (1,)), ["second-claim"])
    again["metadata"]["uid"] = "another-uid"
    w.store.load([again])
    assert w.store.get("Pod", "default", "second")["metadata"]["uid"] != original["metadata"]["uid"]
    w.step(130, every=0.5)
    assert w.store.get("Pod", "default", "second")["metadata"]["uid"] == "another-uid"
    assert_no_device_twice(w.store)


def test_stop_mid_plan_releases_the_hold_and_evicts_no_more() -> None:
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    assert w.s.engine.tracker.room_holds

    async def stop() -> None:  # (on the engine's loop, as close() calls it)
        w.mover.stop()
        await asyncio.sleep(0)

    asyncio.run(stop())
    w.step(130, every=1.0)
    assert "second" in w.pods() and not w.s.engine.tracker.room_holds
    assert w.observer.plans[-1] == ("abandoned", "stopped")


def test_a_target_recreated_under_the_same_name_is_not_made_room_for_by_the_old_plan() -> None:
    w = world(two_moves(), rate=1.0)
    w.plan_for("trainer")
    w.step()
    w.store.delete("Pod", "default", "trainer")
    again = waiting("trainer", "wanted", 2)[1]
    again["metadata"]["uid"] = "uid-trainer-again"
    w.store.load([again])
    w.step()
    assert w.observer.plans[-1] == ("abandoned", "target_gone") and not w.s.engine.tracker.room_holds
    assert "second" in w.pods()
