"""What the last filter found for the nodes it passed, for the prioritize that follows it.

kube-scheduler calls prioritize right after filter, in the same scheduling cycle, for the same
pod, with the nodes filter passed, in the order filter answered them (findNodesThatPassExtenders
keeps the extender's order; prioritizeNodes sends those nodes on). The in-tree plugin scores a
node with what its Filter found there in that cycle (dynamicresources.go, Score reads
``state.nodeAllocations``, which Filter wrote; v1.34.0-v1.37.0), whatever the cache learned
since. So prioritize takes the filter's groups and answers as they are when it asks for the
same pod, the same claims and the same names, even if binds changed the cache in between: at
5,000 nodes deciding again was a third of prioritize's time, and with binds landing between
every filter and prioritize (5,000 x 1 under the real scheduler) it missed 40% of the time.
Anything else (another pod, other names, changed claims, nominations, the request's own Node
records) decides afresh.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.scheduling.decide.decision import Assessment


@dataclass(frozen=True)
class LastFilter:
    pod_uid: str
    claims_key: tuple[Any, ...]
    #: The names filter passed, in its answer's order, and each one's group.
    names: Sequence[str]
    groups: Sequence[Hashable]
    #: The passed groups' answers.
    answers: Mapping[Hashable, Assessment]

    def for_prioritize(
        self, pod_uid: str, claims_key: tuple[Any, ...], names: Sequence[str]
    ) -> tuple[Sequence[Hashable], Mapping[Hashable, Assessment]] | None:
        """(groups, answers) for prioritize over ``names``, or None: decide afresh. Read-only:
        prioritize reads them and builds its scores apart."""
        if pod_uid != self.pod_uid or claims_key != self.claims_key or names != self.names:
            return None
        return self.groups, self.answers
