"""Filter's answers for nodes where a nomination changes what fits, each node judged on its own.

Filter groups look-alike nodes and judges one per group (:meth:`Snapshot.node_groups`). Two
kinds of node get an answer of their own afterwards:

* nodes where pods nominated ahead of the filtered pod keep devices (device preemption:
  :func:`kept_for_others`): those devices are taken there;
* the node a preemption nominated the filtered pod itself to, while its victims' claims are
  being released (:func:`preemptor`): those devices are free there, for this pod only.

Pure: a snapshot in, answers changed in place.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

from extender.model.core import Node, Pod
from extender.model.dra import ResourceClaim
from extender.scheduling import nominated
from extender.scheduling.decision import Assessment, Snapshot
from extender.scheduling.prefilter import PodClaims

#: A node not judged: the filter budget ran out first (Unschedulable, not Unresolvable).
NOT_EVALUATED = Assessment(
    False, "not evaluated: the DRA extender's filter time budget ran out", timed_out=True
)


@dataclass(slots=True)
class Judged:
    """One filter call's nodes: per node name its group, one answer per group."""

    names: Sequence[str]
    groups: list[Hashable]
    answers: dict[Hashable, Assessment]
    lookup: Mapping[str, Node]

    def judge_alone(self, i: int, tag: str, answer: Assessment) -> None:
        """The node at ``i`` in a group of its own, with this answer."""
        self.groups[i] = (tag, self.names[i])
        self.answers[self.groups[i]] = answer


def kept_for_others(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    judged: Judged,
    nominations: nominated.Nominations,
    deadline: float,
    clock: Callable[[], float],
    timeout: float | None,
) -> None:
    """Nodes where pods nominated ahead of this one keep devices are judged on their own, with
    those devices taken (see :mod:`extender.scheduling.nominated`); within the filter budget,
    as every node (past it: not evaluated)."""
    state = snapshot.state
    targets = {n for n in state.nominated if nominated.nominated_here(state, pod, n, nominations)}
    if not targets:
        return
    for i, name in enumerate(judged.names):
        node = judged.lookup.get(name)
        if name not in targets or node is None:
            continue
        if clock() > deadline:
            judged.judge_alone(i, "nominated", NOT_EVALUATED)
            continue
        judged.judge_alone(
            i,
            "nominated",
            nominated.assess(snapshot, pod, claims, node, nominations=nominations, timeout=timeout),
        )


def preemptor(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    judged: Judged,
    target: str,
    freeing: Sequence[ResourceClaim],
    nominations: nominated.Nominations | None,
    timeout: float | None,
) -> None:
    """The node ``target`` a preemption nominated the pod to, judged on its own with the devices
    of ``freeing`` (its victims' claims, being released: :func:`nominated.releasing`) free. The
    bind holds them and writes once the release shows (:mod:`extender.scheduling.binder`)."""
    node = judged.lookup.get(target)
    if node is None or not freeing:
        return
    freed = [c.allocation for c in freeing if c.allocation is not None]
    for i, name in enumerate(judged.names):
        if name != target:
            continue
        if judged.answers[judged.groups[i]].fits:
            return
        answer = nominated.assess(
            snapshot, pod, claims, node, nominations=nominations, freed=freed, timeout=timeout
        )
        judged.judge_alone(i, "preemptor", answer)
