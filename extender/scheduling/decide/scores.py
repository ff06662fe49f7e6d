"""prioritize's scores: the DynamicResources plugin's Score and NormalizeScore, then the packing
policy, on the extender's 0..10 scale, and (opt-in) a tie-break among the best nodes by the
fragmentation a placement leaves (issue 51, FGD's idea). Pure."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from extender.defaults import SCORE_TIE_BREAKS
from extender.scheduling.decide.capacity import SHAPE_COUNTS
from extender.scheduling.decide.decision import Assessment

MIN_SCORE, MAX_SCORE = 0, 10
__all__ = [
    "MAX_SCORE",
    "MIN_SCORE",
    "SCORE_TIE_BREAKS",
    "NodeScores",
    "break_ties",
    "fragmentation_growth",
    "score_nodes",
    "stranded",
]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class NodeScores:
    """prioritize's answer: the nodes as asked and each one's score, as two lists of the same
    length, not a pair per node (at 5,000 nodes building the pairs cost as much CPU as encoding
    the answer). Iterates as (name, score) pairs."""

    names: Sequence[str]
    scores: Sequence[int]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.scores):
            raise ValueError(f"{len(self.scores)} scores for {len(self.names)} nodes")

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return zip(self.names, self.scores, strict=True)

    def __len__(self) -> int:
        return len(self.names)


def score_nodes(assessed: Mapping[K, Assessment], policy: str, tie_break: str = "none") -> dict[K, int]:
    """0..10 per node (or per group of look-alike nodes): the DynamicResources plugin's score
    first, then the packing policy.

    When the plugin's Score (prioritized lists: earlier subrequests score higher) differs among
    the fitting nodes, the answer is its NormalizeScore (``DefaultNormalizeScore``: score * max
    / highest) on the extender's 0..10 scale. Otherwise binpack prefers the node left with the
    fewest free matching devices (keeping whole nodes free for large claims) and spread the
    most. Nodes that do not fit get 0. ``tie_break`` ``fragmentation``: see :func:`break_ties`.
    """
    fitting = {n: a for n, a in assessed.items() if a.fits}
    if not fitting:
        return dict.fromkeys(assessed, MIN_SCORE)
    highest = max(a.dra_score for a in fitting.values())
    scores: dict[K, int] = {}
    if highest > 0 and len({a.dra_score for a in fitting.values()}) > 1:
        scores = {name: MAX_SCORE * a.dra_score // highest for name, a in fitting.items()}
    else:
        frees = [a.free_after for a in fitting.values()]
        low, high = min(frees), max(frees)
        for name, a in fitting.items():
            if high == low:
                packing = MAX_SCORE / 2
            elif policy == "spread":
                packing = MAX_SCORE * (a.free_after - low) / (high - low)
            else:
                packing = MAX_SCORE * (high - a.free_after) / (high - low)
            scores[name] = max(MIN_SCORE, min(MAX_SCORE, round(packing)))
    if tie_break == "fragmentation":
        scores = break_ties(scores, fitting)
    for name in assessed:
        scores.setdefault(name, MIN_SCORE)
    return scores


def stranded(free: int, shapes: Sequence[int] = SHAPE_COUNTS) -> int:
    """Free devices no pod of the common shapes can use, on a node with ``free`` of them:
    ``free % count`` summed over the shapes (as /debug/capacity's ``strandedFor``, per node)."""
    return sum(free % count for count in shapes)


def fragmentation_growth(assessment: Assessment, shapes: Sequence[int] = SHAPE_COUNTS) -> int:
    """How many more free devices the node strands once the pod is placed there (negative: fewer).

    The free devices are those matching the pod's requests (for a request of one class with no
    selector of its own: the class's free devices on the node), before (``free_after +
    allocated``) and after (``free_after``) the placement; the other nodes' are unchanged, so
    this is how the cluster's stranded devices change."""
    after = assessment.free_after
    return stranded(after, shapes) - stranded(after + assessment.allocated, shapes)


def break_ties(scores: Mapping[K, int], fitting: Mapping[K, Assessment]) -> dict[K, int]:
    """Among the nodes that share the best score, prefer those where placing the pod strands
    the fewest free devices (FGD, Weng et al., ATC 2023, as a tie-break): they score one more
    than the others of the tie, or, at the top of the scale, the others one less. Nodes below
    the best score keep theirs, and no score leaves 0..10; a tie whose nodes strand alike is
    left as it was. Arithmetic on the assessments already made, one per node or group of
    look-alike nodes: no allocation."""
    out = dict(scores)
    if not out:
        return out
    best = max(out.values())
    tied = [name for name, score in out.items() if score == best and name in fitting]
    if len(tied) < 2:
        return out
    growth = {name: fragmentation_growth(fitting[name]) for name in tied}
    least = min(growth.values())
    if all(g == least for g in growth.values()):
        return out
    for name in tied:
        if best < MAX_SCORE and growth[name] == least:
            out[name] = best + 1
        elif best == MAX_SCORE and growth[name] != least:
            out[name] = best - 1
    return out
