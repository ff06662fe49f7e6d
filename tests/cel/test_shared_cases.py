"""Every shared CEL case (tests/shared_cases/cel, and ../shared/cel when it differs), translated
from upstream's own CEL tests."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from extender.cel import CelCompileError, CelEnvironment, CelEvalError, CelOptions, Mode
from tests.cel.builders import yaml_device
from tests.shared import case_files

CASES: list[dict[str, Any]] = [
    case for _label, path in case_files("cel/cases.yaml") for case in yaml.safe_load(path.read_text())
]
_ENVIRONMENTS: dict[CelOptions, CelEnvironment] = {}


def environment(options: CelOptions) -> CelEnvironment:
    """Environments are immutable apart from caches; building one costs ~0.15 s, so share them."""
    if options not in _ENVIRONMENTS:
        _ENVIRONMENTS[options] = CelEnvironment(options)
    return _ENVIRONMENTS[options]


def outcome(case: dict[str, Any]) -> tuple[Any, str]:
    features = case.get("features") or []
    env = environment(
        CelOptions(
            list_type_attributes="DRAListTypeAttributes" in features,
            consumable_capacity="DRAConsumableCapacity" in features,
        )
    )
    mode = Mode.NEW if case.get("env") == "NewExpressions" else Mode.STORED
    program = env.compile(case["expression"], mode)
    if isinstance(program, CelCompileError):
        return "compile-error", str(program)
    try:
        return env.matches(program, yaml_device(case["device"])), ""
    except CelEvalError as exc:
        return "runtime-error", str(exc)


def test_the_sample_is_not_empty() -> None:
    assert len(CASES) >= 50


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_shared_cel_case(case: dict[str, Any]) -> None:
    got, message = outcome(case)
    assert got == case["expect"], message
    assert case.get("errorContains", "") in message
