"""DRADerivedAttributes (1.37 alpha): requests' CEL-derived attributes in claim constraints.

The first case is upstream's integration test ``testDerivedAttributes`` (test/integration/dra,
kubernetes#140029, 1.37), translated; the allocator-table entries that pull request added were
not stored anywhere readable here, so the others are rebuilt from the 1.37-era experimental
allocator's ``validateDeviceRequest``/``lookupAttribute`` and the cel package's
``valToDeviceAttribute``, each saying which rule it pins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from tests.allocator.harness import allocate
from tests.builders import attrs, claim, device, device_class, exact, first_available, resource_slice

ON = "DRADerivedAttributes=true"
A = device_class("class-a", 'device.driver == "driver-a"')
B = device_class("class-b", 'device.driver == "driver-b"')

#: Upstream's integration-test devices: the same NUMA node, spelled differently by two drivers.
NUMA = [
    resource_slice(
        "slice-a",
        [
            device("device-a1", attributes={"dra.example.com/numa": {"string": "numa-0"}}),
            device("device-a2", attributes={"dra.example.com/numa": {"string": "numa-1"}}),
        ],
    ),
    resource_slice(
        "slice-b",
        [
            device("device-b1", attributes={"dra.example.com/numaNode": {"string": "numa-1"}}),
            device("device-b2", attributes={"dra.example.com/numaNode": {"string": "numa-2"}}),
        ],
        driver="driver-b",
    ),
]
SHARED = "derived/sharedNumaNode"


def derived(name: str, expression: str) -> dict[str, Any]:
    return {"name": name, "expression": expression}


def numa_claim(a_expression: str = 'device.attributes["dra.example.com"].numa') -> dict[str, Any]:
    return claim(
        requests=[
            exact("req-a", "class-a", derivedAttributes=[derived(SHARED, a_expression)]),
            exact(
                "req-b",
                "class-b",
                derivedAttributes=[derived(SHARED, 'device.attributes["dra.example.com"].numaNode')],
            ),
        ],
        constraints=[{"requests": ["req-a", "req-b"], "matchAttribute": SHARED}],
    )


@dataclass
class Case:
    name: str
    objects: list[dict[str, Any]]
    gates: str = ON
    release: int | None = None
    #: (request, device) pairs; None: no allocation.
    devices: list[tuple[str, str]] | None = None
    #: For failures: the whole error (fatal for the attempt); None: plain unsatisfiable.
    error: str | None = None


def numbered(values: list[Any], name: str = "v") -> dict[str, Any]:
    return resource_slice("s", [device(f"d{i}", attributes=attrs(**{name: v})) for i, v in enumerate(values)])


CASES = [
    Case(
        "integration testDerivedAttributes: two drivers' NUMA spellings match through one derived name",
        [A, B, *NUMA, numa_claim()],
        devices=[("req-a", "device-a2"), ("req-b", "device-b1")],
    ),
    Case(
        "gate off: every 1.37 allocator refuses the request rather than ignore its constraint",
        [A, B, *NUMA, numa_claim()],
        gates="",
        error="claim default/claim-0, request req-a: cannot handle request with derived attributes, the feature is disabled",
    ),
    Case(
        "1.36 has no such field: the constraint looks for a device attribute of that name",
        [A, B, *NUMA, numa_claim()],
        gates="",
        release=36,
    ),
    Case(
        "an evaluation error is fatal, with the device and no selector hint",
        [A, B, *NUMA, numa_claim('device.attributes["dra.example.com"].missing')],
        error="evaluate derived attribute derived/sharedNumaNode on device driver-a/pool-1/device-a1 failed: "
        "no such key: missing",
    ),
    Case(
        "a result that is no attribute type fails compilation",
        [A, B, *NUMA, numa_claim("1.5")],
        error="compile derived attribute derived/sharedNumaNode failed: must evaluate to a primitive scalar "
        "(string, integer, boolean, semver) or a list of these scalars, not double",
    ),
    Case(
        "a runtime result that is no attribute type fails evaluation",
        [A, B, *NUMA, numa_claim("dyn(1u)")],
        error="evaluate derived attribute derived/sharedNumaNode on device driver-a/pool-1/device-a1 failed: "
        "unsupported CEL return type: uint64",
    ),
    Case(
        "a list mixing types fails evaluation at the first odd element",
        [A, B, *NUMA, numa_claim('[1, dyn("x")]')],
        error="evaluate derived attribute derived/sharedNumaNode on device driver-a/pool-1/device-a1 failed: "
        "expected list element at index 1 to be int, got string",
    ),
    Case(
        "a derived attribute shadows the driver attribute of the same name (its request only)",
        [
            A,
            numbered([1, 2]),
            claim(
                requests=[
                    exact("r0", derivedAttributes=[derived("driver-a/v", "2")]),
                    exact("r1"),
                ],
                constraints=[{"matchAttribute": "driver-a/v"}],
            ),
        ],
        devices=[("r0", "d0"), ("r1", "d1")],
    ),
    Case(
        "without shadowing the same devices do not match",
        [
            A,
            numbered([1, 2]),
            claim(requests=[exact("r0"), exact("r1")], constraints=[{"matchAttribute": "driver-a/v"}]),
        ],
    ),
    Case(
        "the expression is evaluated only for devices the request's selectors admit",
        [
            A,
            resource_slice(
                "s", [device("d0", attributes=attrs(v=1)), device("d1", attributes=attrs(v=2, w=5))]
            ),
            claim(
                requests=[
                    exact(
                        selectors=['device.attributes["driver-a"].v == 2'],
                        # d0 has no "w": evaluating there would be a fatal error.
                        derivedAttributes=[derived("derived/x", 'device.attributes["driver-a"].w')],
                    )
                ],
                constraints=[{"matchAttribute": "derived/x"}],
            ),
        ],
        devices=[("req-0", "d1")],
    ),
    Case(
        "a branch too short to succeed is still walked: the derived error on its next device is fatal",
        [
            A,
            resource_slice("s", [device("d0", attributes=attrs(v=1)), device("d1", attributes=attrs(w=1))]),
            claim(
                requests=[
                    exact(
                        count=3, derivedAttributes=[derived("derived/x", 'device.attributes["driver-a"].v')]
                    )
                ],
                constraints=[{"matchAttribute": "derived/x"}],
            ),
        ],
        error="evaluate derived attribute derived/x on device driver-a/pool-1/d1 failed: no such key: v",
    ),
    Case(
        "a request no constraint covers never evaluates its derived attribute",
        [
            A,
            numbered([1, 1]),
            claim(
                requests=[
                    exact(
                        "r0", derivedAttributes=[derived("derived/x", 'device.attributes["driver-a"].nope')]
                    ),
                    exact("r1"),
                ],
                constraints=[{"requests": ["r1"], "matchAttribute": "derived/x"}],
            ),
        ],
        # r1 has no derived "derived/x" and no device attribute of that name.
    ),
    Case(
        "derived attributes are invisible to selectors",
        [
            A,
            numbered([1]),
            claim(
                requests=[
                    exact(
                        "r0",
                        selectors=['!("derived" in device.attributes)'],
                        derivedAttributes=[derived("derived/x", "1")],
                    )
                ],
                constraints=[{"matchAttribute": "derived/x"}],
            ),
        ],
        devices=[("r0", "d0")],
    ),
    Case(
        "each firstAvailable subrequest uses its own expressions",
        [
            A,
            numbered([1, 2, 3]),
            claim(
                requests=[
                    first_available(
                        "r0",
                        exact("big", count=2, derivedAttributes=[derived("derived/x", '"same"')]),
                        exact("small", count=1),
                    ),
                    exact("r1", derivedAttributes=[derived("derived/x", '"same"')]),
                ],
                constraints=[{"matchAttribute": "derived/x"}],
            ),
        ],
        devices=[("r0/big", "d0"), ("r0/big", "d1"), ("r1", "d2")],
    ),
    Case(
        "a subrequest without the attribute falls back to the device's (none here): the next one is tried",
        [
            A,
            numbered([1, 2]),
            claim(
                requests=[
                    first_available(
                        "r0",
                        exact("plain"),
                        exact("derived", derivedAttributes=[derived("derived/x", '"same"')]),
                    ),
                    exact("r1", derivedAttributes=[derived("derived/x", '"same"')]),
                ],
                constraints=[{"matchAttribute": "derived/x"}],
            ),
        ],
        devices=[("r0/derived", "d0"), ("r1", "d1")],
    ),
    Case(
        "distinctAttribute over a derived value: every device's value counts (count 3 over 1, 2, 1, 3)",
        [
            A,
            numbered([1, 2, 1, 3]),
            claim(
                requests=[
                    exact(
                        count=3,
                        derivedAttributes=[derived("derived/v", 'device.attributes["driver-a"].v * 10')],
                    )
                ],
                constraints=[{"distinctAttribute": "derived/v"}],
            ),
        ],
        devices=[("req-0", "d0"), ("req-0", "d1"), ("req-0", "d3")],
    ),
    Case(
        "a semver result compares as a version",
        [
            A,
            numbered(["1.2.3", "1.2.3"]),
            claim(
                requests=[
                    exact(
                        count=2,
                        derivedAttributes=[derived("derived/v", 'semver(device.attributes["driver-a"].v)')],
                    )
                ],
                constraints=[{"matchAttribute": "derived/v"}],
            ),
        ],
        devices=[("req-0", "d0"), ("req-0", "d1")],
    ),
    Case(
        "list results intersect with DRAListTypeAttributes",
        [
            A,
            numbered([1, 2, 3]),
            claim(
                requests=[
                    exact(
                        count=2,
                        derivedAttributes=[
                            derived(
                                "derived/near",
                                '[device.attributes["driver-a"].v, device.attributes["driver-a"].v + 1]',
                            )
                        ],
                    )
                ],
                constraints=[{"matchAttribute": "derived/near"}],
            ),
        ],
        gates=ON + ",DRAListTypeAttributes=true",
        devices=[("req-0", "d0"), ("req-0", "d1")],
    ),
    Case(
        "list results without DRAListTypeAttributes never match a second device",
        [
            A,
            numbered([1, 1]),
            claim(
                requests=[exact(count=2, derivedAttributes=[derived("derived/l", "[1]")])],
                constraints=[{"matchAttribute": "derived/l"}],
            ),
        ],
    ),
    Case(
        "an empty list is no value for a list-aware constraint",
        [
            A,
            numbered([1]),
            claim(
                requests=[exact(derivedAttributes=[derived("derived/l", "[]")])],
                constraints=[{"matchAttribute": "derived/l"}],
            ),
        ],
        gates=ON + ",DRAListTypeAttributes=true",
    ),
    Case(
        "allocationMode All: a device the derived constraint refuses is an error",
        [
            A,
            numbered([1, 2]),
            claim(
                requests=[
                    exact(
                        mode="All",
                        derivedAttributes=[derived("derived/v", 'device.attributes["driver-a"].v')],
                    )
                ],
                constraints=[{"matchAttribute": "derived/v"}],
            ),
        ],
        error="claim default/claim-0, request req-0: cannot add device driver-a/pool-1/d1 because a claim "
        "constraint would not be satisfied",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_derived_attributes(case: Case) -> None:
    out = allocate(case.objects, gates=case.gates, release=case.release)
    if case.devices is not None:
        assert out.allocations is not None, out
        assert out.devices() == case.devices
    elif case.error is not None:
        assert out.error == case.error, out
    else:
        assert out.unsatisfiable is not None, out
