"""An event loop on a clock the test owns: time stands still while there is work to do, and
jumps to the next timer when the loop would otherwise wait for it. Sleeps, timeouts and holds
run at once, and code that reads the same clock (a :class:`VirtualTime` is a callable) measures
exactly the waits it made: a test asserts when something happened, not that a machine was
quick enough.

Only for code that waits on the loop alone: work on another thread or a socket's answer takes
real time, and the loop's timers would not wait for it.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class Ticking:
    """A clock that reads ``step`` seconds later every time it is read (a span measured between
    two reads is ``step``), for code that reads the clock rather than waits on it."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


class VirtualTime:
    """``now`` moves when a loop from :meth:`run` has nothing to do until its next timer (or
    when the test moves it)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """``asyncio.run(main)`` on this clock."""
        with asyncio.Runner(loop_factory=lambda: _Loop(self)) as runner:
            return runner.run(main)


class _Selector(selectors.DefaultSelector):
    def __init__(self, clock: VirtualTime) -> None:
        super().__init__()
        self.clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer at all: only another thread can wake the loop
            return super().select(None)
        self.clock.now += timeout  # idle until the next timer: it is due now
        return []


class _Loop(asyncio.SelectorEventLoop):
    def __init__(self, clock: VirtualTime) -> None:
        super().__init__(_Selector(clock))
        self._virtual = clock

    def time(self) -> float:
        return self._virtual.now
