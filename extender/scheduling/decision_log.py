"""The decision log: one entry per verb answered (filter, prioritize, preempt, bind), kept for
``/debug/decisions`` and handed to a sink (the structured log line). Shared by the engine's
verbs and the binder, so that a bind records its outcome without calling back into the engine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from extender.model.core import Pod

Sink = Callable[[dict[str, Any]], None]


class DecisionLog:
    def __init__(
        self,
        size: int,
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        sink: Sink | None = None,
    ) -> None:
        self.entries: deque[dict[str, Any]] = deque(maxlen=size)
        self.clock = clock
        self.wall_clock = wall_clock
        #: Where every entry is also reported (one structured log line each).
        self.sink = sink

    def __call__(self, verb: str, pod: Pod | None, started: float, **details: Any) -> None:
        entry: dict[str, Any] = {
            "time": self.wall_clock(),
            "verb": verb,
            "pod": details.pop("pod_key", None) or (f"{pod.namespace}/{pod.name}" if pod else None),
            "durationMs": round((self.clock() - started) * 1e3, 3),
        }
        entry.update({k: v for k, v in details.items() if v is not None})
        self.entries.append(entry)
        if self.sink is not None:
            self.sink(entry)
