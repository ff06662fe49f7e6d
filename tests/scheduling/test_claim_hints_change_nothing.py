"""Claim hints never change a decision (issue 53): for every pending pod of every driver state of
the catalogue, filter over every node answers the same nodes, the same reasons and the same error
with the engine's hints as without them, once the hint suffix is taken off."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.scheduling.decide.answers import FilterResult
from extender.scheduling.decide.claim_hints import HINT_SEPARATOR, ClaimHints, without_hint
from extender.scheduling.engine import Engine
from extender.service.runtime import ServeConfig, build_embedded
from tests.shared import REPO

DRIVERS = sorted(p for p in (REPO / "examples" / "drivers").iterdir() if p.is_dir())
#: The states with demo claims that can never match (tests/test_lint.py): some answer is hinted.
HINTED = {"nvidia-gpu", "amd-gpu", "dranet", "sriov"}


class Off(ClaimHints):
    def lines(self, *_: object) -> list[str]:
        return []


def answers(engine: Engine, hints: ClaimHints) -> dict[str, FilterResult]:
    engine.claim_hints = hints
    names = sorted(engine.state.nodes)
    return {
        f"{ns}/{name}": engine.filter(pod, names)
        for (ns, name), pod in sorted(engine.state.pods.items())
        if not pod.node_name
    }


@pytest.mark.parametrize("state", DRIVERS, ids=lambda p: p.name)
def test_filter_answers_the_same_with_and_without_hints(state: Path) -> None:
    service, _ = build_embedded([str(state)], ServeConfig())
    try:
        engine = service.engine
        hinted = answers(engine, ClaimHints(engine.clock))
        plain = answers(engine, Off())
    finally:
        service.worker.stop()
    assert hinted.keys() == plain.keys() and hinted
    said = [text for r in hinted.values() for text in (r.error, *r.failed.values(), *r.unresolvable.values())]
    assert any(HINT_SEPARATOR in text for text in said) == (state.name in HINTED)
    for pod, with_hints in hinted.items():
        without = plain[pod]
        assert with_hints.passed == without.passed, pod
        assert without_hint(with_hints.error) == without.error, pod
        for kind in ("failed", "unresolvable"):
            got, want = getattr(with_hints, kind), getattr(without, kind)
            assert {n: without_hint(r) for n, r in got.items()} == want, pod


class Broken(ClaimHints):
    def lines(self, *_: object) -> list[str]:
        raise RuntimeError("a bug in a hint")


def test_hints_that_fail_leave_filter_answering_as_without_them() -> None:
    service, _ = build_embedded([str(REPO / "examples" / "drivers" / "amd-gpu")], ServeConfig())
    try:
        engine = service.engine
        assert answers(engine, Broken()) == answers(engine, Off())
    finally:
        service.worker.stop()
