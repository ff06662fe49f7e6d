"""Allocator fixes that shipped in released Kubernetes, with the cases their pull requests added.

Each case is translated from upstream's shared allocator table
(staging/src/k8s.io/dynamic-resource-allocation/structured/internal/allocatortesting/
allocator_testing.go). Where the case is named as upstream names it, its content was read at
v1.36.3 (the release carrying the cherry-pick) or, for fixes newer than any source stored here,
rebuilt from the pull request's description: each case says which.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.allocator.harness import allocate
from tests.builders import (
    allocated,
    attrs,
    claim,
    device,
    device_class,
    exact,
    first_available,
    resource_slice,
)

A = device_class()
B = device_class("class-b", 'device.driver == "driver-b"')


def consumes(amount: str = "1", counter_set: str = "cs1", counter: str = "c") -> list[dict[str, Any]]:
    return [{"counterSet": counter_set, "counters": {counter: {"value": amount}}}]


def counters(value: str, *, driver: str = "driver-a", counter: str = "c", name: str = "s2") -> dict[str, Any]:
    """The pool's second slice: one counter set ``cs1`` (upstream's sliceWithCounterSets)."""
    return resource_slice(
        name,
        None,
        driver=driver,
        count=2,
        sharedCounters=[{"name": "cs1", "counters": {counter: {"value": value}}}],
    )


def kind(value: str) -> str:
    return f'device.attributes["driver-a"].kind == "{value}"'


@dataclass
class Case:
    name: str
    #: The upstream pull request, the release(s) that carry it, and where the content came from.
    source: str
    objects: list[dict[str, Any]]
    claims: list[str] = field(default_factory=lambda: ["claim-0"])
    gates: str = ""
    #: Per claim: the (request, device) pairs allocated; None when the attempt must fail.
    devices: list[list[tuple[str, str]]] | None = None
    #: For failures: a substring of the error, or "" for plain unsatisfiable.
    error: str = ""


CASES = [
    # --- kubernetes#140431: allocateDevice rolls back what a rejected candidate reserved ---------
    Case(
        "partitionable-all-mode-constraint-must-error-with-reserved-counter",
        "#140431 (v1.37.0; v1.36.3 via #140663), read at v1.36.3",
        [
            A,
            resource_slice(
                "s1",
                [
                    device("device-1", attributes=attrs(numa=1)),
                    device("device-2", attributes=attrs(numa=2), consumesCounters=consumes()),
                ],
                count=2,
            ),
            counters("1"),
            claim(requests=[exact(mode="All")], constraints=[{"matchAttribute": "driver-a/numa"}]),
        ],
        error=(
            "request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint "
            "would not be satisfied"
        ),
    ),
    Case(
        "partitionable-devices-taint-releases-counter",
        "#140431, read at v1.36.3",
        [
            A,
            resource_slice(
                "s1",
                [
                    device(
                        "device-1",
                        consumesCounters=consumes(),
                        taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
                    ),
                    device("device-2", consumesCounters=consumes()),
                ],
                count=2,
            ),
            counters("1"),
            claim(),
        ],
        devices=[[("req-0", "device-2")]],
    ),
    Case(
        "partitionable-devices-constraint-releases-counter",
        "#140431, read at v1.36.3",
        [
            A,
            resource_slice(
                "s1",
                [
                    device("device-1", attributes=attrs(stringAttribute="red"), consumesCounters=consumes()),
                    device("device-2", attributes=attrs(stringAttribute="blue"), consumesCounters=consumes()),
                    device("device-3", attributes=attrs(stringAttribute="blue"), consumesCounters=consumes()),
                ],
                count=2,
            ),
            counters("2"),
            claim(requests=[exact(count=2)], constraints=[{"matchAttribute": "driver-a/stringAttribute"}]),
        ],
        devices=[[("req-0", "device-2"), ("req-0", "device-3")]],
    ),
    Case(
        "partitionable-consumable-capacity-backtrack-releases-counter",
        "#140431, read at v1.36.3",
        [
            A,
            resource_slice(
                "s1",
                [
                    device(
                        "device-1",
                        attributes=attrs(kind="shared"),
                        allowMultipleAllocations=True,
                        consumesCounters=consumes(),
                    ),
                    device("device-2", attributes=attrs(kind="shared")),
                    device("device-3", attributes=attrs(kind="counteronly"), consumesCounters=consumes()),
                ],
                count=2,
            ),
            counters("1"),
            claim(
                requests=[
                    exact("req-0", selectors=[kind("shared")]),
                    exact("req-1", selectors=[kind("counteronly")]),
                ]
            ),
        ],
        devices=[[("req-0", "device-2"), ("req-1", "device-3")]],
    ),
    Case(
        "consumable-capacity-rejection-rolls-back-constraints",
        "#140431, read at v1.36.3",
        [
            A,
            resource_slice(
                "s1",
                [
                    device(
                        "device-1",
                        attributes=attrs(stringAttribute="cap"),
                        capacity={"cap0": "2"},
                        allowMultipleAllocations=True,
                    ),
                    device("device-2", attributes=attrs(stringAttribute="fb")),
                ],
            ),
            claim(
                "claim-0",
                requests=[
                    exact(
                        selectors=['device.attributes["driver-a"].stringAttribute == "cap"'],
                        capacity={"requests": {"cap0": "2"}},
                    )
                ],
            ),
            claim(
                "claim-1",
                requests=[
                    first_available(
                        "req-0",
                        exact(
                            "subreq-0",
                            mode="All",
                            selectors=['device.attributes["driver-a"].stringAttribute == "cap"'],
                            capacity={"requests": {"cap0": "2"}},
                        ),
                        exact(
                            "subreq-1", selectors=['device.attributes["driver-a"].stringAttribute == "fb"']
                        ),
                    )
                ],
                constraints=[{"matchAttribute": "driver-a/stringAttribute"}],
            ),
        ],
        claims=["claim-0", "claim-1"],
        devices=[[("req-0", "device-1")], [("req-0/subreq-1", "device-2")]],
    ),
    Case(
        "partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership",
        "#140431, read at v1.36.3",
        [
            A,
            resource_slice(
                "s1",
                [
                    device(
                        "device-1",
                        attributes=attrs(kind="shared", stringAttribute="red"),
                        allowMultipleAllocations=True,
                        consumesCounters=consumes(),
                    ),
                    device("device-2", attributes=attrs(kind="fallback", stringAttribute="blue")),
                    device("device-3", attributes=attrs(kind="gate", stringAttribute="blue")),
                ],
                count=2,
            ),
            counters("1"),
            claim("claim-0", requests=[exact("req-0", selectors=[kind("shared")])]),
            claim(
                "claim-1",
                requests=[
                    exact("req-1", selectors=[f"{kind('shared')} || {kind('fallback')}"]),
                    exact("req-2", selectors=[kind("gate")]),
                    exact("req-3", selectors=[kind("shared")]),
                ],
                constraints=[{"matchAttribute": "driver-a/stringAttribute", "requests": ["req-1", "req-2"]}],
            ),
        ],
        claims=["claim-0", "claim-1"],
        devices=[
            [("req-0", "device-1")],
            [("req-1", "device-2"), ("req-2", "device-3"), ("req-3", "device-1")],
        ],
    ),
    # --- kubernetes#140435: counter caches keyed by driver + pool, not by pool name ---------------
    Case(
        "partitionable-devices-counter-cache-scoped-by-pool-ID",
        "#140435 (v1.37.0; v1.36.4), name as upstream's, content rebuilt from the PR description",
        [
            A,
            B,
            resource_slice("a1", [device("device-1", consumesCounters=consumes())], count=2),
            counters("1"),
            resource_slice(
                "b1", [device("device-1", consumesCounters=consumes())], driver="driver-b", count=2
            ),
            counters("1", driver="driver-b", name="b2"),
            claim(requests=[exact("req-a"), exact("req-b", cls="class-b")]),
        ],
        devices=[[("req-a", "device-1"), ("req-b", "device-1")]],
    ),
    Case(
        "partitionable-devices-counter-cache-not-crossed-between-driver-schemas",
        "#140435, name as upstream's, content rebuilt from the PR description: driver-b's counters "
        "were checked against driver-a's counter set of the same pool name, so both partitions of "
        "a one-core card were given out",
        [
            A,
            B,
            resource_slice("a1", [device("device-1", consumesCounters=consumes(counter="mem"))], count=2),
            counters("1", counter="mem"),
            resource_slice(
                "b1",
                [
                    device("device-1", consumesCounters=consumes(counter="cores")),
                    device("device-2", consumesCounters=consumes(counter="cores")),
                ],
                driver="driver-b",
                count=2,
            ),
            counters("1", driver="driver-b", counter="cores", name="b2"),
            claim(requests=[exact("req-a"), exact("req-b", cls="class-b", count=2)]),
        ],
    ),
    # --- kubernetes#140437: a persisted share alone marks the device's counters as paid -----------
    Case(
        "persisted-counter-only-share-is-not-recharged",
        "#140437 (v1.37.0; its 1.36 cherry-pick was closed), rebuilt from the PR's review thread",
        [
            A,
            resource_slice(
                "s1",
                [device("device-1", allowMultipleAllocations=True, consumesCounters=consumes())],
                count=2,
            ),
            counters("1"),
            claim("held", allocation=allocated(("driver-a", "pool-1", "device-1"), share="share-held")),
            claim(),
        ],
        devices=[[("req-0", "device-1")]],
    ),
    Case(
        "persisted-share-on-another-device-does-not-skip-this-devices-counters",
        "#140437, the guard case of its review thread",
        [
            A,
            resource_slice(
                "s1",
                [
                    device(
                        "device-1",
                        attributes=attrs(mode="a"),
                        allowMultipleAllocations=True,
                        consumesCounters=consumes(),
                    ),
                    device(
                        "device-2",
                        attributes=attrs(mode="b"),
                        allowMultipleAllocations=True,
                        consumesCounters=consumes(),
                    ),
                ],
                count=2,
            ),
            counters("1"),
            claim("held", allocation=allocated(("driver-a", "pool-1", "device-2"), share="share-held")),
            claim(requests=[exact(selectors=['device.attributes["driver-a"].mode == "a"'])]),
        ],
    ),
    # --- kubernetes#140325: matchAttribute over list values restores its intersection on undo -----
    Case(
        "match-attribute-list-intersection-restored-on-backtrack",
        "#140325 (v1.37.0; no 1.36 cherry-pick), the reproduction of kubernetes#140300",
        [
            A,
            resource_slice(
                "s1",
                [
                    device("dev-1", attributes=attrs(ids=("ints", [1, 2]))),
                    device("dev-2", attributes=attrs(ids=("ints", [1]))),
                    device("dev-3", attributes=attrs(ids=("ints", [2]))),
                    device("dev-4", attributes=attrs(ids=("ints", [2]))),
                ],
            ),
            claim(requests=[exact(count=3)], constraints=[{"matchAttribute": "driver-a/ids"}]),
        ],
        gates="DRAListTypeAttributes=true",
        devices=[[("req-0", "dev-1"), ("req-0", "dev-3"), ("req-0", "dev-4")]],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_released_allocator_fix(case: Case) -> None:
    out = allocate(case.objects, case.claims, gates=case.gates)
    if case.devices is None:
        if case.error:
            assert out.error is not None and case.error in out.error, out
        else:
            assert out.unsatisfiable is not None, out
        return
    assert out.allocations is not None, out
    assert [out.devices(i) for i in range(len(case.claims))] == case.devices


LIST_CONSTRAINTS = [
    # name, constraint, device values, count, devices allocated (None: unsatisfiable)
    ("match: scalar meets list", "matchAttribute", [("int", 2), ("ints", [1, 2])], 2, ["d0", "d1"]),
    ("match: disjoint lists", "matchAttribute", [("ints", [1]), ("ints", [2])], 2, None),
    ("match: other families never meet", "matchAttribute", [("ints", [1]), ("strings", ["1"])], 2, None),
    ("match: an empty list is no value", "matchAttribute", [("ints", []), ("ints", [1])], 1, ["d1"]),
    ("distinct: overlapping lists", "distinctAttribute", [("ints", [1, 2]), ("ints", [2, 3])], 2, None),
    ("distinct: disjoint lists", "distinctAttribute", [("ints", [1, 2]), ("ints", [3])], 2, ["d0", "d1"]),
    (
        "distinct: other families are disjoint",
        "distinctAttribute",
        [("ints", [1]), ("strings", ["1"])],
        2,
        ["d0", "d1"],
    ),
]


@pytest.mark.parametrize(
    ("name", "kind_", "values", "count", "expected"), LIST_CONSTRAINTS, ids=[c[0] for c in LIST_CONSTRAINTS]
)
def test_list_valued_constraints(
    name: str, kind_: str, values: list[tuple[str, Any]], count: int, expected: list[str] | None
) -> None:
    """DRAListTypeAttributes (experimental allocator, upstream attributeAsSet): sets, not values."""
    objects = [
        A,
        resource_slice("s1", [device(f"d{i}", attributes=attrs(v=value)) for i, value in enumerate(values)]),
        claim(requests=[exact(count=count)], constraints=[{kind_: "driver-a/v"}]),
    ]
    out = allocate(objects, gates="DRAListTypeAttributes=true")
    if expected is None:
        assert out.unsatisfiable is not None, out
    else:
        assert [d for _, d in out.devices()] == expected


def test_a_later_constraint_refusing_a_device_rolls_back_the_earlier_ones() -> None:
    """allocateDevice adds the device to each constraint in turn; when one refuses it, the ones
    before it drop it again (rollbackDevice's constraintsAdded), or d0's value would stick."""
    objects = [
        A,
        resource_slice(
            "s",
            [
                device("d0", attributes=attrs(a=1, b=1)),
                device("d1", attributes=attrs(a=1, b=1)),
                device("d2", attributes=attrs(a=2, b=2)),
                device("d3", attributes=attrs(a=2, b=3)),
            ],
        ),
        claim(
            requests=[exact("r0"), exact("r1")],
            constraints=[{"matchAttribute": "driver-a/a"}, {"distinctAttribute": "driver-a/b"}],
        ),
    ]
    assert allocate(objects).devices() == [("r0", "d2"), ("r1", "d3")]


DISTINCT_EVERY_DEVICE = [
    # name, device values, count, gates, 1.37 devices, 1.36 devices (None: unsatisfiable)
    (
        "distinct-constraint-single-request-multiple-devices: 1, 2, 1, 3 for three devices",
        [1, 2, 1, 3],
        3,
        "",
        ["d0", "d1", "d3"],
        ["d0", "d1", "d2"],  # d2 was compared with d1's value only
    ),
    ("both devices without the attribute: no solution", [None, None], 2, "", None, None),
    ("three equal values for three devices", [1, 1, 1], 3, "", None, None),
    (
        "list values: a device repeating the first's element after a disjoint one",
        [("ints", [1]), ("ints", [2]), ("ints", [1, 5]), ("ints", [3])],
        3,
        "DRAListTypeAttributes=true",
        ["d0", "d1", "d3"],
        ["d0", "d1", "d2"],
    ),
    (
        "list values: an empty list is refused even as the first device",
        [("ints", []), ("ints", [1])],
        1,
        "DRAListTypeAttributes=true",
        ["d1"],
        ["d0"],
    ),
]


@pytest.mark.parametrize(
    ("name", "values", "count", "gates", "now", "before"),
    DISTINCT_EVERY_DEVICE,
    ids=[c[0] for c in DISTINCT_EVERY_DEVICE],
)
@pytest.mark.parametrize("release", [37, 36])
def test_distinct_attribute_checks_every_device_from_1_37(
    name: str,
    values: list[Any],
    count: int,
    gates: str,
    now: list[str] | None,
    before: list[str] | None,
    release: int,
) -> None:
    """kubernetes#140600 (issue #140438; cases of #140727, both in v1.37.0, rebuilt from their
    descriptions): distinctAttribute kept one value per request name, so a request's third
    device was compared with its second only. 1.36 (read at v1.36.3) keeps that, and accepts any
    first device; the 1.37 experimental constraint (read at 121460de) refuses a first device
    whose value is no set."""
    devices = [
        device(f"d{i}", attributes=attrs(v=value) if value is not None else None)
        for i, value in enumerate(values)
    ]
    objects = [
        A,
        resource_slice("s1", devices),
        claim(requests=[exact(count=count)], constraints=[{"distinctAttribute": "driver-a/v"}]),
    ]
    out = allocate(objects, gates=gates, release=release)
    expected = now if release >= 37 else before
    if expected is None:
        assert out.unsatisfiable is not None, out
    else:
        assert [d for _, d in out.devices()] == expected
