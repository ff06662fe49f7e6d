"""extender/service/runtime.py: how the built service reports its decisions."""

from __future__ import annotations

import json
import logging

import pytest

from extender.service.runtime import decision_log

CASES = {
    "bind at info": ("bind", logging.INFO, True),
    "filter hidden at info": ("filter", logging.INFO, False),
    "prioritize hidden at info": ("prioritize", logging.INFO, False),
    "filter shown at debug": ("filter", logging.DEBUG, True),
}


@pytest.mark.parametrize(("verb", "level", "shown"), CASES.values(), ids=CASES.keys())
def test_decision_lines_by_verb_and_level(
    verb: str, level: int, shown: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(level, logger="dra_extender.decisions")
    decision_log()({"verb": verb, "pod": "default/p", "durationMs": 1.5})
    lines = [r.getMessage() for r in caplog.records if r.name == "dra_extender.decisions"]
    if shown:
        assert [json.loads(line) for line in lines] == [{"verb": verb, "pod": "default/p", "durationMs": 1.5}]
    else:
        assert lines == []
