"""prioritize's answer as a value (decide/scores.py) and the node a hold goes to
(inflight/holds.py best_alone)."""

from __future__ import annotations

import pytest

from extender.model.core import Node
from extender.model.labels import Labels
from extender.scheduling.decide.scores import NodeScores
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
