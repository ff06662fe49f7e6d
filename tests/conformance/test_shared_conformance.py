"""Every shared conformance case (tests/shared_cases, and ../shared), through ``dra-extender simulate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.allocator.harness import allocate
from tests.conformance.plugin_level import PLUGIN_LEVEL
from tests.conformance.runner import feature_gates, mismatches, run_simulate
from tests.shared import case_files


def load_cases() -> list[dict[str, Any]]:
    cases = []
    for label, path in case_files("conformance/*/*.yaml"):
        for case in yaml.safe_load_all(path.read_text()):
            case["_file"] = label
            cases.append(case)
    return cases


CASES = load_cases()


def test_the_sample_is_complete() -> None:
    assert len(CASES) >= 60
    copies = [c for c in CASES if c["_file"].startswith("copy/")]
    assert len({c["name"] for c in copies}) == len(copies)


@pytest.mark.parametrize("case", CASES, ids=[c["_file"] for c in CASES])
def test_shared_conformance_case(case: dict[str, Any], tmp_path: Path) -> None:
    result = run_simulate(case, tmp_path)
    assert not result["problems"], result["problems"]
    assert mismatches(case, result) == []


@pytest.mark.parametrize("name", sorted(PLUGIN_LEVEL))
def test_plugin_level_overrides_keep_the_allocator_level_answer(name: str) -> None:
    """Where the plugin reports differently, the allocator itself still answers as the case says."""
    matching = [c for c in CASES if c["name"] == name]
    assert matching, f"override for a case that does not exist: {name}"
    case = matching[0]
    assert case["expect"]["outcome"] == "error"
    out = allocate(
        case["objects"],
        case["claims"],
        node=case["node"],
        labels=case.get("nodeLabels") or {},
        gates=feature_gates(case),
    )
    message = out.error or out.node_error or ""
    assert case["expect"].get("errorContains", "") in message, out
