"""A pod's watch update is read on the cached record (:func:`parse_pod` with ``previous``): after
any sequence of events, relists and deletions the cache holds what reading each event afresh
holds."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.model.core import parse_pod
from tests.builders import container, pod

KEY = ("default", "p")


def version(
    *, node: str = "", cpu: str = "1", uid: str = "uid-p", claims: tuple[str, ...] = ("a",)
) -> dict[str, Any]:
    return pod("p", list(claims), uid=uid, node_name=node or None, containers=[container("c", {"cpu": cpu})])


# (name, events: ("apply" | "remove" | "relist", the pod))
SEQUENCES: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    ("bound", [("apply", version()), ("apply", version(node="n1"))]),
    (
        "bound, then its requests changed",
        [("apply", version()), ("apply", version(node="n1")), ("apply", version(node="n1", cpu="2"))],
    ),
    (
        "deleted and made again with other claims",
        [("apply", version()), ("remove", version()), ("apply", version(uid="uid-q", claims=("b",)))],
    ),
    (
        "made again under its name without a deletion seen",
        [("apply", version(node="n1")), ("apply", version(uid="uid-q", cpu="3"))],
    ),
    ("relisted bound", [("apply", version()), ("relist", version(node="n2"))]),
    ("relisted with another spec", [("apply", version(node="n1")), ("relist", version(node="n1", cpu="5"))]),
]


@pytest.mark.parametrize("events", [s[1] for s in SEQUENCES], ids=[s[0] for s in SEQUENCES])
def test_the_cache_holds_what_a_fresh_read_holds(events: list[tuple[str, dict[str, Any]]]) -> None:
    state = ClusterState()
    for action, obj in events:
        obj = copy.deepcopy(obj)
        if action == "apply":
            state.apply(obj)
        elif action == "remove":
            state.remove(obj)
        else:
            state.replace_kind("Pod", [obj])
    last = copy.deepcopy(events[-1][1])
    assert state.pods[KEY] == parse_pod(last)
    node = last["spec"].get("nodeName")
    assert {n: set(p) for n, p in state.pods_by_node.items()} == ({node: {KEY}} if node else {})
