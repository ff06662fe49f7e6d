"""Filter's make-room hint (issue 51): when no node fits a pod, one line in the reason of the
node a make-room plan frees, "fits on node-12 after moving 2 pods: kubectl dra make-room
ml/trainer", computed off filter's path.

Filter only reads a hint an earlier computation left (:meth:`HintPlanner.hint`) and asks for
the next one (:meth:`HintPlanner.ask`: at most once per pod per ``make_room_hint_seconds``; a
bounded queue that drops when full). What it asks runs in two parts, neither inside a verb:

* on the engine's loop, after the verb (``schedule``: ``EngineWorker.call_soon``): the cache's
  tables and the claims decisions see are copied (dict copies in C, a fraction of a
  millisecond at 5,000 nodes; one copy serves every pod asked before the cache changes);
* on a thread of its own: a state and snapshot of its own are built over those copies (pod
  indexes, devices in use, an inventory kept until the slices change, a CEL environment of its
  own: no memo table is shared with the loop's decisions) and the pure planner
  (:func:`~extender.scheduling.preempt.make_room.plan`) runs on them.

One process has one GIL: a thread that plans while a verb runs makes the verb wait for it
(measured: filter p50 2.8 -> 6.5 ms with a plan always running, ``python -m bench.service_bench
--hints-ab``). So the planner runs only while the verbs leave the loop idle: filter,
prioritize and preempt mark the moment (:meth:`HintPlanner.touch`; a bind mostly awaits the API
server), and the planner's clock, read all through a plan, hands the GIL over every
:data:`QUANTUM` of planning and waits while a verb ran in the last :data:`BACK_OFF` (at most
:data:`MAX_WAIT` at a time, so that a busy scheduler delays hints, never stops them). Time
spent waiting is not planning time: the planner's budget and the allocator's timeouts count
only the time it ran. What reads no clock (building the thread's inventory after a slice
change) holds the GIL up to the interpreter's switch interval (5 ms) at a time; a plan's steps
between two reads took at most 0.9 ms at 500 nodes.

What the hint does not see: devices of binds whose claim writes are in flight (the plan is a
hint, made again every interval, and shown only while the pod fits no node). A hint is
forgotten when the pod is bound (by this engine) or deleted, or after two intervals.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any

from cachetools import TTLCache

from extender.allocator import AllocatedState, Inventory
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState, Key
from extender.model.core import Pod
from extender.model.dra import ResourceClaim
from extender.scheduling.config import EngineConfig, NoObserver, Observer
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.hint_line import Hint, hint_line
from extender.scheduling.inflight.assumed import Overlay
from extender.scheduling.inflight.snapshots import Snapshots
from extender.scheduling.preempt.make_room import Plan, plan

log = logging.getLogger("dra_extender.make_room_hints")

#: Pods waiting for a plan; one asked while it is full is dropped (and asked again next interval).
QUEUE_SIZE = 64
#: Pods whose hint (or the interval since they were asked) is remembered at most.
MEMORY = 4096
#: Seconds of planning between two hand-overs of the GIL to the engine's loop.
QUANTUM = 0.0005
#: The planner waits while a verb ran less than this long ago (seconds).
BACK_OFF = 0.005
#: The longest it waits at a time (then it runs one quantum).
MAX_WAIT = 0.5
#: Its longest nap while it waits.
MAX_NAP = 0.05
#: How long the planning thread sleeps at a hand-over (long enough for a waiting thread to take it).
PAUSE = 0.0001
#: The planning thread ends after this many idle seconds (started again by the next pod asked).
IDLE_EXIT = 60.0
#: Hints of pods bound or deleted meanwhile are looked for at most this often (seconds).
SWEEP_SECONDS = 5.0
#: Outcomes of ``dra_extender_make_room_hints_total``.
OUTCOMES = ("plan", "none", "skipped")


@dataclass(frozen=True, slots=True)
class _Capture:
    """The cache's tables and the claims decisions see, as of one moment on the loop."""

    key: tuple[int, int]
    tables: dict[str, Any]
    claims: dict[Key, ResourceClaim]


