"""Derived attributes' CEL (DRADerivedAttributes): the result types compile accepts and how a
result becomes an attribute (upstream cel package: validateOutputType for derived attributes,
valToDeviceAttribute; 1.37-era source, see extender/cel/derived.py)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cel import CelCompileError, CelEnvironment, CelEvalError, Mode, Program
from tests.cel.builders import device, version

DEVICE = device("driver-a", numa=1, name="a", ok=True, v=version("1.2.3"))

CONVERTED = [
    ("bool", "device.attributes['driver-a'].ok", ("bool", True)),
    ("int", "device.attributes['driver-a'].numa + 1", ("int", 2)),
    ("string", "device.attributes['driver-a'].name", ("string", "a")),
    ("semver attribute", "device.attributes['driver-a'].v", ("version", "1.2.3")),
    ("semver built", 'semver("2.0.0-rc.1+b")', ("version", "2.0.0-rc.1+b")),
    ("int list", "[1, 2]", ("ints", (1, 2))),
    ("string list", '["a", "b"]', ("strings", ("a", "b"))),
    ("bool list", "[true]", ("bools", (True,))),
    ("semver list", '[semver("1.0.0")]', ("versions", ("1.0.0",))),
    ("empty list: an empty string list", "[]", ("strings", ())),
    ("dyn holding an int", "dyn(3)", ("int", 3)),
]


@pytest.mark.parametrize(("name", "expression", "expected"), CONVERTED, ids=[c[0] for c in CONVERTED])
def test_results_become_attributes(name: str, expression: str, expected: Any) -> None:
    env = CelEnvironment()
    program = env.compile(expression, Mode.DERIVED)
    assert isinstance(program, Program), program
    assert env.derive(program, DEVICE) == expected


REFUSED_AT_COMPILE = [
    ("double", "1.5", "double"),
    ("uint", "1u", "uint"),
    ("map", '{"a": 1}', "map(string, int)"),
    ("quantity", 'quantity("1Gi")', "kubernetes.Quantity"),
    ("list of doubles", "[1.5]", "list(double)"),
]


@pytest.mark.parametrize(
    ("name", "expression", "type_"), REFUSED_AT_COMPILE, ids=[c[0] for c in REFUSED_AT_COMPILE]
)
def test_other_result_types_fail_compilation(name: str, expression: str, type_: str) -> None:
    result = CelEnvironment().compile(expression, Mode.DERIVED)
    assert isinstance(result, CelCompileError)
    assert str(result) == (
        "must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these "
        f"scalars, not {type_}"
    )


REFUSED_AT_RUN_TIME = [
    ("uint behind dyn", "dyn(1u)", "unsupported CEL return type: uint64"),
    ("double behind dyn", "dyn(1.5)", "unsupported CEL return type: float64"),
    ("map behind dyn", 'dyn({"a": 1})', "unsupported CEL return type: map[ref.Val]ref.Val"),
    ("list of doubles behind dyn", "dyn([1.5])", "unsupported list element type: float64"),
    ("mixed list", '[dyn(1), dyn("a")]', "expected list element at index 1 to be int, got string"),
    ("missing attribute, no hint", "device.attributes['driver-a'].gone", "no such key: gone"),
]


@pytest.mark.parametrize(
    ("name", "expression", "message"), REFUSED_AT_RUN_TIME, ids=[c[0] for c in REFUSED_AT_RUN_TIME]
)
def test_run_time_errors(name: str, expression: str, message: str) -> None:
    env = CelEnvironment()
    program = env.compile(expression, Mode.DERIVED)
    assert isinstance(program, Program), program
    with pytest.raises(CelEvalError) as caught:
        env.derive(program, DEVICE)
    assert str(caught.value) == message


def test_selectors_and_derived_attributes_are_compiled_apart() -> None:
    """One text, two programs: a selector must be a bool, a derived attribute need not be."""
    env = CelEnvironment()
    assert isinstance(env.compile("1", Mode.STORED), CelCompileError)
    assert isinstance(env.compile("1", Mode.DERIVED), Program)
    assert isinstance(env.compile("true", Mode.DERIVED), Program)


def test_one_text_as_selector_and_as_derived_attribute_on_one_device() -> None:
    """The memo on the device and on the program never hands one kind's result to the other."""
    env = CelEnvironment()
    selector = env.compile("true")
    as_attribute = env.compile("true", Mode.DERIVED)
    assert isinstance(selector, Program) and isinstance(as_attribute, Program)
    assert env.matches(selector, DEVICE) is True
    assert env.derive(as_attribute, DEVICE) == ("bool", True)
    assert env.matches(selector, DEVICE) is True
