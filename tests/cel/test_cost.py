"""Cost bounds: runaway expressions stop with an error, well within the scheduler's budget."""

from __future__ import annotations

import time

import pytest

from extender.cel import (
    CelCompileError,
    CelCostLimitError,
    CelEnvironment,
    CelEvalError,
    CelOptions,
    Mode,
    Program,
)
from tests.cel.builders import device

QUADRATIC = "lists.range(2000).all(x, lists.range(2000).all(y, x + y >= 0))"


def test_runtime_cost_limit_stops_a_runaway_expression() -> None:
    env = CelEnvironment()
    program = env.compile(QUADRATIC)
    assert isinstance(program, Program)
    start = time.perf_counter()
    with pytest.raises(CelCostLimitError, match="actual cost limit exceeded"):
        env.matches(program, device())
    assert time.perf_counter() - start < 5.0  # far below the uncapped cost (4M body evaluations)


def test_cost_errors_are_not_absorbed_by_or() -> None:
    env = CelEnvironment(CelOptions(cost_limit=10_000))
    program = env.compile(f"({QUADRATIC}) || true")
    assert isinstance(program, Program)
    with pytest.raises(CelCostLimitError):
        env.matches(program, device())


def test_a_fresh_evaluation_gets_a_fresh_budget() -> None:
    env = CelEnvironment(CelOptions(cost_limit=5_000))
    program = env.compile("lists.range(100).all(x, x >= 0)")
    assert isinstance(program, Program)
    for i in range(50):
        assert env.matches(program, device(uuid=f"u{i}"), deadline=None)


@pytest.mark.parametrize(
    ("expression", "accepted"),
    [
        ('device.attributes["gpu.example.com"].model == "a"', True),
        ('device.attributes["d"].exists(k, v, k.startsWith("x"))', True),
        ("lists.range(100).all(x, x >= 0)", True),
        (QUADRATIC, False),
        ("lists.range(1000).map(x, lists.range(1000).map(y, x * y)).size() > 0", False),
    ],
)
def test_new_expressions_static_cost_limit(expression: str, accepted: bool) -> None:
    env = CelEnvironment()
    result = env.compile(expression, Mode.NEW)
    if accepted:
        assert isinstance(result, Program), result
    else:
        assert isinstance(result, CelCompileError)
        assert "too complex, exceeds cost limit" in str(result)
        # The scheduler's environment accepts it and relies on the runtime limit.
        assert isinstance(env.compile(expression, Mode.STORED), Program)


def test_compile_errors_are_values_and_cached() -> None:
    env = CelEnvironment()
    first = env.compile("device.nope == 1")
    assert isinstance(first, CelCompileError)
    assert env.compile("device.nope == 1") is first


def test_eval_error_is_a_cel_error() -> None:
    assert issubclass(CelCostLimitError, CelEvalError)
