"""Memoization: results keyed by the device fields an expression reads, never wrong."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.cel import CelDevice, CelEnvironment, CelEvalError, CelInterruptedError, Program
from extender.cel.reads import derive_reads
from tests.cel.builders import device, version

READS = [
    ("driver", "device.driver == 'x'", {("driver",)}),
    ("one-attribute", 'device.attributes["d"].model == "a"', {("attributes", "d", "model")}),
    ("index-form", 'device.attributes["d"]["model"] == "a"', {("attributes", "d", "model")}),
    ("optional-form", 'device.attributes["d"].?model.orValue("") == "a"', {("attributes", "d", "model")}),
    ("has-form", 'has(device.attributes["d"].model)', {("attributes", "d", "model")}),
    ("capacity", 'device.capacity["d"].mem.isInteger()', {("capacity", "d", "mem")}),
    ("whole-domain", 'device.attributes["d"].exists(k, k == "x")', {("attributes", "d")}),
    (
        "domain-and-key-collapse",
        'size(device.attributes["d"]) > 0 && device.attributes["d"].a == 1',
        {("attributes", "d")},
    ),
    ("all-attributes", '"d" in device.attributes', {("attributes",)}),
    ("dynamic-index", "device.attributes[device.driver].x == 1", {("attributes",), ("driver",)}),
    ("bound-device", "cel.bind(x, device, x.driver == 'a')", {("device",)}),
    ("no-device", "1 == 1", set()),
    ("shadowed-name", "[1].all(device, device == 1)", set()),
]


@pytest.mark.parametrize(("name", "expression", "expected"), READS, ids=[r[0] for r in READS])
def test_reads(env: CelEnvironment, name: str, expression: str, expected: set[tuple[str, ...]]) -> None:
    program = env.compile(expression)
    assert isinstance(program, Program)
    assert set(derive_reads(program.root)) == expected
    assert program.reads == frozenset(expected)


@pytest.fixture(scope="module")
def env() -> CelEnvironment:
    return CelEnvironment()


def compiled(env: CelEnvironment, expression: str) -> Program:
    program = env.compile(expression)
    assert isinstance(program, Program), program
    return program


def test_identical_devices_share_one_evaluation(env: CelEnvironment) -> None:
    program = compiled(env, 'device.attributes["gpu.example.com"].model == "m1"')
    devices = [device(model=f"m{i % 4}", uuid=f"GPU-{i}") for i in range(1000)]
    results = [env.matches(program, d) for d in devices]
    assert results.count(True) == 250
    assert len(program.memo) == 4  # one evaluation per distinct model


def test_memo_respects_quantity_representation(env: CelEnvironment) -> None:
    program = compiled(env, 'device.capacity["gpu.example.com"].memory.isInteger()')
    assert env.matches(program, device(capacity={"memory": "1"})) is True
    assert env.matches(program, device(capacity={"memory": "1000m"})) is False


def test_conversion_errors_are_not_hidden_by_a_shared_key(env: CelEnvironment) -> None:
    program = compiled(env, 'device.attributes["gpu.example.com"].model == "m1"')
    assert env.matches(program, device(model="m1", v=version("1.0.0"))) is True
    with pytest.raises(CelEvalError, match="parse semantic version"):
        env.matches(program, device(model="m1", v=version("1.0")))


def test_errors_are_memoized_and_raised_again(env: CelEnvironment) -> None:
    program = compiled(env, 'device.attributes["gpu.example.com"].missing == 1')
    dev = device(model="x")
    for _ in range(2):
        with pytest.raises(CelEvalError, match="no such key: missing"):
            env.matches(program, dev)


def test_interruptions_are_not_memoized() -> None:
    now = [0.0]
    env = CelEnvironment(clock=lambda: now[0])
    program = compiled(env, "lists.range(300).all(x, lists.range(300).all(y, x + y >= 0))")
    dev = device()
    now[0] = 10.0
    with pytest.raises(CelInterruptedError):
        env.matches(program, dev, deadline=5.0)
    assert env.matches(program, dev, deadline=None) is True


EXPRESSIONS = [
    'device.attributes["gpu.example.com"].model == "m1"',
    'device.attributes["gpu.example.com"].?model.orValue("") == "m2" || device.driver == "nic.example.com"',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',
    'device.attributes["gpu.example.com"].exists(k, v, k == "index" && v == 1)',
    'has(device.attributes["gpu.example.com"].index) && device.attributes["gpu.example.com"].index > 1',
    'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("2.0.0"))',
]

devices_strategy = st.builds(
    lambda drv, model, idx, mem, ver: device(
        drv,
        **{k: v for k, v in (("model", model), ("index", idx), ("driverVersion", ver)) if v is not None},
        capacity={"memory": mem} if mem else None,
    ),
    st.sampled_from(["gpu.example.com", "nic.example.com"]),
    st.one_of(st.none(), st.sampled_from(["m1", "m2"])),
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.sampled_from(["16Gi", "40Gi", "40960Mi", "80Gi"])),
    st.one_of(st.none(), st.sampled_from([version("1.0.0"), version("2.1.0"), version("3.0.0-rc.1")])),
)


def outcome(fn: object) -> object:
    try:
        return fn()  # type: ignore[operator]
    except CelEvalError as exc:
        return ("error", str(exc).split(".")[0])


SHARED_ENV = CelEnvironment()


@settings(max_examples=200, deadline=None)
@given(st.lists(devices_strategy, min_size=1, max_size=12))
def test_memoized_results_equal_fresh_evaluations(devices: list[CelDevice]) -> None:
    # One environment across examples: memo entries made for earlier devices must never answer
    # wrongly for later ones.
    env = SHARED_ENV
    for expression in EXPRESSIONS:
        program = compiled(env, expression)
        for d in devices:
            memo = outcome(lambda d=d, p=program: env.matches(p, d))
            fresh_device = CelDevice(d.driver, d.attributes, d.capacity, d.allow_multiple)
            fresh = outcome(lambda fd=fresh_device, p=program: env.evaluate_unmemoized(p, fd))
            assert memo == fresh, (expression, d.attributes, d.capacity)
