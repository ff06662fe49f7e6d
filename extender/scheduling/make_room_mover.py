"""Make room, carried out (issue 52; ``--make-room``, off by default): for a pod that has waited
for devices long enough and has a make-room plan, keep the devices it will get, evict the
plan's pods through the Eviction API, wait until their claims are released, and let
kube-scheduler place the recreated pods and the waiting one.

One plan at a time, on the engine's loop (:meth:`Mover.step`, every :data:`TICK` seconds), and
only while this replica leads (``leading``). A plan goes through three phases:

1. **evicting**: the hold is set first (:meth:`Tracker.hold_room`: the waiting pod keeps, on
   the plan's node, every device it will get there, from every pod of no higher priority, the
   moved pods' replacements included; its own filter and bind may count the moved pods' claims
   as free, and the bind waits for their release, as a preemptor's does). Then the moved pods
   are evicted one at a time (``pods/eviction`` with the pod's UID as precondition: never a
   plain DELETE, so the API server checks every PodDisruptionBudget), at most
   ``rate`` a minute cluster-wide; a pod sharing a budget with one evicted earlier in the plan
   waits until that one is gone. A 429 ends the plan.
2. **releasing**: until every claim the moved pods held is deallocated (or deleted), not
   merely until the evictions were answered.
3. **placing**: the freed devices stay held until the waiting pod is bound (the plan is
   carried out), for at most ``hold_for`` seconds.

Before every step the plan is checked again on the current snapshot; it is abandoned (the hold
released, the reason logged, counted and put in an Event) when it no longer holds: the waiting
pod is gone, bound elsewhere or no longer fits there with the moved pods gone (a new pod took a
freed device), a pod still to move changed, a budget or the API server refused, this replica
stopped leading, or a timeout passed. A pod whose plan was abandoned is not planned for again
for ``cooldown`` seconds, and every workload moved rests as long, so nothing loops; pods the
moves recreated are younger than ``--make-room-min-age``, so no plan moves them again, whichever
replica leads next (the in-memory state does not survive a fail-over; the age rule does).

``dry_run``: the plan that would start is logged and counted, nothing evicted or held.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from cachetools import TTLCache

from extender.cluster.api import ClusterAPI
from extender.cluster.state import ClusterState, Key
from extender.model.core import Pod
from extender.scheduling.config import EngineConfig, NoObserver, Observer, Rules
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.inflight.snapshots import Snapshots
from extender.scheduling.inflight.tracker import Tracker
from extender.scheduling.make_room_hints import HintPlanner
from extender.scheduling.preempt import mover_bounds
from extender.scheduling.preempt.make_room import Plan
from extender.scheduling.preempt.movable import unmovable, workload_of
from extender.scheduling.preempt.nominated import RoomHold
from extender.scheduling.write import evictions

log = logging.getLogger("dra_extender.make_room")

#: Seconds between two steps.
TICK = 0.5
#: Pods planned for again per step without a filter (those whose interval passed).
ASKED_AGAIN = 4
#: Seconds a "leading" answer is reused while no plan runs.
LEADING_READ = 2.0
#: Outcomes of ``dra_extender_make_room_plans_total``.
PLAN_OUTCOMES = ("started", "carried_out", "abandoned", "dry_run")
#: Reasons of ``dra_extender_make_room_abandoned_total``.
ABANDON_REASONS = (
    "budget",
    "throttled",
    "refused",
    "error",
    "changed",
    "target_gone",
    "not_leading",
    "timeout",
    "stopped",
)
#: Pods remembered (given up on, or logged in a dry run) at most.
MEMORY = 4096

Phase = Literal["evicting", "releasing", "placing"]


@dataclass(slots=True)
class InFlight:
    """The one plan being carried out."""

    target: Pod
    plan: Plan
    #: The moved pods as planned (the cache's records at the start), in the plan's order.
    moving: list[Pod]
    started: float
    phase: Phase = "evicting"
    #: How many of ``moving`` were evicted (or found gone) so far.
    done: int = 0
    #: The budgets each evicted pod counted against, by UID.
    budgets: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    #: The claims the moved pods held (key -> claim UID): released when each is unallocated or gone.
    claims: dict[Key, str] = field(default_factory=dict)
    released_at: float | None = None
    #: The last check that the plan still holds: (what it was judged on, why not or None).
    judged: tuple[tuple[int, int, int, str], str | None] | None = None

    @property
    def name(self) -> str:
        return f"{self.target.namespace}/{self.target.name}"


class Mover:
    """Carries out make-room plans (see the module). ``leading``: whether this replica may
    act now (the Lease); ``planner``: the background planner, whose plans it carries out;
    ``config``: the engine's configuration (read at every step)."""

    def __init__(
        self,
        state: ClusterState,
        tracker: Tracker,
        snapshots: Snapshots,
        api: ClusterAPI,
        planner: HintPlanner,
        config: Callable[[], EngineConfig],
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        leading: Callable[[], Awaitable[bool]],
        observer: Observer | None = None,
    ) -> None:
        self.state = state
        self.tracker = tracker
        self.snapshots = snapshots
        self.api = api
        self.planner = planner
        self._config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.leading = leading
        self.observer: Observer = observer or NoObserver()
        settings = config().mover
        self.rate = mover_bounds.EvictionRate(settings.rate, clock)
        self.cooldown = mover_bounds.Cooldown(settings.cooldown, clock)
        #: Pods whose plan was abandoned (or shown in a dry run): not planned for again meanwhile.
        #: At least two hint intervals: a hint lives that long, and is not acted on twice.
        remembered = max(settings.cooldown, 2 * config().make_room_hint_seconds, 1.0)
        self.given_up: TTLCache[str, str] = TTLCache(MEMORY, remembered, timer=clock)
        self.current: InFlight | None = None
        planner.resting = self.cooldown.resting
        self._stopped = False
        self._events: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        #: The last answer of ``leading`` and when (``-inf``: never asked).
        self._led = (False, float("-inf"))

    @property
    def config(self) -> EngineConfig:
        """The engine's configuration now (it may be reconfigured: the bounds follow it)."""
        config = self._config()
        self.rate.per_minute = config.mover.rate
        self.cooldown.seconds = config.mover.cooldown
        return config

    # --- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Step every :data:`TICK` seconds until :meth:`stop` (a step never raises)."""
        while not self._stopped:
            try:
                await self.step()
            except Exception:  # never let the mover die: it runs for the life of the service
                log.exception("make room: step failed")
            await asyncio.sleep(TICK)

    def stop(self) -> None:
        """Stop, releasing the hold of a plan in flight (the process is going away)."""
        self._stopped = True
        if self.current is not None:
            self._abandon("stopped", "the extender is stopping")

    async def start(self) -> None:
        """Run on the current loop (the engine's) until :meth:`close`."""
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def close(self) -> None:
        self.stop()
        if self._task is not None:
            self._task.cancel()

    async def step(self) -> None:
        """One step: advance the plan in flight, or start the next."""
        if not self.config.mover.on:
            return
        if self.current is None and not self.planner.waiting():
            return  # nobody waits: not even the Lease is read
        leading = await self._leads()
        if leading:  # pods still waiting are planned for on a quiet cluster too
            self.planner.ask_again(ASKED_AGAIN)
        if self.current is not None:
            if not leading:
                self._abandon("not_leading", "this replica no longer leads")
                return
            await self._advance(self.current)
            return
        if leading:
            await self._start_next()

    async def _leads(self) -> bool:
        """Whether this replica leads: asked at every step while a plan runs, else at most
        every :data:`LEADING_READ` seconds (in the sidecar it is a read of the Lease)."""
        now = self.clock()
        if self.current is None and now - self._led[1] < LEADING_READ:
            return self._led[0]
        try:
            leading = await self.leading()
        except Exception as exc:  # cannot tell: not leading (a plan in flight is abandoned)
            log.warning("make room: cannot tell whether this replica leads: %s", exc)
            leading = False
        self._led = (leading, now)
        return leading

    # --- choosing a plan ---------------------------------------------------------------------------

    def _choose(self) -> tuple[Pod, Plan] | None:
        """The pod that has waited longest (then the most important) among those with a plan,
        waiting long enough, not given up on, whose plan moves no resting workload."""
        now = self.wall_clock()
        resting = self.cooldown.resting()
        best: tuple[tuple[float, int, str], Pod, Plan] | None = None
        for key, uid, hint in self.planner.plans():
            pod = self.state.pods.get(key)
            plan = hint.plan
            if pod is None or pod.uid != uid or pod.node_name or pod.deleting or plan is None:
                continue
            if uid in self.given_up:
                continue
            since = mover_bounds.waiting_since(pod)
            if since is None or now - since < self.config.mover.after:
                continue
            moving = [self.state.pods.get(_key(m.pod)) for m in plan.moves]
            if any(p is None or p.uid != m.uid for p, m in zip(moving, plan.moves, strict=True)):
                continue  # a moved pod is gone already: the next plan will say
            if any(workload_of(p) in resting for p in moving if p is not None):
                continue
            rank = (since, -pod.priority, f"{pod.namespace}/{pod.name}")
            if best is None or rank < best[0]:
                best = (rank, pod, plan)
        return (best[1], best[2]) if best is not None else None

    async def _start_next(self) -> None:
        chosen = self._choose()
        if chosen is None:
            return
        target, plan = chosen
        moving = [p for m in plan.moves if (p := self.state.pods.get(_key(m.pod))) is not None]
        what = f"{target.namespace}/{target.name} on {plan.node} by moving " + ", ".join(
            m.pod for m in plan.moves
        )
        if self.config.mover.dry_run:
            self.given_up[target.uid] = "dry run"
            self.observer.make_room_plan("dry_run")
            log.info("make room (dry run): would make room for %s", what)
            return
        flight = InFlight(target, plan, moving, self.clock())
        flight.claims = {
            c.key: c.uid
            for p in moving
            for c in self.snapshots.current().claims.values()
            if c.allocation is not None and any(e.get("uid") == p.uid for e in c.reserved_for)
        }
        moved = frozenset(p.uid for p in moving)
        self.tracker.hold_room(RoomHold(target, plan.node, moved, frozenset(flight.claims)))
        self.current = flight
        snapshot = self.snapshots.current()
        why = self._no_longer_holds(snapshot, flight)
        if why is not None:
            # Stale: the cache changed since the plan was made (pods landed on its node, say).
            # Nothing was done: no event, no count, no cooldown; the pod is planned for again
            # at its next filter.
            self.tracker.release_room(target.uid)
            self.current = None
            self.planner.replan(target.uid)
            log.info("make room: the plan for %s is stale (%s); planning again", flight.name, why)
            return
        self.observer.make_room_plan("started")
        log.info("make room: making room for %s", what)
        self._event(
            target,
            "MakingRoom",
            f"moving {len(moving)} pod(s) off {plan.node} so that this pod's devices fit there: "
            + ", ".join(m.pod for m in plan.moves),
            warning=False,
        )
        await self._advance(flight)

    # --- carrying it out ---------------------------------------------------------------------------

    def _no_longer_holds(self, snapshot: Snapshot, flight: InFlight) -> str | None:
        """:meth:`_judged` once per change of the cache, the tracker or the plan's progress
        (every step asks; a step with nothing new does not allocate again)."""
        key = (self.state.version, self.tracker.assumed.version, flight.done, flight.phase)
        if flight.judged is None or flight.judged[0] != key:
            flight.judged = (key, self._judged(snapshot, flight))
        return flight.judged[1]

    def _judged(self, snapshot: Snapshot, flight: InFlight) -> str | None:
        target = snapshot.state.pods.get(flight.target.key)
        if target is None or target.uid != flight.target.uid or target.deleting:
            return "the pod is gone"
        if target.uid in self.tracker.binds:
            return None  # kube-scheduler chose it a node: its bind (which waits for the release) decides
        if flight.phase == "evicting":
            changed = mover_bounds.moved_pod_changed(snapshot, flight.plan.node, flight.moving[flight.done :])
            if changed is not None:
                return changed
        nominations = self.tracker.nominations(self.config)
        assert nominations is not None  # (the hold is set)
        return mover_bounds.target_fits(
            snapshot,
            target,
            flight.plan.node,
            nominations,
            self.tracker.victims_of,
            timeout=self.config.allocation_timeout,
        )

    async def _advance(self, flight: InFlight) -> None:
        settings = self.config.mover
        target = self.state.pods.get(flight.target.key)
        if target is not None and target.uid == flight.target.uid and target.node_name:
            self._carried_out(flight, target.node_name)
            return
        if flight.phase != "placing" and self.clock() - flight.started > settings.timeout:
            self._abandon(
                "timeout", f"the moved pods' claims were not released within {settings.timeout:g} s"
            )
            return
        released = flight.released_at
        if flight.phase == "placing" and released is not None and self.clock() - released > settings.hold_for:
            self._abandon("timeout", f"not bound within {settings.hold_for:g} s of the room made")
            return
        snapshot = self.snapshots.current()
        why = self._no_longer_holds(snapshot, flight)
        if why is not None:
            self._abandon("target_gone" if why == "the pod is gone" else "changed", why)
            return
        if flight.phase == "evicting":
            await self._evict_next(flight)
        if flight.phase == "releasing" and self._released(flight):
            flight.phase = "placing"
            flight.released_at = self.clock()
            log.info("make room: room made for %s on %s", flight.name, flight.plan.node)
            self._event(
                flight.target,
                "MadeRoom",
                f"the moved pods' devices on {flight.plan.node} are released and kept for this pod",
                warning=False,
            )

    async def _evict_next(self, flight: InFlight) -> None:
        while flight.done < len(flight.moving) and self.current is flight:
            pod = flight.moving[flight.done]
            budgets = mover_bounds.budgets_of(pod, self.state.pdbs.values())
            if self._budget_busy(flight, budgets):
                return  # one at a time per budget: an earlier pod under it is still going
            if self.rate.wait() > 0:
                return
            current = self.state.pods.get(pod.key)
            if current is not None and current.uid == pod.uid:
                why = unmovable(current, flight.target.priority, self._rules(), self.wall_clock())
                if why is not None:  # it changed since the plan: an opt-out, a new priority...
                    self._abandon("changed", f"{pod.namespace}/{pod.name} may no longer move: one {why}")
                    return
            self.rate.spend()
            outcome = await self._evict(flight, pod)
            self.observer.make_room_eviction(outcome)
            if outcome not in ("evicted", "gone"):
                return  # abandoned
            flight.budgets[pod.uid] = budgets
            flight.done += 1
            self.cooldown.moved(workload_of(pod))
            if outcome == "evicted":
                self._event(
                    pod,
                    "MovedToMakeRoom",
                    f"evicted to make room for {flight.name} on {flight.plan.node}; "
                    "its controller recreates it",
                    warning=False,
                )
        if flight.done == len(flight.moving):
            flight.phase = "releasing"

    async def _evict(self, flight: InFlight, pod: Pod) -> str:
        """Evict ``pod``; its outcome (the plan abandoned unless the pod is gone or going)."""
        done = await evictions.evict(self.api, pod)
        if done.unknown:  # it may have been evicted: its workload rests as if it was
            self.cooldown.moved(workload_of(pod))
        if not done.moved:
            reason = "not_leading" if done.not_leading else done.outcome
            self._abandon(reason, done.why)
        return done.outcome

    def _rules(self) -> Rules:
        """The planner's rules for a pod about to be evicted, without the workloads resting
        (the plan's own earlier moves put its workload to rest)."""
        return self.config.make_room

    def _budget_busy(self, flight: InFlight, budgets: frozenset[tuple[str, str]]) -> bool:
        """Whether a budget of the next pod is still busy with an earlier eviction of the plan:
        that pod is not gone yet, or the budget (as the disruption controller last wrote it)
        allows no disruption yet, because the replacement is not Ready. The Eviction API would
        answer 429 meanwhile; waiting for the budget is what makes the evictions serial."""
        if not budgets:
            return False
        for earlier in flight.moving[: flight.done]:
            shared = flight.budgets.get(earlier.uid, frozenset()) & budgets
            if not shared:
                continue
            now = self.state.pods.get(earlier.key)
            if now is not None and now.uid == earlier.uid:
                return True
            for key in shared:
                pdb = self.state.pdbs.get(key)
                if pdb is not None and pdb.disruptions_allowed < 1:
                    return True
        return False

    def _released(self, flight: InFlight) -> bool:
        """Every claim the moved pods held is deallocated or gone (the cache shows it)."""
        claims = self.state.claims
        for key, uid in flight.claims.items():
            claim = claims.get(key)
            if claim is not None and claim.uid == uid and claim.allocation is not None:
                if any(e.get("uid") not in {p.uid for p in flight.moving} for e in claim.reserved_for):
                    continue  # shared with a pod that stays: never freed by this plan
                return False
        return True

    # --- ending ------------------------------------------------------------------------------------

    def _carried_out(self, flight: InFlight, node: str) -> None:
        self.tracker.release_room(flight.target.uid)
        self.current = None
        self.observer.make_room_plan("carried_out")
        where = "" if node == flight.plan.node else f" (bound to {node}, not {flight.plan.node})"
        log.info("make room: carried out for %s: %d pod(s) moved%s", flight.name, flight.done, where)

    def _abandon(self, reason: str, why: str) -> None:
        flight = self.current
        if flight is None:
            return
        self.tracker.release_room(flight.target.uid)
        self.current = None
        self.given_up[flight.target.uid] = reason
        self.observer.make_room_plan("abandoned", reason)
        log.warning("make room: abandoned for %s (%s): %s", flight.name, reason, why)
        self._event(
            flight.target,
            "MakeRoomAbandoned",
            f"stopped after moving {flight.done} of {len(flight.moving)} pod(s) "
            f"off {flight.plan.node}: {why}",
            warning=True,
        )

    def _event(self, pod: Pod, reason: str, message: str, *, warning: bool) -> None:
        """Best effort, off the step: an Event on ``pod``."""

        async def record() -> None:
            try:
                await self.api.record_event(pod.raw, reason, message, warning)
            except Exception as exc:  # an event is never worth a plan
                log.info(
                    "make room: event %s on %s/%s not recorded: %s", reason, pod.namespace, pod.name, exc
                )

        task = asyncio.get_running_loop().create_task(record())
        self._events.add(task)
        task.add_done_callback(self._events.discard)


def _key(name: str) -> Key:
    namespace, _, pod = name.partition("/")
    return (namespace, pod)
