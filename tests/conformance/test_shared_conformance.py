"""Every case under ../shared/conformance/, through ``dra-extender simulate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.runner import mismatches, run_simulate
from tests.shared import shared_dir


def load_cases() -> list[dict[str, Any]]:
    cases = []
    for path in sorted((shared_dir() / "conformance").glob("*/*.yaml")):
        for case in yaml.safe_load_all(path.read_text()):
            case["_file"] = f"{path.parent.name}/{path.name}"
            cases.append(case)
    return cases


CASES = load_cases()


def test_the_sample_is_complete() -> None:
    assert len(CASES) >= 60
    assert len({c["name"] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["_file"] for c in CASES])
def test_shared_conformance_case(case: dict[str, Any], tmp_path: Path) -> None:
    result = run_simulate(case, tmp_path)
    assert not result["problems"], result["problems"]
    assert mismatches(case, result) == []
