"""What the last filter found for the nodes it passed, for the prioritize that follows it.

kube-scheduler calls prioritize right after filter, for the same pod, with the nodes filter
passed, in the order filter answered them (findNodesThatPassExtenders keeps the extender's
order; prioritizeNodes sends those nodes on). When nothing the answers depend on changed in
between (the same snapshot, which no node change has touched since: its ``generation``; the
same claims), the filter's groups and answers are prioritize's too, and prioritize skips
grouping and judging the nodes again: at 5,000 nodes that was a third of its time. Anything
else (another pod, other names, a new snapshot, nominations, the request's own Node records)
decides afresh.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.scheduling.decide.decision import Assessment
from extender.scheduling.decide.snapshot import Snapshot


@dataclass(frozen=True)
class LastFilter:
    pod_uid: str
    snapshot: Snapshot
    generation: int
    claims_key: tuple[Any, ...]
    #: The names filter passed, in its answer's order, and each one's group.
    names: Sequence[str]
    groups: Sequence[Hashable]
    #: The passed groups' answers.
    answers: Mapping[Hashable, Assessment]

    def for_prioritize(
        self, pod_uid: str, snapshot: Snapshot, claims_key: tuple[Any, ...], names: Sequence[str]
    ) -> tuple[Sequence[Hashable], Mapping[Hashable, Assessment]] | None:
        """(groups, answers) for prioritize over ``names``, or None: decide afresh. Read-only:
        prioritize reads them and builds its scores apart."""
        if (
            pod_uid != self.pod_uid
            or snapshot is not self.snapshot
            or snapshot.generation != self.generation
            or claims_key != self.claims_key
            or names != self.names
        ):
            return None
        return self.groups, self.answers
