"""The ``device`` variable as upstream builds it: domains, defaults, typing, eager conversion."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cel import CelOptions, Mode
from tests.cel.builders import device, version
from tests.cel.harness import COMPILE_ERROR, RUNTIME_ERROR, check

GPU = device(
    "gpu.example.com",
    productName="A100",
    index=3,
    healthy=True,
    driverVersion=version("550.54.15"),
    qualified={"resource.kubernetes.io/pcieRoot": "pci0000:00"},
    capacity={"memory": "40Gi", "other.example.com/bandwidth": "10G"},
)

# (name, expression, expected, error substring)
Case = tuple[str, str, Any, str]
CASES: list[Case] = [
    ("driver", 'device.driver == "gpu.example.com"', True, ""),
    ("bare-name-in-driver-domain", 'device.attributes["gpu.example.com"].productName == "A100"', True, ""),
    ("index-syntax-equivalent", 'device.attributes["gpu.example.com"]["index"] == 3', True, ""),
    ("bool-attribute-as-result", 'device.attributes["gpu.example.com"].healthy', True, ""),
    (
        "qualified-in-own-domain",
        'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"',
        True,
        "",
    ),
    (
        "qualified-not-in-driver-domain",
        'device.attributes["gpu.example.com"].pcieRoot == "x"',
        RUNTIME_ERROR,
        "no such key: pcieRoot",
    ),
    (
        "missing-key-hint",
        'device.attributes["gpu.example.com"].nope == 1',
        RUNTIME_ERROR,
        "consider using CEL optional chaining",
    ),
    ("unknown-domain-is-empty", 'size(device.attributes["amd.com"]) == 0', True, ""),
    ("in-uses-real-keys", '"amd.com" in device.attributes', False, ""),
    ("has-outer-quirk", "has(device.attributes.amd)", True, ""),
    (
        "has-inner",
        'has(device.attributes["gpu.example.com"].index) && !has(device.attributes["gpu.example.com"].x)',
        True,
        "",
    ),
    ("optional-inner", 'device.attributes["gpu.example.com"].?x.orValue(7) == 7', True, ""),
    (
        "capacity-quantity",
        'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("16Gi"))',
        True,
        "",
    ),
    ("qualified-capacity", 'device.capacity["other.example.com"].bandwidth == quantity("10G")', True, ""),
    (
        "capacity-relational-compile-error",
        'device.capacity["gpu.example.com"].memory >= quantity("16Gi")',
        COMPILE_ERROR,
        "found no matching overload for '_>=_'",
    ),
    (
        "attribute-relational-runtime-error",
        'device.attributes["gpu.example.com"].productName >= 1',
        RUNTIME_ERROR,
        "no such overload",
    ),
    (
        "version-equals-string-error",
        'device.attributes["gpu.example.com"].driverVersion == "550.54.15"',
        RUNTIME_ERROR,
        "no such overload",
    ),
    (
        "string-equals-version-false",
        '"550.54.15" == device.attributes["gpu.example.com"].driverVersion',
        False,
        "",
    ),
    (
        "string-of-version-error",
        'string(device.attributes["gpu.example.com"].driverVersion) == "x"',
        RUNTIME_ERROR,
        "no such overload",
    ),
    (
        "version-compare",
        'device.attributes["gpu.example.com"].driverVersion.compareTo(semver("535.0.0")) > 0',
        True,
        "",
    ),
    ("allow-multiple-default", "device.allowMultipleAllocations == false", True, ""),
    ("undefined-field", 'device.name == "gpu-0"', COMPILE_ERROR, "undefined field 'name'"),
    (
        "non-bool-result",
        'device.attributes["gpu.example.com"].productName',
        RUNTIME_ERROR,
        "could not be converted to bool",
    ),
    (
        "string-result-compile-error",
        "device.driver",
        COMPILE_ERROR,
        "must evaluate to bool or the unknown type, not string",
    ),
    ("iterate-domains", 'device.attributes.exists(d, d == "resource.kubernetes.io")', True, ""),
    ("iterate-ids", 'device.attributes["gpu.example.com"].all(k, k != "")', True, ""),
    (
        "two-var-over-attributes",
        'device.attributes["gpu.example.com"].exists(k, v, k == "index" && v == 3)',
        True,
        "",
    ),
    (
        "bind-domain",
        'cel.bind(g, device.attributes["gpu.example.com"], g.index == 3 && g.productName == "A100")',
        True,
        "",
    ),
]


@pytest.mark.parametrize(("name", "expression", "expected", "contains"), CASES, ids=[c[0] for c in CASES])
def test_device_variable(name: str, expression: str, expected: object, contains: str) -> None:
    check(expression, expected, contains, dev=GPU)


def test_unparsable_version_fails_every_expression() -> None:
    bad = device("gpu.example.com", driverVersion=version("v550"))
    check("true", RUNTIME_ERROR, "attribute driverVersion: parse semantic version", dev=bad)
    check('device.driver == "gpu.example.com"', RUNTIME_ERROR, "parse semantic version", dev=bad)


def test_allow_multiple_allocations_field() -> None:
    shared = device("gpu.example.com", allow_multiple=True)
    check("device.allowMultipleAllocations", True, dev=shared)


def test_new_expressions_hide_allow_multiple_allocations_without_the_gate() -> None:
    options = CelOptions(consumable_capacity=False)
    check("device.allowMultipleAllocations", COMPILE_ERROR, "undefined field", options=options, mode=Mode.NEW)
    check("device.allowMultipleAllocations == false", True, options=options, mode=Mode.STORED)


def test_new_expressions_length_limit() -> None:
    long = 'device.driver == "' + "x" * 10240 + '"'
    check(long, COMPILE_ERROR, "may not be more than 10240 bytes", mode=Mode.NEW)
    check(long, False)  # the scheduler (stored expressions) does not check the length


def test_devices_read_by_three_threads_at_once_are_grouped_without_failing() -> None:
    """The make-room planner's thread reads the same devices as the event loop. With the
    interpreter switching threads every microsecond, the grouping a CEL view does on first read
    was caught half done in about 1 of 600 devices (an AssertionError) before it was made one
    store; 20,000 devices (some 30 caught before) take about a second."""
    import sys
    import threading

    from extender.cel.device import CelDevice
    from extender.quantity import parse_quantity

    flat = {f"a{i}": ("int", i) for i in range(8)} | {f"example.com/b{i}": ("string", "s") for i in range(8)}
    capacity = {f"c{i}": parse_quantity("1Gi") for i in range(20)}
    devices = [CelDevice.from_flat("d", flat, capacity) for _ in range(20_000)]
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def read(what: Any) -> None:
        start.wait()
        for d in devices:
            try:
                what(d)
            except BaseException as exc:
                errors.append(exc)

    readers = [lambda d: d.attributes, lambda d: d.capacity, lambda d: d.conversion_error(False)]
    threads = [threading.Thread(target=read, args=(r,)) for r in readers]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert all(len(d.attributes["d"]) == 8 and len(d.capacity["d"]) == 20 for d in devices)
