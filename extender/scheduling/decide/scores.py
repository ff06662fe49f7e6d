"""prioritize's scores: the DynamicResources plugin's Score and NormalizeScore, then the packing
policy, on the extender's 0..10 scale. Pure."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from extender.scheduling.decide.decision import Assessment

MIN_SCORE, MAX_SCORE = 0, 10
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


def score_nodes(assessed: Mapping[K, Assessment], policy: str) -> dict[K, int]:
    """0..10 per node (or per group of look-alike nodes): the DynamicResources plugin's score
    first, then the packing policy.

    When the plugin's Score (prioritized lists: earlier subrequests score higher) differs among
    the fitting nodes, the answer is its NormalizeScore (``DefaultNormalizeScore``: score * max
    / highest) on the extender's 0..10 scale. Otherwise binpack prefers the node left with the
    fewest free matching devices (keeping whole nodes free for large claims) and spread the
    most. Nodes that do not fit get 0.
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
    for name in assessed:
        scores.setdefault(name, MIN_SCORE)
    return scores
