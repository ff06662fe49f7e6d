"""Filter's make-room hint line (issue 51): computed in the background, at most once per pod per
interval, shown in the reason of the plan's node only while no node fits, never changing which
nodes pass, fail or are Unresolvable, forgotten when the pod is bound or deleted, off at 0.

The planner here is the service's (:class:`HintPlanner`) with ``threaded=False``: what filter
queued is planned when the test calls ``drain()``, as the planning thread would, so "after the
background computed it" is a step of the test, not a wait."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.model.core import Pod
from extender.scheduling.assembly import assemble, in_flight_view
from extender.scheduling.config import EngineConfig, NoObserver
from extender.scheduling.decide.answers import FilterResult
from extender.scheduling.engine import Engine
from extender.scheduling.make_room_hints import (
    BACK_OFF,
    MAX_NAP,
    MAX_WAIT,
    PAUSE,
    QUANTUM,
    SWEEP_SECONDS,
    HintPlanner,
)
from extender.service.runtime import follow
from tests.builders import allocated, claim, device_class, exact, node, pod, reserve, resource_slice
from tests.scheduling.preempt.test_make_room import Mover, gpus, running
from tests.virtual_time import Ticking, VirtualTime

NODES = ["node-1", "node-2", "node-3"]
LINE = "fits on node-1 after moving 1 pod: kubectl dra make-room default/trainer"


class Outcomes(NoObserver):
    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def make_room_hint(self, outcome: str) -> None:
        self.outcomes.append(outcome)


@dataclasses.dataclass
class Setup:
    engine: Engine
    planner: HintPlanner
    store: MemoryStore
    state: ClusterState
    clock: VirtualTime
    observer: Outcomes

    def pod(self, name: str = "trainer") -> Pod:
        return self.state.pods[("default", name)]

    def filter(self, name: str = "trainer") -> FilterResult:
        return self.engine.filter(self.pod(name), NODES)


def objects(*, vip_priority: int = 1000, extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The trainer (priority 100) wants 2 GPUs. node-1 has 2, one held by ``mover`` (priority 1,
    a ReplicaSet's); node-2 has 1, held by ``vip`` (``vip_priority``); node-3 has 1, free. No node
    fits; the plan moves ``mover`` to node-3 and places the trainer on node-1."""
    out: list[dict[str, Any]] = [device_class()]
    for name, count in (("node-1", 2), ("node-2", 1), ("node-3", 1)):
        out += [node(name), resource_slice(f"{name}-s", gpus(count), pool=name, node=name)]
    for m in (Mover("mover", "node-1", (0,)), Mover("vip", "node-2", (0,), priority=vip_priority)):
        c = claim(
            f"{m.name}-claim",
            requests=[exact(count=len(m.gpus))],
            allocation=allocated(*(("driver-a", m.node, f"gpu-{i}") for i in m.gpus)),
        )
        out += [reserve(c, m.name), running(m, [f"{m.name}-claim"])]
    out += [claim("wanted", requests=[exact(count=2)]), pod("trainer", ["wanted"], priority=100)]
    return out + (extra or [])


def setup(objs: list[dict[str, Any]], **config: Any) -> Setup:
    store = MemoryStore()
    store.load(objs)
    state = ClusterState()
    for obj in store.all():
        state.apply(obj)
    follow(store, state)
    engine_config = EngineConfig(**config)
    clock = VirtualTime()
    cel = CelEnvironment()
    view = in_flight_view(state, cel, engine_config, clock=clock)
    observer = Outcomes()
    planner = HintPlanner(
        state,
        view[1],
        cel,
        engine_config,
        clock=clock,
        plan_clock=Ticking(0.0001),
        hand_over=lambda seconds: None,
        observer=observer,
        threaded=False,
    )
    engine = assemble(state, MemoryAPI(store), cel, engine_config, clock=clock, view=view, hints=planner)
    return Setup(engine, planner, store, state, clock, observer)


def verdicts(result: FilterResult) -> tuple[list[str], list[str], list[str], str]:
    """Which nodes passed, failed (Unschedulable) and are Unresolvable: what the line must not change."""
    return result.passed, sorted(result.failed), sorted(result.unresolvable), result.error


def test_the_line_shows_on_the_plans_node_only_after_the_background_computed_it() -> None:
    s = setup(objects())
    first = s.filter()
    assert not any("make-room" in r for r in first.unresolvable.values())
    assert s.planner.drain() == 1  # filter only asked; the plan was made here, off its path
    assert s.observer.outcomes == ["plan"]
    second = s.filter()
    assert verdicts(second) == verdicts(first) == ([], [], NODES, "")
    assert second.unresolvable["node-1"] == f"{first.unresolvable['node-1']}; {LINE}"
    for other in ("node-2", "node-3"):
        assert second.unresolvable[other] == first.unresolvable[other]
    # The decision log keeps what was answered.
    assert LINE in str(s.engine.log.entries[-1])


