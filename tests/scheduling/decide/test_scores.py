"""prioritize's answer as a value (decide/scores.py), its fragmentation tie-break, and the node a
hold goes to (inflight/holds.py best_alone)."""

from __future__ import annotations

import random

import pytest

from extender.model.core import Node
from extender.model.labels import Labels
from extender.scheduling.decide.decision import Assessment
from extender.scheduling.decide.scores import (
    MAX_SCORE,
    MIN_SCORE,
    NodeScores,
    fragmentation_growth,
    score_nodes,
    stranded,
)
from extender.scheduling.inflight.holds import best_alone


def test_scores_read_as_pairs_in_the_order_asked() -> None:
    answer = NodeScores(["b", "a"], [3, 7])
    assert list(answer) == [("b", 3), ("a", 7)]
    assert dict(answer) == {"a": 7, "b": 3}
    assert len(answer) == 2
    assert answer == NodeScores(["b", "a"], [3, 7])


def test_every_node_has_one_score() -> None:
    with pytest.raises(ValueError, match="1 scores for 2 nodes"):
        NodeScores(["a", "b"], [1])


NODES = {name: Node(name, Labels({}), {}, {}) for name in ("a", "b", "c")}

# (case, scores of a, b, c, the node a hold goes to)
BEST_ALONE: list[tuple[str, list[int], str | None]] = [
    ("one node scores best", [3, 9, 1], "b"),
    ("a tie at the top: no hold", [9, 9, 1], None),
    ("all at the lowest score: no hold", [0, 0, 0], None),
    ("best above the lowest, others at it", [0, 4, 0], "b"),
]


@pytest.mark.parametrize(("case", "scores", "expected"), BEST_ALONE, ids=[c[0] for c in BEST_ALONE])
def test_a_hold_goes_to_the_node_that_scores_best_alone(
    case: str, scores: list[int], expected: str | None
) -> None:
    found = best_alone(NodeScores(["a", "b", "c"], scores), NODES)
    assert (found.name if found is not None else None) == expected


def test_no_node_no_hold() -> None:
    assert best_alone(NodeScores([], []), NODES) is None


# --- The fragmentation tie-break (issue 51, 3) ---------------------------------------------------


def fits(free_before: int, takes: int, dra_score: int = 0) -> Assessment:
    """A node that fits the pod: ``free_before`` matching devices free, ``takes`` of them its."""
    return Assessment(True, allocated=takes, free_after=free_before - takes, dra_score=dra_score)


NO_FIT = Assessment(False, "no devices")

