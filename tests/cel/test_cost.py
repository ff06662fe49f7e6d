"""Cost bounds: runaway expressions stop with an error, well within the scheduler's budget."""

from __future__ import annotations

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
from extender.cel.compiler import DEADLINE_CHECK_INTERVAL
from extender.cel.environment import MAX_COST
from tests.cel.builders import device

QUADRATIC = "lists.range(2000).all(x, lists.range(2000).all(y, x + y >= 0))"


def test_runtime_cost_limit_stops_a_runaway_expression() -> None:
    """Stopped once it has spent the limit: the evaluation looks at its deadline every
    DEADLINE_CHECK_INTERVAL units, so the looks count the units spent (uncapped, 4M body
    evaluations take 12,000 looks; ``python -m bench.cel_bench`` times the stop)."""
    looks: list[None] = []

    def clock() -> float:
        looks.append(None)
        return 0.0

    env = CelEnvironment(clock=clock)
    program = env.compile(QUADRATIC)
    assert isinstance(program, Program)
    with pytest.raises(CelCostLimitError, match="actual cost limit exceeded"):
        env.matches(program, device(), deadline=float("inf"))
    assert 0 < len(looks) <= MAX_COST // DEADLINE_CHECK_INTERVAL


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


def test_failures_are_counted_once_per_computed_result() -> None:
    """The metrics' counts: a compile error once per expression, an evaluation error once per
    computed (not memoized) result, a cost-limit hit both as an error and as a hit."""
    env = CelEnvironment(CelOptions(cost_limit=10_000))
    for _ in range(3):
        assert isinstance(env.compile("device.attributes["), CelCompileError)
    missing = env.compile(
        'device.attributes["gpu.example.com"].model + device.attributes["gpu.example.com"].absent == "x"'
    )
    runaway = env.compile(QUADRATIC)
    fine = env.compile('device.driver == "gpu.example.com"')
    assert isinstance(missing, Program) and isinstance(runaway, Program) and isinstance(fine, Program)
    one = device(model="a")
    for _ in range(3):  # the memo answers the second and third time
        with pytest.raises(CelEvalError, match="no such key"):
            env.matches(missing, one)
        with pytest.raises(CelCostLimitError):
            env.matches(runaway, one)
        assert env.matches(fine, one)
    with pytest.raises(CelEvalError):
        env.matches(missing, device(model="b"))  # another value read: computed again
    counts = env.counts
    assert (counts.compile_errors, counts.evaluation_errors, counts.cost_limit_hits) == (1, 3, 1)
