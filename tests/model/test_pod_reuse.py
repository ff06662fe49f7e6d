"""A pod read again on its previous record (a watch update) is the record a fresh read makes:
the parts of the spec it reuses are only those that did not change."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from extender.model.core import parse_pod
from extender.model.errors import ObjectError
from tests.builders import container, pod

Change = Callable[[dict[str, Any]], None]


def bound(obj: dict[str, Any]) -> None:
    obj["spec"]["nodeName"] = "node-1"
    obj["status"] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}


def more_cpu(obj: dict[str, Any]) -> None:
    obj["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2"}}


def another_claim(obj: dict[str, Any]) -> None:
    obj["spec"]["resourceClaims"].append({"name": "b", "resourceClaimName": "b"})


def priority(obj: dict[str, Any]) -> None:
    obj["spec"]["priority"] = 7


def resized(obj: dict[str, Any]) -> None:
    obj["status"] = {"containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}


def resize_infeasible(obj: dict[str, Any]) -> None:
    resized(obj)
    obj["status"]["conditions"] = [{"type": "PodResizePending", "reason": "Infeasible"}]


def claim_statuses(obj: dict[str, Any]) -> None:
    obj["status"] = {"resourceClaimStatuses": [{"name": "a", "resourceClaimName": "a-xyz"}]}


def deleting(obj: dict[str, Any]) -> None:
    obj["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    obj["metadata"]["labels"] = {"app": "x"}


def spec_dropped(obj: dict[str, Any]) -> None:
    del obj["spec"]


# (name, how the update changes the pod, what changed after the previous record was read)
UPDATES: list[tuple[str, Change, Change | None]] = [
    ("the Binding: nodeName and a condition", bound, None),
    ("a container's requests", more_cpu, None),
    ("another claim", another_claim, None),
    ("the priority", priority, None),
    ("a container resized (its status)", resized, None),
    ("a resize found infeasible", resize_infeasible, resized),
    ("the resize undone", bound, resized),
    ("claim statuses written", claim_statuses, None),
    ("deleted, labels added", deleting, None),
    ("no spec at all", spec_dropped, None),
]


def original() -> dict[str, Any]:
    return pod("p", ["a"], containers=[container("c", {"cpu": "1"})], init_containers=[container("i")])


@pytest.mark.parametrize(("change", "before"), [u[1:] for u in UPDATES], ids=[u[0] for u in UPDATES])
def test_reading_on_the_previous_record_reads_the_same(change: Change, before: Change | None) -> None:
    first = original()
    if before is not None:
        before(first)
    previous = parse_pod(first)
    updated = copy.deepcopy(first)
    change(updated)
    assert parse_pod(updated, previous) == parse_pod(updated)


def test_an_unchanged_spec_is_not_read_again() -> None:
    previous = parse_pod(original())
    updated = original()
    bound(updated)
    record = parse_pod(updated, previous)
    assert record.node_name == "node-1"
    assert record.containers is previous.containers and record.claims is previous.claims


def test_a_malformed_update_is_refused_whatever_the_previous_record() -> None:
    previous = parse_pod(original())
    updated = original()
    updated["spec"]["nodeName"] = 5
    with pytest.raises(ObjectError, match=r"spec\.nodeName"):
        parse_pod(updated, previous)
    updated = original()
    updated["status"] = {"conditions": "not a list"}
    with pytest.raises(ObjectError, match=r"status\.conditions"):
        parse_pod(updated, previous)
