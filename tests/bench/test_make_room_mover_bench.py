"""bench/make_room_mover_bench.py without a control plane: the layout it builds at full size is
the one its docstring describes, and its table reads a result as the runs write it (the runs
themselves are tests/realcluster/test_make_room_mover.py's, at 4 nodes)."""

from __future__ import annotations

from bench.make_room_mover_bench import table
from tests.realcluster.fragmented import SMALL, NodeShare, random_layout


def test_the_full_size_layout_is_fragmented_as_described() -> None:
    layout = random_layout(16)
    assert layout == random_layout(16) != random_layout(16, seed=7)
    assert layout[:2] == (NodeShare(movable=3), NodeShare(movable=3))
    assert all(3 <= share.pods <= 5 and share.movable >= 1 for share in layout)
    assert sum(share.guarded for share in layout) == 8 and sum(share.high for share in layout) == 4
    assert sum(share.bare for share in layout) == 2
    assert all(share.pods <= 5 for share in SMALL)


def test_the_table_says_not_bound_and_counts() -> None:
    row = {
        "mode": "off",
        "nodes": 16,
        "pods": 59,
        "build_s": 5.2,
        "big_s": None,
        "pcie_s": 2.94,
        "moved": 0,
        "refused_by_budget": 0,
        "refused_otherwise": 0,
        "plans": {"carried_out": 1.0},
        "never_moved_kept": True,
        "device_twice": 0,
    }
    lines = table([row]).splitlines()
    assert lines[0].split()[:6] == ["mode", "nodes", "pods", "build", "s", "big"]
    assert "not bound" in lines[1] and "2.9" in lines[1] and lines[1].split()[-2:] == ["True", "0"]
