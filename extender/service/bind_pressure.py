"""Back-pressure from binds to filter: no bind may outlast kube-scheduler's ``httpTimeout``.

kube-scheduler decides one pod at a time (filter, prioritize) and binds asynchronously, one
goroutine per pod. When the API server is the slower side, binds queue in the extender (behind
its connection pool and the API server's own queue) while kube-scheduler goes on deciding, and
nothing bounds the queue: under a loaded kube-apiserver, binds waited up to 10.1 s, and those
past ``httpTimeout`` failed their pod's scheduling attempt although their writes landed
(issue 42). The in-tree plugin has no such limit: its PreBind runs inside kube-scheduler,
whose binding goroutines wait as long as the API server takes.

So a filter is held back while a bind started now would be expected to take more than a
share of ``httpTimeout``: kube-scheduler's scheduling loop waits on that filter, no new bind is
started meanwhile, and the pods wait in kube-scheduler's queue, where they belong, instead of
failing a bind and being retried. The expected time of a new bind is Little's law over the
binds in flight and their recent completions (in flight / completions per second); when none
completed lately, the rate is unknown and :data:`UNKNOWN_RATE_IN_FLIGHT` binds in flight are
enough to hold (as a TCP sender starts with a small window); and a bind in flight for longer
than the limit holds in any case. A filter is held at most
:attr:`BindPressure.hold_limit` (its own answer must come well within ``httpTimeout`` too).

No I/O here; the clock is injected. Verbs (extender/service/app.py) count binds and hold
filters through it.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: Below this many binds in flight, nothing is held (a few slow binds are not a queue).
MIN_IN_FLIGHT = 8
#: Completions counted over this many seconds (the rate of Little's law).
RATE_WINDOW = 2.0
#: With no completion in the window (a burst that just began, or an API server that stopped
#: answering), this many binds in flight already count as a queue: the rate is unknown, and
#: kube-scheduler decides far faster than binds complete when the API server is slow.
UNKNOWN_RATE_IN_FLIGHT = 32
#: A held filter looks again at least this often (and whenever a bind ends).
RECHECK = 0.05


def _none_parked() -> Mapping[str, float | None]:
    return {}


@dataclass
class BindPressure:
    """``timeout``: kube-scheduler's ``httpTimeout`` for this extender, seconds. ``parked``:
    per pod whose bind has waited on the cluster rather than on the API server (binding
    conditions, a preemption's victims released), None while it waits (the bind is not
    counted), else the seconds it waited (not counted in its age): no API slowness made those
    waits (the engine's tracker keeps them, on the same monotonic clock)."""

    timeout: float
    clock: Callable[[], float] = time.monotonic
    parked: Callable[[], Mapping[str, float | None]] = _none_parked
    #: Filters are held while a new bind would be expected to take more than this share of
    #: ``timeout`` (the tail of bind times reaches about twice the expected one).
    share: float = 0.3
    #: The longest one filter is held, as a share of ``timeout``.
    hold_share: float = 0.2
    #: Token -> (when the bind started, its pod's UID), in the order they started.
    _started: dict[int, tuple[float, str]] = field(default_factory=dict)
    #: Filters being held now (``dra_extender_filters_held``).
    holding: int = 0
    _ended: deque[float] = field(default_factory=deque)
    _next: int = 0
    _changed: asyncio.Event | None = None

    @property
    def limit(self) -> float:
        return self.share * self.timeout

    @property
    def hold_limit(self) -> float:
        return self.hold_share * self.timeout

    @property
    def in_flight(self) -> int:
        return len(self._started)

    def started(self, pod_uid: str = "") -> int:
        """A bind of the pod starts; give its token to :meth:`ended`."""
        self._next += 1
        self._started[self._next] = (self.clock(), pod_uid)
        return self._next

    def ended(self, token: int) -> None:
        if self._started.pop(token, None) is None:
            return
        self._ended.append(self.clock())
        if self._changed is not None:
            self._changed.set()

    def expected(self) -> float:
        """Seconds a bind started now is expected to take (0 below :data:`MIN_IN_FLIGHT`)."""
        if len(self._started) < MIN_IN_FLIGHT:
            return 0.0
        parked = self.parked()
        if parked:
            starts = [_counted_from(t, parked.get(uid, 0.0)) for t, uid in self._started.values()]
            counted = [t for t in starts if t is not None]
            waiting, first = len(counted), min(counted, default=0.0)
        else:  # started in order, kept in order: the first is the oldest
            waiting, first = len(self._started), next(iter(self._started.values()))[0]
        if waiting < MIN_IN_FLIGHT:
            return 0.0
        now = self.clock()
        while self._ended and self._ended[0] < now - RATE_WINDOW:
            self._ended.popleft()
        oldest = now - first
        if not self._ended:
            return max(oldest, float("inf") if waiting >= UNKNOWN_RATE_IN_FLIGHT else 0.0)
        # Completions per second over the window, or over the time since the first completion
        # counted when the window is younger than that (a burst that just began).
        span = max(now - self._ended[0], RATE_WINDOW / 4)
        return max(waiting * span / len(self._ended), oldest if oldest > self.limit else 0.0)

    def pressed(self) -> bool:
        return self.expected() > self.limit

    async def room(self) -> float:
        """Wait until a new bind is expected within the limit, at most :attr:`hold_limit`;
        the seconds waited."""
        if not self.pressed():
            return 0.0
        start = self.clock()
        if self._changed is None:
            self._changed = asyncio.Event()
        self.holding += 1
        try:
            while self.pressed():
                remaining = start + self.hold_limit - self.clock()
                if remaining <= 0:
                    break
                self._changed.clear()
                try:
                    async with asyncio.timeout(min(RECHECK, remaining)):
                        await self._changed.wait()
                except TimeoutError:
                    pass
        finally:
            self.holding -= 1
        return self.clock() - start


def _counted_from(started: float, parked: float | None) -> float | None:
    """When a bind's time counts from: its start moved on by the seconds it was parked; None
    while it is parked (it does not count)."""
    return None if parked is None else started + parked
