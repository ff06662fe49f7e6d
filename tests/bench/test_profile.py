"""The CPU profile's phases (bench/profile.py): library work by the innermost frame, the
engine's own work by the verb it serves."""

from __future__ import annotations

import pytest

from bench.profile import phase_of

ROOT = "/src/extender"


def _stack(*frames: str) -> str:
    return ";".join(["<module> (/src/bench/profile.py:1)", *frames])


# (case, stack from the outermost frame in, phase)
STACKS: list[tuple[str, str, str]] = [
    (
        "an allocation in a filter",
        _stack(f"filter_request ({ROOT}/scheduling/engine.py:383)", f"search ({ROOT}/allocator/search.py:9)"),
        "filter",
    ),
    (
        "an allocation in a bind is the bind's",
        _stack(
            f"bind ({ROOT}/scheduling/engine.py:377)",
            f"plan ({ROOT}/scheduling/decide/bind_plan.py:83)",
            f"search ({ROOT}/allocator/search.py:9)",
        ),
        "bind",
    ),
    (
        "the bind's writes are the API client's",
        _stack(
            f"bind ({ROOT}/scheduling/engine.py:377)",
            f"_reserve_once ({ROOT}/scheduling/write/claim_writes.py:169)",
            "request (/venv/aiohttp/client.py:400)",
        ),
        "bind: API client",
    ),
    (
        "prioritize's scores",
        _stack(
            f"prioritize ({ROOT}/scheduling/engine.py:333)",
            f"score_nodes ({ROOT}/scheduling/decide/scores.py:36)",
        ),
        "prioritize",
    ),
    (
        "a log line inside a filter is logging",
        _stack(f"filter ({ROOT}/scheduling/engine.py:151)", "emit (/py/logging/__init__.py:1000)"),
        "logging",
    ),
    (
        "the engine's bookkeeping outside a verb",
        _stack(f"sweep_finalizers ({ROOT}/scheduling/write/binder.py:383)"),
        "decisions: other",
    ),
    ("nothing known", _stack("select (/py/selectors.py:1)"), "other"),
]


@pytest.mark.parametrize(("case", "stack", "phase"), STACKS, ids=[c[0] for c in STACKS])
def test_each_sample_goes_to_its_phase(case: str, stack: str, phase: str) -> None:
    assert phase_of(stack) == phase