def test_a_pod_is_planned_at_most_once_per_interval() -> None:
    s = setup(objects(), make_room_hint_seconds=30.0)
    s.filter()
    s.clock.now += 10
    s.filter()
    assert s.planner.drain() == 1
    s.clock.now += 19  # 29 s after the first ask
    s.filter()
    assert s.planner.drain() == 0
    s.clock.now += 2  # 31 s
    s.filter()
    assert s.planner.drain() == 1
    assert s.observer.outcomes == ["plan", "plan"]


def test_the_line_is_never_shown_when_the_pod_fits_somewhere() -> None:
    """A hint computed while no node fitted is stale once one does: node-3 gains a second GPU
    (a slice update), the trainer fits there, and no reason carries the line (nor is a plan asked)."""
    s = setup(objects())
    s.filter()
    s.planner.drain()
    assert LINE in s.filter().unresolvable["node-1"]
    grown = s.store.get("ResourceSlice", "", "node-3-s")
    grown["spec"]["devices"] = gpus(2)
    s.store.update(grown)
    fits = s.filter()
    assert fits.passed == ["node-3"]
    assert not any("make-room" in r for r in [*fits.unresolvable.values(), *fits.failed.values()])
    assert s.planner.drain() == 0


def test_a_stale_plan_whose_node_now_fits_is_not_shown() -> None:
    """The mover is gone (its claim released): the trainer fits on node-1, the plan's own node."""
    s = setup(objects())
    s.filter()
    s.planner.drain()
    s.store.delete("Pod", "default", "mover")
    s.store.delete("ResourceClaim", "default", "mover-claim")
    fits = s.filter()
    assert fits.passed == ["node-1"]
    assert not any("make-room" in r for r in fits.unresolvable.values())


def test_the_line_leaves_unschedulable_nodes_unschedulable() -> None:
    """With --device-preemption the plan's node is Unschedulable (the mover's priority is lower
    than the trainer's): the line goes into FailedNodes, which keep the node, after the
    preemption note; node-2 (a more important pod) stays Unresolvable."""
    s = setup(objects(), device_preemption=True)
    first = s.filter()
    assert verdicts(first) == ([], ["node-1"], ["node-2", "node-3"], "")
    s.planner.drain()
    second = s.filter()
    assert verdicts(second) == verdicts(first)
    assert second.failed["node-1"] == f"{first.failed['node-1']}; {LINE}"
    assert second.unresolvable == first.unresolvable


def test_pass_and_fail_are_those_of_an_engine_without_hints() -> None:
    s = setup(objects())
    s.filter()
    s.planner.drain()
    with_line = s.filter()
    state = ClusterState.from_objects(objects())
    plain = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), EngineConfig())
    without = plain.filter(state.pods[("default", "trainer")], NODES)
    assert verdicts(with_line) == verdicts(without)
    assert {n: r.removesuffix(f"; {LINE}") for n, r in with_line.unresolvable.items()} == without.unresolvable


def test_the_hint_is_forgotten_when_the_pod_is_bound() -> None:
    s = setup(objects())
    s.filter()
    s.planner.drain()
    assert s.engine.entries()["make_room_hints"] == 1
    # The mover leaves (as the plan says), the trainer fits on node-1 and is bound there.
    s.store.delete("Pod", "default", "mover")
    s.store.delete("ResourceClaim", "default", "mover-claim")
    assert s.filter().passed == ["node-1"]
    assert asyncio.run(s.engine.bind("default", "trainer", "uid-trainer", "node-1")) == ""
    assert s.engine.entries()["make_room_hints"] == 0


def test_a_plan_still_on_its_way_for_a_pod_bound_meanwhile_is_not_kept() -> None:
    """Even when the pod no longer counts as waiting (the memory let it go): its plan is on the
    way, so the bind marks it gone."""
    other = [claim("wanted-2", requests=[exact(count=2)]), pod("trainer-2", ["wanted-2"], priority=100)]
    s = setup(objects(extra=other))
    s.planner.memory = 1  # trainer-2's ask lets trainer's go
    s.filter()
    s.filter("trainer-2")
    assert "uid-trainer" not in s.planner._waiting
    s.planner.forget("uid-trainer")  # bound before its plan was made
    assert s.planner.drain() == 2
    assert [key for _, (key, _) in s.planner._hints.items()] == [("default", "trainer-2")]


def test_binding_a_pod_never_asked_for_leaves_nothing_behind() -> None:
    s = setup(objects())
    for uid in ("uid-a", "uid-b"):
        s.planner.forget(uid)
    assert len(s.planner._gone) == 0 and len(s.planner._asked) == 0
    s.filter()  # asked for: its bind is remembered until its plan can no longer come
    s.planner.forget("uid-trainer")
    assert "uid-trainer" in s.planner._gone


