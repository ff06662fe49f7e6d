"""Nodes whose allocation ran out of time for some claims, answered the same way for a while.

Before 1.36 a timeout is the node's answer (Unresolvable until a cluster event), so filter does
not spend its budget on that node again at every retry. From 1.36 a timeout is an error that
kube-scheduler retries after back-off (kubernetes#137607): those are never remembered.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from extender.model.core import Node
from extender.scheduling.decide.decision import Assessment

#: Remembered (claims, node) timeouts at most; past it, expired ones go, then all.
MAX_REMEMBERED_TIMEOUTS = 10_000


class TimeoutMemo:
    """Per claims key: node name -> (until, the timed-out answer)."""

    def __init__(self, clock: Callable[[], float], ttl: Callable[[], float]) -> None:
        self._clock = clock
        self._ttl = ttl
        self._memo: dict[Hashable, dict[str, tuple[float, Assessment]]] = {}

    def __len__(self) -> int:
        return len(self._memo)

    def wrap(
        self, assess: Callable[[Node], Assessment], claims_key: Hashable
    ) -> Callable[[Node], Assessment]:
        """``assess``, with the nodes that just timed out for these claims answered from memory."""
        memo = self._memo
        ttl = self._ttl()

        def remembered(node: Node) -> Assessment:
            mine = memo.get(claims_key)  # the common case, none remembered: one lookup per node
            if mine is not None:
                found = mine.get(node.name)
                if found is not None:
                    if found[0] > self._clock():
                        return found[1]
                    del mine[node.name]
            answer = assess(node)
            if answer.timed_out and answer.error is None:  # an error is retried by kube-scheduler
                if self._size() >= MAX_REMEMBERED_TIMEOUTS:
                    self.expire()
                    if self._size() >= MAX_REMEMBERED_TIMEOUTS:
                        memo.clear()
                memo.setdefault(claims_key, {})[node.name] = (self._clock() + ttl, answer)
            return answer

        return remembered

    def remembers(self, claims_key: Hashable) -> bool:
        """Whether a node timed out for these claims a short while ago (expired ones dropped)."""
        mine = self._memo.get(claims_key)
        if mine is None:
            return False
        now = self._clock()
        for name in [n for n, (until, _) in mine.items() if until <= now]:
            del mine[name]
        if not mine:
            del self._memo[claims_key]
        return bool(mine)

    def expire(self) -> None:
        now = self._clock()
        for key, mine in list(self._memo.items()):
            for name in [n for n, (until, _) in mine.items() if until <= now]:
                del mine[name]
            if not mine:
                del self._memo[key]

    def _size(self) -> int:
        return sum(len(t) for t in self._memo.values())
