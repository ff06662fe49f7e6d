"""The make-room view (extender/service/make_room_view.py) on snapshots: a plan with its moves in
order, a target that fits without a move, no plan with a reason per node in explain's words, a
target that cannot be planned for, and a bound pod; each as JSON and as the text table. The
planner itself is tests/scheduling/preempt/test_make_room.py's; the route, kubectl dra and the
embedded default: tests/service/test_debug_make_room.py, tests/commands/test_kubectl_dra_make_room.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.model.core import Pod
from extender.scheduling.preempt.make_room import Rules, Shape
from extender.service.debug import render_text
from extender.service.make_room_view import make_room_data
from tests.builders import pod
from tests.scheduling.preempt.test_make_room import NOW, Mover, cluster, wanted
from tests.virtual_time import Ticking

VIP = 1000  # above the target's 100 (cluster() makes the target "trainer" with priority 100)


@dataclass(frozen=True)
class Case:
    nodes: Mapping[str, int]
    movers: list[Mover]
    #: The target: the pending pod "trainer" asking for this many GPUs, a shape, or a pod by name.
    target: int | Shape | str
    expected: dict[str, Any]
    #: Lines the text rendering shows.
    text: tuple[str, ...]
    rules: Rules = field(default_factory=Rules)
    extra: list[dict[str, Any]] = field(default_factory=list)


CASES = {
    # node-1: two GPUs, one held by a; node-2: one free. a moves to node-2, the target takes node-1.
    "a plan: one move, then the target": Case(
        {"node-1": 2, "node-2": 1},
        [Mover("a", "node-1", (0,))],
        2,
        {
            "target": {"pod": "default/trainer", "priority": 100},
            "found": True,
            "needsMoves": True,
            "summary": "fits on node-1 after moving 1 pod (exact search)",
            "plan": {
                "node": "node-1",
                "search": "exact",
                "moves": [
                    {
                        "pod": "default/a",
                        "uid": "uid-a",
                        "priority": 1,
                        "toNode": "node-2",
                        "devices": ["driver-a/node-2/gpu-0"],
                    }
                ],
                "devices": ["driver-a/node-1/gpu-0", "driver-a/node-1/gpu-1"],
            },
            "noPlan": None,
        },
        (
            "make room for pod default/trainer (priority 100)",
            "fits on node-1 after moving 1 pod (exact search)",
            "1     default/a        1         node-2   driver-a/node-2/gpu-0",
            "then  default/trainer            node-1   driver-a/node-1/gpu-0, driver-a/node-1/gpu-1",
        ),
    ),
    "no move needed": Case(
        {"node-1": 1, "node-2": 2},
        [Mover("a", "node-1", (0,))],
        2,
        {
            "found": True,
            "needsMoves": False,
            "summary": "fits on node-2 without moving a pod",
            "plan": {
                "node": "node-2",
                "search": "none",
                "moves": [],
                "devices": ["driver-a/node-2/gpu-0", "driver-a/node-2/gpu-1"],
            },
        },
        ("fits on node-2 without moving a pod", "devices: driver-a/node-2/gpu-0, driver-a/node-2/gpu-1"),
    ),
    "no plan: every node held by more important pods": Case(
        {"node-1": 2, "node-2": 2},
        [Mover("vip-1", "node-1", (0,), priority=VIP), Mover("vip-2", "node-2", (1,), priority=VIP)],
        2,
        {
            "found": False,
            "needsMoves": True,
            "summary": "no plan: impossible (no node fits the target even with every pod that may move gone)",
            "plan": None,
            "noPlan": {
                "kind": "impossible",
                "problem": None,
                "reasons": {
                    "node-1": "1 of 2 devices held by pods with a higher priority than the target",
                    "node-2": "1 of 2 devices held by pods with a higher priority than the target",
                },
            },
        },
        (
            "  node-1: 1 of 2 devices held by pods with a higher priority than the target",
            "  node-2: 1 of 2 devices held by pods with a higher priority than the target",
        ),
    ),
    # node-1 and node-2 would need two moves (one allowed); node-3's one mover fits nowhere else.
    "no plan within the bounds": Case(
        {"node-1": 2, "node-2": 2, "node-3": 2},
        [Mover(n, at, (i,)) for n, at, i in (("a", "node-1", 0), ("b", "node-1", 1), ("c", "node-2", 0))]
        + [Mover("d", "node-2", (1,)), Mover("e", "node-3", (0,))],
        2,
        {
            "found": False,
            "summary": "no plan: bounds (none found within the rules' bounds)",
            "noPlan": {
                "kind": "bounds",
                "problem": None,
                "reasons": {
                    "node-1": "needs at least 2 moves (at most 1)",
                    "node-2": "needs at least 2 moves (at most 1)",
                    "node-3": "the pods that would have to move fit on no other node",
                },
            },
        },
        (
            "no plan: bounds (none found within the rules' bounds)",
            "  node-1: needs at least 2 moves (at most 1)",
        ),
        rules=Rules(max_moves=1),
    ),
    "a shape: the rules' priority is the ceiling": Case(
        {"node-1": 2, "node-2": 1},
        [Mover("a", "node-1", (0,), priority=5)],
        Shape("class-a", 2),
        {
            "target": {"deviceClass": "class-a", "count": 2, "priority": 4},
            "found": False,
            "noPlan": {
                "kind": "impossible",
                "problem": None,
                "reasons": {
                    "node-1": "1 of 2 devices held by pods with a higher priority than the target",
                    "node-2": "too few devices even with every movable pod gone",
                },
            },
        },
        ("make room for 2 x class-a", "rules: pods at or below priority 4 may move"),
        rules=Rules(max_priority=4),
    ),
    "bad input: a class that does not exist": Case(
        {"node-1": 2},
        [],
        Shape("nope", 1),
        {
            "found": False,
            "plan": None,
            "noPlan": {"kind": "impossible", "problem": "DeviceClass nope not found", "reasons": {}},
        },
        ("no plan: impossible (no node fits the target even with every pod that may move gone)",),
    ),
    "bad input: a pod whose claim does not exist": Case(
        {"node-1": 2},
        [],
        "lost",
        {"found": False, "noPlan": {"kind": "impossible", "reasons": {}}},
        ("make room for pod default/lost (priority 0)",),
        extra=[pod("lost", ["missing"])],
    ),
    "a bound pod: nothing to make room for": Case(
        {"node-1": 2},
        [Mover("a", "node-1", (0,))],
        "a",
        {
            "found": True,
            "needsMoves": False,
            "boundTo": "node-1",
            "summary": "bound to node-1: nothing to make room for",
            "plan": None,
            "noPlan": None,
        },
        ("bound to node-1: nothing to make room for",),
    ),
}


def answered(case: Case) -> dict[str, Any]:
    target_claim = wanted(case.target) if isinstance(case.target, int) else None
    snapshot, state = cluster(case.nodes, case.movers, target_claim, case.extra)
    target: Pod | Shape
    if isinstance(case.target, Shape):
        target = case.target
    else:
        target = state.pods[("default", "trainer" if isinstance(case.target, int) else case.target)]
    return make_room_data(snapshot, target, case.rules, now=NOW, clock=Ticking(0.0), timeout=None)


def subset(found: Any, expected: Any, where: str = "") -> None:
    """Every key of ``expected`` is in ``found`` with that value (mappings compared key by key)."""
    if isinstance(expected, dict) and isinstance(found, dict) and expected:
        for key, value in expected.items():
            assert key in found, f"{where}.{key} missing"
            subset(found[key], value, f"{where}.{key}")
    else:
        assert found == expected, where


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_view_says_the_plan_or_why_not(case: Case) -> None:
    data = answered(case)
    subset(data, case.expected)
    assert data["rules"]["maxMoves"] == case.rules.max_moves
    text = render_text("make-room", data)
    for line in case.text:
        assert line in text.splitlines() or any(x.startswith(line) for x in text.splitlines()), (line, text)


RULES: dict[str, tuple[Rules, Callable[[dict[str, Any]], Any], Any]] = {
    "max moves": (Rules(max_moves=5), lambda r: r["maxMoves"], 5),
    "min age": (Rules(min_age=300.0), lambda r: r["minAgeSeconds"], 300.0),
    "controller kinds, sorted": (
        Rules(controller_kinds=frozenset({"StatefulSet", "LeaderWorkerSet"})),
        lambda r: r["controllerKinds"],
        ["LeaderWorkerSet", "StatefulSet"],
    ),
    "max priority": (Rules(max_priority=7), lambda r: r["maxPriority"], 7),
}


@pytest.mark.parametrize(("rules", "read", "shown"), RULES.values(), ids=RULES.keys())
def test_the_answer_names_the_rules_it_planned_with(
    rules: Rules, read: Callable[[dict[str, Any]], Any], shown: Any
) -> None:
    case = CASES["no move needed"]
    assert read(answered(Case(case.nodes, case.movers, case.target, {}, (), rules=rules))["rules"]) == shown


def test_a_pod_younger_than_the_minimum_age_stays_and_the_answer_says_so() -> None:
    """The rules are the planner's: with the default age (300 s, serve's too), a pod that started a
    minute ago is not moved, and the node it holds says why."""
    young = Mover("a", "node-1", (0,), started="2026-11-27T23:59:00Z")
    case = Case({"node-1": 2, "node-2": 1}, [young], 2, {}, ())
    data = answered(Case(case.nodes, case.movers, 2, {}, (), rules=Rules(min_age=300.0)))
    assert data["found"] is False
    assert data["noPlan"]["reasons"]["node-1"] == "1 of 2 devices held by pods younger than the minimum age"
    no_age = Case(case.nodes, case.movers, 2, {}, (), rules=Rules(min_age=0.0))
    assert answered(no_age)["found"] is True  # the same pod moves with no minimum age
