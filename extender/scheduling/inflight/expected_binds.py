"""Binds kube-scheduler has decided but not yet sent: a filter waits for them, briefly.

kube-scheduler assumes pod A on its node at the end of A's scheduling cycle, starts A's binding
cycle in a goroutine and goes straight on with pod B. The in-tree DynamicResources plugin has
reserved A's devices in memory by then (Reserve), so B's Filter sees them taken. The extender
learns A's node only when A's bind arrives, concurrently with B's filter. When B's filter is
answered first, B may be sent to the node whose last free devices A is taking, and B's bind
fails there (with binpack scoring B even prefers that node): a real kube-scheduler 1.36 lost 5
of 800 pods' first attempts so, each a FailedScheduling event the in-tree plugin never emits.

So once a filter has given pod A feasible nodes for claims to allocate, A's bind is expected,
and any other pod's filter waits until A's devices are taken in the extender's view (its bind
recorded them) or its bind is done, for at most ``wait_seconds`` after A's last filter or
prioritize. A pod whose bind never comes (another plugin rejected it, it was deleted) costs
at most that once. Pure bookkeeping: the clock is injected; the futures are the caller's loop's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: How long after its last filter/prioritize a pod's bind is waited for; also the longest one
#: filter waits in all, however often other pods' expectations are renewed meanwhile.
DEFAULT_WAIT_SECONDS = 0.1
#: Expired expectations are dropped when this many are held (pods never bound leave them).
PRUNE_AT = 1024


class ExpectedBinds:
    def __init__(self, clock: Callable[[], float], wait_seconds: float = DEFAULT_WAIT_SECONDS) -> None:
        self.clock = clock
        self.wait_seconds = wait_seconds
        #: Pod UID -> until when its bind is waited for.
        self._expected: dict[str, float] = {}
        self._waiters: list[asyncio.Future[None]] = []
        #: Filters that waited, and how many of those waits ran out of time somewhere.
        self.waits = 0
        self.timeouts = 0

    def __len__(self) -> int:
        return len(self._expected)

    def expect(self, pod_uid: str) -> None:
        """kube-scheduler may bind this pod now (a filter or prioritize gave it nodes)."""
        now = self.clock()
        if len(self._expected) >= PRUNE_AT:
            self._expected = {uid: until for uid, until in self._expected.items() if until > now}
        self._expected[pod_uid] = now + self.wait_seconds

    def arrived(self, pod_uid: str) -> None:
        """The pod's devices are taken in the extender's view, or its bind ended."""
        if self._expected.pop(pod_uid, None) is not None:
            self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _others(self, pod_uid: str) -> float | None:
        """The latest deadline among other pods' expected binds; expired ones are dropped."""
        now = self.clock()
        latest: float | None = None
        for uid, until in list(self._expected.items()):
            if uid == pod_uid:
                continue
            if until <= now:
                del self._expected[uid]
                continue
            latest = until if latest is None else max(latest, until)
        return latest

    async def settle(self, pod_uid: str) -> None:
        """Returns once no other pod's bind is expected (each at most until its deadline), and
        at most ``wait_seconds`` after it was called."""
        latest = self._others(pod_uid)
        if latest is None:
            return
        self.waits += 1
        cap = self.clock() + self.wait_seconds
        timed_out = False
        while latest is not None and self.clock() < cap:
            latest = min(latest, cap)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters = [w for w in self._waiters if not w.done()]
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(max(0.0, latest - self.clock())):
                    await waiter
            except TimeoutError:
                timed_out = True
            latest = self._others(pod_uid)
        if timed_out:
            self.timeouts += 1
