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


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_each_log_line_is_formatted_once_and_written_by_exit(
    log_format: str, capfd: pytest.CaptureFixture[str]
) -> None:
    from extender.service.runtime import configure_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        writer = configure_logging("info", log_format)
        logging.getLogger("dra_extender.test").info("hello %s", "there")
        writer.stop()  # what run_serve does at exit: every queued line is written
    finally:
        root.handlers[:], root.level = handlers, level
    lines = [line for line in capfd.readouterr().err.splitlines() if "hello" in line]
    assert len(lines) == 1
    if log_format == "json":
        entry = json.loads(lines[0])
        assert (entry["message"], entry["logger"], entry["level"]) == (
            "hello there",
            "dra_extender.test",
            "INFO",
        )
    else:
        assert lines[0].endswith("INFO dra_extender.test: hello there") and lines[0].count("INFO") == 1