def test_the_hint_is_forgotten_when_the_pod_is_deleted_or_ages_out() -> None:
    """A deleted pod's hint goes at the next computation queued (for any pod); one nobody asks
    about again ages out after two intervals."""
    other = [claim("wanted-2", requests=[exact(count=2)]), pod("trainer-2", ["wanted-2"], priority=100)]
    s = setup(objects(extra=other), make_room_hint_seconds=30.0)
    s.filter()
    s.planner.drain()
    assert s.engine.entries()["make_room_hints"] == 1
    s.store.delete("Pod", "default", "trainer")
    s.clock.now += SWEEP_SECONDS  # (hints are swept at most this often)
    s.filter("trainer-2")  # queues trainer-2's plan: trainer's hint is swept
    assert s.engine.entries()["make_room_hints"] == 0
    s.planner.drain()
    assert s.engine.entries()["make_room_hints"] == 1
    s.clock.now += 59
    assert s.engine.entries()["make_room_hints"] == 1
    s.clock.now += 2
    assert s.engine.entries()["make_room_hints"] == 0
    assert s.planner._keys  # the key goes at the next sweep
    s.clock.now += SWEEP_SECONDS
    s.filter("trainer-2")
    assert set(s.planner._keys) == set()


def test_a_full_queue_drops_the_pod_and_counts_it_skipped() -> None:
    other = [claim("wanted-2", requests=[exact(count=2)]), pod("trainer-2", ["wanted-2"], priority=100)]
    s = setup(objects(extra=other))
    s.planner.queue_size = 1
    s.filter()
    s.filter("trainer-2")
    assert s.planner.drain() == 1
    assert s.observer.outcomes == ["skipped", "plan"]


def test_no_plan_no_line() -> None:
    """The vip on node-2 may move too (priority 1): still one plan, node-1's. With node-3 gone
    (nowhere to move anyone), no plan: counted 'none', and no reason changes."""
    s = setup([o for o in objects() if "node-3" not in str(o.get("metadata", {}).get("name"))])
    names = ["node-1", "node-2"]
    first = s.engine.filter(s.pod(), names)
    s.planner.drain()
    assert s.observer.outcomes == ["none"]
    assert s.engine.filter(s.pod(), names).unresolvable == first.unresolvable


def test_off_when_the_interval_is_0() -> None:
    s = setup(objects(), make_room_hint_seconds=0.0)
    first = s.filter()
    assert s.planner.drain() == 0
    assert s.filter() == first
    assert s.observer.outcomes == []


class Naps:
    """The planner's clock, moved by its naps (and by the test); ``busy``: a verb runs all along."""

    def __init__(self) -> None:
        self.now = 100.0
        self.naps: list[float] = []
        self.busy: HintPlanner | None = None

    def __call__(self) -> float:
        return self.now

    def nap(self, seconds: float) -> None:
        self.naps.append(seconds)
        self.now += seconds
        if self.busy is not None:
            self.busy.touch()


def polite_planner(naps: Naps) -> HintPlanner:
    state = ClusterState()
    config = EngineConfig()
    cel = CelEnvironment()
    view = in_flight_view(state, cel, config)
    return HintPlanner(state, view[1], cel, config, plan_clock=naps, hand_over=naps.nap, threaded=False)


def test_the_planner_keeps_off_the_gil_while_verbs_run_and_counts_only_its_own_time() -> None:
    naps = Naps()
    planner = polite_planner(naps)
    assert planner._polite() == 100.0  # (nothing ran before: it hands over at once)
    naps.now += 2 * QUANTUM  # it ran: the GIL is handed over once
    assert planner._polite() == pytest.approx(100.0 + 2 * QUANTUM)
    assert naps.naps == [PAUSE, PAUSE]
    planner.touch()  # a verb: the planner waits until none ran for BACK_OFF
    ran = planner._polite()
    assert naps.naps == [PAUSE, PAUSE, PAUSE, BACK_OFF]
    assert ran == pytest.approx(100.0 + 2 * QUANTUM)  # the waits are not planning time
    # Verbs all along: the naps grow to MAX_NAP, and after MAX_WAIT it runs again.
    naps.naps.clear()
    naps.busy = planner
    planner.touch()
    planner._polite()
    assert naps.naps[:5] == [PAUSE, BACK_OFF, 2 * BACK_OFF, 4 * BACK_OFF, 8 * BACK_OFF]
    assert max(naps.naps) == MAX_NAP and MAX_WAIT <= sum(naps.naps) < MAX_WAIT + MAX_NAP
