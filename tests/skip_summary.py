"""What did not run, at the end of a test run (issue 50): after pytest's own summary and just
before its closing count, one line per folder and reason of the skipped tests, so a green run
that tested less says so where people look. tests/conftest.py loads it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


def _skip_group(report: pytest.TestReport) -> str:
    """Where a skipped test lives, as the summary groups it: its folder under tests/
    (``tests/realcluster``), or the file for a test module at the top (``tests/test_docs.py``)."""
    parts = report.nodeid.split("::", 1)[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def skipped_groups(reports: list[pytest.TestReport]) -> list[str]:
    """One line per folder and reason of the skipped tests, most skipped first: a green run that
    tested less says so where people look (issue 50)."""
    counts: dict[tuple[str, str], int] = {}
    for report in reports:
        key = (_skip_group(report), _skip_reason(report))
        counts[key] = counts.get(key, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [
        f"{group}: {n} {'test' if n == 1 else 'tests'} skipped: {reason}" for (group, reason), n in ordered
    ]


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: after pytest's own summary
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Iterator[None]:
    """After pytest's own summary (its short skip list included) and just before its closing
    count, what did not run: a line per group of skipped tests, then the documented commands no
    test ran (tests/documented_runs.py)."""
    result = yield
    from tests.documented_runs import not_run_lines

    reports = [r for r in terminalreporter.stats.get("skipped", []) if isinstance(r, pytest.TestReport)]
    lines = skipped_groups(reports) + not_run_lines(terminalreporter.config)
    if lines:
        terminalreporter.section("what did not run", sep="-")
        for line in lines:
            terminalreporter.line(line)
    return result
