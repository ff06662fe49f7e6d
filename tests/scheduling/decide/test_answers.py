"""One answer per node (decide/answers.py) and the filter budget: the nodes where pods nominated
ahead keep devices are judged within the budget, before the pod's own nominated node is judged
with what its preemption is releasing (which the budget does not refuse), so a slow release
check never costs another node its answer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.answers import group_representatives, reasons, split_apart, split_by_fit
from extender.scheduling.decide.decision import NOT_EVALUATED, Assessment
from extender.scheduling.decide.snapshot import Snapshot
from tests.builders import allocated, claim, device, device_class, exact, node, pod, reserve, resource_slice


def objects() -> list[dict[str, Any]]:
    victim_claim = claim(
        "victim-claim", allocation=allocated(("driver-a", "T", "gpu-0"), ("driver-a", "T", "gpu-1"))
    )
    reserve(victim_claim, "victim")
    victim = pod("victim", ["victim-claim"], node_name="T", priority=1)
    victim["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    p = pod("p", ["p-claim"], priority=50)
    p["status"] = {"nominatedNodeName": "T"}
    q = pod("q", ["q-claim"], priority=100)
    q["status"] = {"nominatedNodeName": "W"}
    return [
        device_class(),
        node("T"),
        node("W"),
        resource_slice("t", [device("gpu-0"), device("gpu-1")], pool="T", node="T"),
        resource_slice("w", [device("gpu-0"), device("gpu-1")], pool="W", node="W"),
        victim_claim,
        victim,
        claim("p-claim", requests=[exact(count=1)]),
        p,
        claim("q-claim", requests=[exact(count=1)]),
        q,
    ]


def test_a_slow_release_check_on_the_preemptors_node_costs_no_other_node_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]
    state = ClusterState.from_objects(objects())
    assert not state.problems, state.problems
    config = EngineConfig(device_preemption=True, scheduler_names=frozenset({"dra-extender-scheduler"}))
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment(), config, clock=lambda: now[0])
    original = Snapshot.decide

    def slow_release(self: Snapshot, claims: Any, n: Any, **kw: Any) -> Any:  # the real allocation, slow
        out = original(self, claims, n, **kw)
        if n.name == "T" and self._what_if:  # the release assessment on the preemptor's node
            now[0] += 1000.0  # it took long: past the filter budget afterwards
        return out

    monkeypatch.setattr(Snapshot, "decide", slow_release)
    result = engine.filter(state.pods[("default", "p")], ["T", "W"])
    # W (q keeps one GPU, one is left for p) is judged before T's release: both pass.
    assert result.passed == ["T", "W"], (result.passed, result.failed, result.unresolvable)


# (case, the nodes' groups): each way of finding a node per group must give one of the group's
# nodes, one per group, in the order the groups first appear.
REPRESENTATIVES: list[tuple[str, list[Any]]] = [
    ("no nodes", []),
    ("one group", [7, 7, 7]),
    ("groups interleaved", [2, 1, 2, 3, 1] * 20),
    ("nodes judged alone are their own group", ["n0", 5, "n2", 5]),
    ("groups that first appear late: one pass instead of scans", [i * 32 // 320 for i in range(320)]),
    ("a rare group at the end", [0, 1] * 100 + [2]),
    ("more groups than scans serve: one pass", [*range(40), 0]),
]


@pytest.mark.parametrize(("case", "groups"), REPRESENTATIVES, ids=[c[0] for c in REPRESENTATIVES])
def test_each_group_is_judged_on_one_of_its_nodes(case: str, groups: list[Any]) -> None:
    names = [f"n{i}" for i in range(len(groups))]
    found = group_representatives(groups, names)
    assert list(found) == list(dict.fromkeys(groups))  # each group once, in first-appearance order
    for group, name in found.items():
        assert groups[names.index(name)] == group  # a member of its group


@given(st.lists(st.integers(0, 40), max_size=200))
def test_representatives_for_any_grouping(groups: list[int]) -> None:
    names = [f"n{i}" for i in range(len(groups))]
    found = group_representatives(groups, names)
    assert list(found) == list(dict.fromkeys(groups))
    assert all(groups[names.index(name)] == group for group, name in found.items())


def test_groups_and_names_must_pair_up() -> None:
    with pytest.raises(ValueError, match="2 groups for 3 nodes"):
        group_representatives([1, 1], ["a", "b", "c"])


FIT, FULL = Assessment(True), Assessment(False, "full")


def _reference_split(
    names: list[str], groups: list[Any], answers: dict[Any, Assessment]
) -> tuple[list[str], list[Any], list[tuple[str, Any]]]:
    """A node at a time: what split_by_fit must answer, whichever way it finds the nodes."""
    passed = [(n, g) for n, g in zip(names, groups, strict=True) if answers[g].fits]
    failing = [(n, g) for n, g in zip(names, groups, strict=True) if not answers[g].fits]
    return [n for n, _ in passed], [g for _, g in passed], failing


# (case, groups of nodes n0, n1, ..., the groups that do not fit)
SPLITS: list[tuple[str, list[Any], set[Any]]] = [
    ("every node fits", [1, 2, 1, 2], set()),
    ("no node fits", [1, 2, 1, 2], {1, 2}),
    ("a few full nodes among many: found by scanning", [1] * 30 + [9] + [1] * 30 + [9], {9}),
    ("full nodes at both ends", [9] + [1] * 40 + [9], {9}),
    ("more than a sixteenth full: one pass", [1, 9, 9, 1, 9, 1], {9}),
    ("two failing groups, few nodes: scans", [1] * 40 + [8, 9] + [1] * 40, {8, 9}),
    ("more failing groups than scans serve", [*range(10), *range(10)] * 3, {0, 1, 2, 3, 4, 5}),
    ("nodes judged alone among groups", ["n0", 1, "n2", 1], {"n2"}),
]


@pytest.mark.parametrize(("case", "groups", "failing"), SPLITS, ids=[c[0] for c in SPLITS])
def test_nodes_split_by_whether_their_group_fits(case: str, groups: list[Any], failing: set[Any]) -> None:
    names = [f"n{i}" for i in range(len(groups))]
    answers = {g: FULL if g in failing else FIT for g in groups}
    assert split_by_fit(names, groups, answers) == _reference_split(names, groups, answers)


@given(st.lists(st.integers(0, 6), max_size=60), st.sets(st.integers(0, 6)))
def test_both_ways_of_splitting_agree_with_a_node_at_a_time(groups: list[int], failing: set[int]) -> None:
    names = [f"n{i}" for i in range(len(groups))]
    answers = {g: FULL if g in failing else FIT for g in range(7)}
    assert split_by_fit(names, groups, answers) == _reference_split(names, groups, answers)


def test_split_pairs_nodes_with_groups() -> None:
    with pytest.raises(ValueError, match="1 groups for 2 nodes"):
        split_by_fit(["a", "b"], [1], {1: FIT})


@pytest.mark.parametrize(("case", "groups", "failing"), SPLITS, ids=[c[0] for c in SPLITS])
def test_split_apart_lists_the_failing_nodes_and_their_groups(
    case: str, groups: list[Any], failing: set[Any]
) -> None:
    names = [f"n{i}" for i in range(len(groups))]
    answers = {g: FULL if g in failing else FIT for g in groups}
    passed, passed_groups, rest = _reference_split(names, groups, answers)
    assert split_apart(names, groups, answers) == (
        passed,
        passed_groups,
        [n for n, _ in rest],
        [g for _, g in rest],
    )


def _reference_reasons(
    failing: list[tuple[str, Any]], answers: dict[Any, Assessment]
) -> tuple[dict[str, str], dict[str, str]]:
    """A node at a time, as filter sorted its failing nodes before :func:`reasons`."""
    why = {g: a.reason or "does not fit" for g, a in answers.items() if not a.fits}
    skipped = {g for g, a in answers.items() if a is NOT_EVALUATED or a.resolvable}
    failed = {name: why[group] for name, group in failing if group in skipped}
    unresolvable = {name: why[group] for name, group in failing if group not in skipped}
    return failed, unresolvable


#: The answers a failing group may have.
FAILING_ANSWERS = [
    FULL,
    Assessment(False, "other reason"),
    Assessment(False, None),  # "does not fit"
    Assessment(False, "evicting pods may help", resolvable=True),
    NOT_EVALUATED,
]


# (case, groups of nodes n0, n1, ..., the answer per failing group by index in FAILING_ANSWERS)
REASONS: list[tuple[str, list[Any], dict[Any, int]]] = [
    ("one failing group: one reason for all", [1, 9, 1, 9, 9], {9: 0}),
    ("two failing groups, two reasons", [1, 8, 9, 8, 9], {8: 0, 9: 1}),
    ("a reason left out", [1, 8, 9], {8: 2, 9: 0}),
    ("not judged for the budget: Unschedulable", [1, 8, 9, 8], {8: 4, 9: 0}),
    ("only not judged", [1, 8, 1, 8], {8: 4}),
    ("evicting pods may help: Unschedulable", [8, 9, 9], {8: 3, 9: 0}),
    ("a name sent twice", [9, 1, 9], {9: 0}),
]


@pytest.mark.parametrize(("case", "groups", "answer_of"), REASONS, ids=[c[0] for c in REASONS])
def test_failing_nodes_get_their_groups_reasons(
    case: str, groups: list[Any], answer_of: dict[Any, int]
) -> None:
    names = [f"n{i}" for i in range(len(groups))]
    if case == "a name sent twice":
        names[2] = names[0]
    answers = {g: FAILING_ANSWERS[answer_of[g]] if g in answer_of else FIT for g in groups}
    _passed, _groups, failing, failing_groups = split_apart(names, groups, answers)
    expected = _reference_reasons(list(zip(failing, failing_groups, strict=True)), answers)
    assert reasons(failing, failing_groups, answers) == expected
    assert [list(d.items()) for d in reasons(failing, failing_groups, answers)] == [
        list(d.items()) for d in expected
    ]  # in the same order


@given(st.lists(st.integers(0, 6), max_size=60), st.dictionaries(st.integers(0, 6), st.integers(0, 4)))
def test_reasons_agree_with_a_node_at_a_time(groups: list[int], answer_of: dict[int, int]) -> None:
    names = [f"n{i % 23}" for i in range(len(groups))]  # some names twice
    answers = {g: FAILING_ANSWERS[answer_of[g]] if g in answer_of else FIT for g in range(7)}
    _passed, _groups, failing, failing_groups = split_apart(names, groups, answers)
    expected = _reference_reasons(list(zip(failing, failing_groups, strict=True)), answers)
    found = reasons(failing, failing_groups, answers)
    assert [list(d.items()) for d in found] == [list(d.items()) for d in expected]
