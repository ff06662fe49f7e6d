"""The store invariants detect each kind of violation (so a clean result means something)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.builders import allocated, claim, device, device_class, node, pod, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        for obj in [device_class(), node("node-1"), resource_slice("s", [device("d0"), device("d1")])]:
            server.create(obj)
        yield server


def reserved(c: dict[str, Any], *pods: str) -> dict[str, Any]:
    c["status"]["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods]
    return c


def on(allocation: dict[str, Any], node_name: str) -> dict[str, Any]:
    allocation["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }
    return allocation


D0 = ("driver-a", "pool-1", "d0")

# (name, objects, the violation's text)
CASES: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "consistent",
        [
            reserved(claim("a", allocation=on(allocated(D0), "node-1")), "p"),
            pod("p", ["a"], node_name="node-1"),
        ],
        "",
    ),
    (
        "a device in two claims",
        [claim("a", allocation=allocated(D0)), claim("b", allocation=allocated(D0))],
        "is allocated to default/a, default/b",
    ),
    (
        "admin access may share",
        [claim("a", allocation=allocated(D0, admin=True)), claim("b", allocation=allocated(D0, admin=True))],
        "",
    ),
    (
        "a bound pod's claim not allocated",
        [claim("a"), pod("p", ["a"], node_name="node-1")],
        "is not allocated",
    ),
    (
        "a bound pod's claim not reserved",
        [claim("a", allocation=allocated(D0)), pod("p", ["a"], node_name="node-1")],
        "is not reserved for it",
    ),
    (
        "a bound pod's claim on another node",
        [
            reserved(claim("a", allocation=on(allocated(D0), "node-2")), "p"),
            pod("p", ["a"], node_name="node-1"),
        ],
        "another node",
    ),
    (
        "a reservation for an unbound pod",
        [reserved(claim("a", allocation=allocated(D0)), "p"), pod("p", ["a"])],
        "which is not bound",
    ),
    (
        "a reservation without allocation",
        [{**claim("a"), "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]}}],
        "without an allocation",
    ),
]


@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_violations(fake: FakeApiServer, objects: list[dict[str, Any]], expected: str) -> None:
    for obj in objects:
        created = fake.create(obj)
        if obj.get("status"):  # the fake's create keeps status as given
            assert created.get("status") == obj["status"]
    found = violations(fake)
    if expected:
        assert any(expected in v for v in found), found
    else:
        assert found == []
