"""metav1 label selectors and PodDisruptionBudgets as DefaultPreemption reads them."""

from __future__ import annotations

from typing import Any

import pytest

from extender.model.errors import ObjectError
from extender.model.policy import parse_label_selector, parse_pod_disruption_budget
from extender.model.reader import Reader
from tests.builders import pod_disruption_budget

SELECTORS: dict[str, tuple[dict[str, Any], dict[str, str], bool]] = {
    "matchLabels equal": ({"matchLabels": {"app": "a"}}, {"app": "a", "x": "y"}, True),
    "matchLabels differ": ({"matchLabels": {"app": "a"}}, {"app": "b"}, False),
    "matchLabels missing": ({"matchLabels": {"app": "a"}}, {}, False),
    "In": ({"matchExpressions": [{"key": "t", "operator": "In", "values": ["x", "y"]}]}, {"t": "y"}, True),
    "In, other value": (
        {"matchExpressions": [{"key": "t", "operator": "In", "values": ["x"]}]},
        {"t": "z"},
        False,
    ),
    "NotIn, absent": ({"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["x"]}]}, {}, True),
    "NotIn, listed": (
        {"matchExpressions": [{"key": "t", "operator": "NotIn", "values": ["x"]}]},
        {"t": "x"},
        False,
    ),
    "Exists": ({"matchExpressions": [{"key": "t", "operator": "Exists"}]}, {"t": ""}, True),
    "DoesNotExist": ({"matchExpressions": [{"key": "t", "operator": "DoesNotExist"}]}, {"t": "1"}, False),
    "all must hold": (
        {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "t", "operator": "Exists"}]},
        {"app": "a"},
        False,
    ),
    "empty selects everything": ({}, {"any": "thing"}, True),
}


@pytest.mark.parametrize("case", SELECTORS.values(), ids=SELECTORS.keys())
def test_label_selector_matches(case: Any) -> None:
    selector, labels, expected = case
    assert parse_label_selector(Reader(selector, "selector")).matches(labels) is expected


@pytest.mark.parametrize(
    "expression",
    [
        {"key": "t", "operator": "In"},
        {"key": "t", "operator": "NotIn", "values": []},
        {"key": "t", "operator": "Exists", "values": ["x"]},
        {"key": "t", "operator": "Gt", "values": ["1"]},
    ],
)
def test_selectors_that_do_not_convert_are_errors(expression: dict[str, Any]) -> None:
    with pytest.raises(ObjectError):
        parse_label_selector(Reader({"matchExpressions": [expression]}, "selector"))


def test_a_budget_reads_its_status_and_protects_only_its_namespace() -> None:
    pdb = parse_pod_disruption_budget(pod_disruption_budget("b", {"app": "a"}, allowed=2, disrupted=("p1",)))
    assert (pdb.namespace, pdb.name, pdb.disruptions_allowed, pdb.disrupted_pods) == (
        "default",
        "b",
        2,
        frozenset({"p1"}),
    )
    assert pdb.protects("default", {"app": "a"})
    assert not pdb.protects("other", {"app": "a"})
    assert not pdb.protects("default", {})


def test_a_budget_without_status_allows_no_disruption() -> None:
    raw = pod_disruption_budget("b", {"app": "a"}, allowed=0)
    del raw["status"]
    assert parse_pod_disruption_budget(raw).disruptions_allowed == 0