class HintPlanner:
    """Make-room plans for pods that fit no node, computed on a thread of their own (see the
    module). Built by the service's assembly (:func:`extender.service.runtime.hint_planner`);
    ``threaded=False`` (tests): queued pods are planned only by :meth:`drain`."""

    def __init__(
        self,
        state: ClusterState,
        snapshots: Snapshots,
        cel: CelEnvironment,
        config: EngineConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        plan_clock: Callable[[], float] = time.monotonic,
        hand_over: Callable[[float], None] = time.sleep,
        schedule: Callable[..., None] | None = None,
        observer: Observer | None = None,
        threaded: bool = True,
        queue_size: int = QUEUE_SIZE,
        memory: int = MEMORY,
    ) -> None:
        self.state = state
        self.snapshots = snapshots
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self._plan_clock = plan_clock
        self._hand_over = hand_over
        #: The planning thread's own environment (CEL's caches are not shared across threads),
        #: on the clock the allocator's deadlines are set by.
        self._cel = CelEnvironment(cel.options, clock=self._polite)
        self._schedule = schedule
        self.observer: Observer = observer or NoObserver()
        self.threaded = threaded
        self.queue_size = queue_size
        self.memory = memory
        #: Loop only: pods asked within the interval.
        self._asked: TTLCache[str, bool] = self._cache(config.make_room_hint_seconds)
        #: Both threads, under the lock: uid -> the hint, or None (planned: nothing to show).
        self._lock = threading.Lock()
        self._hints: TTLCache[str, tuple[Key, Hint | None]] = self._cache(2 * config.make_room_hint_seconds)
        self._gone: TTLCache[str, bool] = self._cache(2 * config.make_room_hint_seconds)
        #: Each hint's pod key, for the sweep: iterating a TTLCache runs Python code per entry
        #: (1.6 ms for 370 entries on the engine's loop), a dict's copy does not.
        self._keys: dict[str, Key] = {}
        #: The hints with a plan (few), for the mover: read without walking every hint.
        self._planned: dict[str, tuple[Key, Hint]] = {}
        #: Pods asked for and not bound, with the nodes of their last filter (:meth:`ask_again`).
        self._waiting: dict[str, tuple[Pod, frozenset[str] | None]] = {}
        self._swept_at = -SWEEP_SECONDS
        self._queue: deque[tuple[Pod, _Capture, frozenset[str] | None]] = deque()
        #: Under the lock: per pod UID, its plans queued or being made.
        self._planning: Counter[str] = Counter()
        self._wake = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._last: _Capture | None = None
        #: The planning thread's own: the inventory (until the slices or the features change),
        #: the last snapshot; let go when the thread ends, idle.
        self._inventory: tuple[tuple[int, Any], Inventory] | None = None
        self._built: tuple[_Capture, Snapshot] | None = None
        self._ran_since = 0.0
        #: When a verb last ran (on ``plan_clock``), and how long the planner has waited so far.
        self._busy_at = -BACK_OFF
        self._waited = 0.0
        #: The workloads the mover moved within its cooldown (their pods are left where they
        #: are); read by the planning thread (a frozenset: replaced, never changed).
        self.resting: Callable[[], frozenset[str]] = frozenset

    def _cache(self, ttl: float) -> TTLCache[str, Any]:
        return TTLCache(maxsize=self.memory, ttl=max(ttl, 1e-9), timer=self.clock)

    @property
    def on(self) -> bool:
        return self.config.make_room_hint_seconds > 0

    def reconfigure(self, config: EngineConfig) -> None:
        if config.make_room_hint_seconds != self.config.make_room_hint_seconds:
            self._asked = self._cache(config.make_room_hint_seconds)
            with self._lock:
                self._hints = self._cache(2 * config.make_room_hint_seconds)
                self._gone = self._cache(2 * config.make_room_hint_seconds)
                self._keys = {}
                self._planned = {}
        self.config = config

    def entries(self) -> int:
        with self._lock:
            return len(self._hints)

    def touch(self) -> None:
        self._busy_at = self._plan_clock()

    # --- on the engine's loop ---------------------------------------------------------------

    def hint(self, pod: Pod) -> Hint | None:
        if not self.on:
            return None
        with self._lock:
            entry = self._hints.get(pod.uid)
        return entry[1] if entry is not None else None

    def plans(self) -> list[tuple[Key, str, Hint]]:
        """Every pod's hint with a plan that moves pods, made within two intervals (as long as
        a hint lives): (pod key, pod UID, hint)."""
        oldest = self.clock() - 2 * self.config.make_room_hint_seconds
        with self._lock:
            for uid in [u for u, (_, hint) in self._planned.items() if hint.made < oldest]:
                del self._planned[uid]
            return [(key, uid, hint) for uid, (key, hint) in self._planned.items()]

    def ask(self, pod: Pod, candidates: Collection[str] | None = None) -> None:
        if not self.on or pod.uid in self._asked:
            return
        self._asked[pod.uid] = True
        targets = frozenset(candidates) if candidates is not None else None
        if len(self._waiting) >= self.memory:
            self._waiting.pop(next(iter(self._waiting)))
        self._waiting[pod.uid] = (pod, targets)
        if self._schedule is None:
            self._enqueue(pod, targets)
        else:
            self._schedule(self._enqueue, pod, targets)

    def forget(self, uid: str) -> None:
        if uid not in self._waiting and uid not in self._planning and uid not in self._keys:
            return  # never asked for (most bound pods: 0.8% of the CPU at 500 x 8 went here)
        self._asked.pop(uid, None)
        with self._lock:
            self._hints.pop(uid, None)
            self._keys.pop(uid, None)
            self._planned.pop(uid, None)
            self._gone[uid] = True
        self._waiting.pop(uid, None)

    def waiting(self) -> bool:
        """Whether pods asked for may still wait (a plan, or one to ask for again)."""
        return bool(self._waiting or self._planned)

    def ask_again(self, most: int) -> None:
        """For the mover: plan again, without a filter, for at most ``most`` of the pods asked
        for before whose interval has passed and that still wait (kube-scheduler tries an
        unschedulable pod again only on a cluster event, or after 5 minutes)."""
        for uid, (pod, targets) in list(self._waiting.items()):
            cached = self.state.pods.get(pod.key)
            if cached is None or cached.uid != uid or cached.node_name or cached.deleting:
                del self._waiting[uid]
            elif uid not in self._asked and most > 0:
                most -= 1
                self._waiting.pop(uid)  # (asked again: to the back of the line)
                self.ask(cached, targets)

    def replan(self, uid: str) -> None:
        """The pod's plan turned out stale (the mover found so): it goes, and the pod's next
        filter asks for a new one at once, not an interval later."""
        self._asked.pop(uid, None)
        self.drop(uid)

    def drop(self, uid: str) -> None:
        with self._lock:
            if self._planned.pop(uid, None) is not None:
                self._hints.pop(uid, None)

    def _enqueue(self, pod: Pod, targets: frozenset[str] | None = None) -> None:
        """After the verb, on the loop: copy what the planner reads, and queue the pod."""
        with self._lock:
            full = len(self._queue) >= self.queue_size
        if full:
            self.observer.make_room_hint("skipped")
            return
        capture = self._capture()
        self._sweep()
        with self._lock:
            self._queue.append((pod, capture, targets))
            self._planning[pod.uid] += 1
            if self.threaded and self._thread is None:
                self._thread = threading.Thread(target=self._run, name="make-room-hints", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _capture(self) -> _Capture:
        snapshot = self.snapshots.current()
        key = (self.state.version, self.snapshots.tracker.assumed.version)
        last = self._last  # (the planning thread lets it go when it ends)
        if last is not None and last.key == key:
            return last
        claims = snapshot.claims
        copied = claims.copy() if isinstance(claims, dict | Overlay) else dict(claims)
        self._last = last = _Capture(key, self.state.tables(), copied)
        return last

    def _sweep(self) -> None:
        """Hints of pods deleted or bound since go (one lookup per hint, at most every
        :data:`SWEEP_SECONDS`), and the keys of those that aged out."""
        now = self.clock()
        if now - self._swept_at < SWEEP_SECONDS:
            return
        self._swept_at = now
        with self._lock:
            keys = list(self._keys.items())
        pods = self.state.pods
        for uid, key in keys:
            cached = pods.get(key)
            if cached is None or cached.uid != uid or cached.node_name:
                self.forget(uid)
                continue
            with self._lock:
                if uid not in self._hints:
                    self._keys.pop(uid, None)

    # --- on the planning thread ----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._wake.wait(IDLE_EXIT)
                if not self._queue:
                    self._thread = None
                    self._inventory = self._built = self._last = None  # the copies go with it
                    return
            self._plan_next()

    def drain(self) -> int:
        """Plan for every queued pod on the calling thread (tests); how many were planned."""
        done = 0
        while self._plan_next():
            done += 1
        return done

    def _plan_next(self) -> bool:
        """Plan for the next queued pod (False: none); then it has one plan fewer on the way."""
        with self._lock:
            if not self._queue:
                return False
            pod, capture, targets = self._queue.popleft()
        try:
            self._work(pod, capture, targets)
        finally:
            with self._lock:
                self._planning[pod.uid] -= 1
                if self._planning[pod.uid] <= 0:
                    del self._planning[pod.uid]
        return True

    def _polite(self) -> float:
        """The planner's clock: the time it ran. Every :data:`QUANTUM` of it, and whenever a
        verb ran in the last :data:`BACK_OFF`, the GIL is handed over; while verbs run, for
        up to :data:`MAX_WAIT`."""
        now = self._plan_clock()
        if now - self._ran_since >= QUANTUM or now - self._busy_at < BACK_OFF:
            paused = now
            self._hand_over(PAUSE)
            now = self._plan_clock()
            nap = BACK_OFF
            while now - self._busy_at < BACK_OFF and now - paused < MAX_WAIT:
                # Waking takes the GIL (from a running verb, once the switch interval is out):
                # the naps grow while the verbs go on, so that it happens seldom.
                self._hand_over(nap)
                nap = min(2 * nap, MAX_NAP)
                now = self._plan_clock()
            self._waited += now - paused
            self._ran_since = now
        return now - self._waited

    def _snapshot(self, capture: _Capture) -> Snapshot:
        if self._built is not None and self._built[0] is capture:
            return self._built[1]
        config = self.config
        state = ClusterState.from_tables(capture.tables, self._polite)
        key = (state.inventory_version, config.features)
        if self._inventory is None or self._inventory[0] != key:
            inventory = Inventory(
                state.slices.values(), state.classes, config.features, state.taint_rules.values()
            )
            self._inventory = (key, inventory)
        allocated = AllocatedState(config.features)  # (Snapshot would count them without a pause)
        for i, claim in enumerate(capture.claims.values()):
            if claim.allocation is not None:
                allocated.add(claim.allocation)
            if not i % 256:
                self._polite()
        snapshot = Snapshot(
            state,
            config.features,
            self._cel,
            claims=capture.claims,
            allocated=allocated,
            clock=self._polite,
            wall_clock=self.wall_clock,
            binding_timeout=config.binding_timeout,
            timeout_is_error=config.release.filter_timeout_is_error,
            inventory=self._inventory[1],
        )
        self._built = (capture, snapshot)
        return snapshot

    def _work(self, pod: Pod, capture: _Capture, targets: frozenset[str] | None = None) -> None:
        try:
            snapshot = self._snapshot(capture)
            cached = snapshot.state.pods.get(pod.key)
            target = cached if cached is not None and cached.uid == pod.uid else pod
            if target.node_name or pod.uid in snapshot.state.deleted_pods:
                self.observer.make_room_hint("skipped")
                return
            self._ran_since = self._plan_clock()
            rules, resting = self.config.make_room, self.resting()
            found = plan(
                snapshot,
                target,
                replace(rules, resting=resting) if resting else rules,
                now=self.wall_clock(),
                clock=self._polite,
                timeout=self.config.allocation_timeout,
                targets=targets,
            )
        except Exception:  # a hint is never worth the thread
            log.exception("make-room hint for %s/%s failed", pod.namespace, pod.name)
            self.observer.make_room_hint("skipped")
            return
        hint = (
            Hint(found.node, hint_line(target, found), found, self.clock())
            if isinstance(found, Plan) and found.moves
            else None
        )
        self.observer.make_room_hint("plan" if hint is not None else "none")
        with self._lock:
            if pod.uid not in self._gone:
                self._hints[pod.uid] = (pod.key, hint)
                self._keys[pod.uid] = pod.key
                if hint is not None:
                    self._planned[pod.uid] = (pod.key, hint)
                else:
                    self._planned.pop(pod.uid, None)