# (case, policy, nodes, scores without the tie-break, scores with it). Free devices stranded
# for 1, 2, 4 and 8 devices: with 8 free 0, 7 free 11, 5 free 7, 4 free 4, 3 free 7, 0 free 0.
TIE_BREAKS: list[tuple[str, str, dict[str, Assessment], dict[str, int], dict[str, int]]] = [
    (
        "a prioritized list's tie at 10: the node left with no stranded device keeps 10",
        "binpack",
        {"whole": fits(8, 4, dra_score=8), "half": fits(4, 4, dra_score=8), "fallback": fits(2, 2, 7)},
        {"whole": 10, "half": 10, "fallback": 8},
        {"whole": 9, "half": 10, "fallback": 8},  # 8 -> 4 strands 4 more; 4 -> 0, 4 fewer
    ),
    (
        "a tie below 10: the node stranding least rises by one",
        "binpack",
        {"all-of-8": fits(8, 8), "all-of-3": fits(3, 3)},  # allocation mode All: 0 left on both
        {"all-of-8": 5, "all-of-3": 5},
        {"all-of-8": 5, "all-of-3": 6},  # taking 3 clears 7 stranded devices, taking 8 none
    ),
    (
        "a tie whose nodes strand alike: unchanged",
        "binpack",
        {"a": fits(4, 1), "b": fits(4, 1), "c": fits(8, 1)},
        {"a": 10, "b": 10, "c": 0},
        {"a": 10, "b": 10, "c": 0},
    ),
    (
        "one best node: unchanged, though another strands less",
        "binpack",
        {"fullest": fits(4, 1), "next": fits(5, 1), "empty": fits(8, 1)},
        {"fullest": 10, "next": 8, "empty": 0},  # 5 -> 4 would strand 3 fewer: not a tie
        {"fullest": 10, "next": 8, "empty": 0},
    ),
    (
        "a tie below the best: unchanged",
        "binpack",
        {"best": fits(8, 4, 8), "x": fits(4, 2, 4), "y": fits(8, 2, 4)},
        {"best": 10, "x": 5, "y": 5},
        {"best": 10, "x": 5, "y": 5},
    ),
    (
        "spread: a tie among the emptiest, the one stranding least keeps 10",
        "spread",
        {"a": fits(8, 4, 8), "b": fits(4, 4, 8), "c": fits(2, 2, 7)},
        {"a": 10, "b": 10, "c": 8},
        {"a": 9, "b": 10, "c": 8},
    ),
    (
        "nodes that do not fit stay at 0, a tie among the rest is broken",
        "binpack",
        {"none": NO_FIT, "a": fits(8, 4, 8), "b": fits(4, 4, 8), "fallback": fits(2, 2, 7)},
        {"none": 0, "a": 10, "b": 10, "fallback": 8},
        {"none": 0, "a": 9, "b": 10, "fallback": 8},
    ),
]


@pytest.mark.parametrize(
    ("case", "policy", "nodes", "without", "with_tie_break"), TIE_BREAKS, ids=[c[0] for c in TIE_BREAKS]
)
def test_the_fragmentation_tie_break_prefers_the_node_stranding_least(
    case: str,
    policy: str,
    nodes: dict[str, Assessment],
    without: dict[str, int],
    with_tie_break: dict[str, int],
) -> None:
    assert score_nodes(nodes, policy) == without
    assert score_nodes(nodes, policy, "none") == without
    assert score_nodes(nodes, policy, "fragmentation") == with_tie_break


def test_stranded_devices_per_free_count() -> None:
    assert [stranded(free) for free in range(10)] == [0, 3, 4, 7, 4, 7, 8, 11, 0, 3]
    assert fragmentation_growth(fits(5, 1)) == -3 and fragmentation_growth(fits(8, 1)) == 11


def test_the_tie_break_moves_only_the_best_tie_by_one_point_within_the_scale() -> None:
    """Over random nodes: off is the scores exactly; on, only nodes tied at the best score
    change, by one point, toward those stranding least, and every score stays in 0..10."""
    rng = random.Random(51)
    for _ in range(2000):
        nodes: dict[str, Assessment] = {}
        for i in range(rng.randint(1, 6)):
            free = rng.randint(0, 16)
            takes = rng.randint(1, 8)
            nodes[f"n{i}"] = (
                fits(free, takes, rng.choice((0, 0, 7, 8))) if takes <= free else Assessment(False, "no")
            )
        for policy in ("binpack", "spread"):
            before = score_nodes(nodes, policy)
            after = score_nodes(nodes, policy, "fragmentation")
            assert score_nodes(nodes, policy, "none") == before
            assert all(MIN_SCORE <= s <= MAX_SCORE for s in after.values())
            best = max(before.values())
            tied = [n for n, s in before.items() if s == best and nodes[n].fits]
            assert {n for n in nodes if after[n] != before[n]} <= set(tied)
            assert all(abs(after[n] - before[n]) <= 1 for n in nodes)
            if len(tied) > 1 and len({fragmentation_growth(nodes[n]) for n in tied}) > 1:
                winners = [n for n in tied if after[n] == max(after[t] for t in tied)]
                least = min(fragmentation_growth(nodes[n]) for n in tied)
                assert {fragmentation_growth(nodes[n]) for n in winners} == {least}
            else:
                assert after == before
