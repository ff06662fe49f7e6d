"""Which documented commands a test actually ran in this run (issue 50).

tests/test_docs.py holds every command the README and docs/ give to a test that runs it. A test
of that name existing proves nothing; so a test that runs a documented command as written calls
:func:`ran` with the command's text, and this plugin gathers those records from every worker.
At the end of the run, on the process that reports:

* a test that is named as the runner of a command, passed, and did not record it is a failure
  (``tests/test_docs.py::every named runner ran its commands``): the name no longer does what
  the table says;
* every documented command that no test ran in this run (its tests skipped or deselected) is
  listed, with the reason its tests were skipped, under "what did not run".

Records go to one file per run whose path the first process puts in the environment, which
pytest-xdist's workers inherit; one line each, appended (a line is written whole).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

RECORDS = "DRA_DOCUMENTED_RUNS"
#: The synthetic report's node id.
CHECK = "tests/test_docs.py::every named runner ran its commands"
#: The test whose run means the whole table was in play: without it (a subset of the suite),
#: the commands not run are not listed.
ANCHOR = "tests/test_docs.py::test_every_command_is_run_here_or_by_a_named_test"


def ran(command: str) -> None:
    """Record that the current test ran the documented ``command`` (its text as the page gives
    it). Outside a run of the suite (no record file), nothing."""
    target = os.environ.get(RECORDS)
    if not target:
        return
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    line = json.dumps({"test": test, "command": command}) + "\n"
    with open(target, "a", encoding="utf-8") as out:
        out.write(line)


def records(target: Path) -> list[tuple[str, str]]:
    """(test node id, command) of every record in ``target``."""
    if not target.exists():
        return []
    out = []
    for line in target.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        out.append((str(record.get("test", "")), str(record.get("command", ""))))
    return out


def _base(nodeid: str) -> str:
    """A node id without its parameters: ``path::name``."""
    return nodeid.split("[", 1)[0]


class DocumentedRuns:
    """The plugin's state on the reporting process."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.passed: set[str] = set()
        self.skipped: dict[str, str] = {}
        #: Filled at the end: (where, command, why not run) of each command no test ran.
        self.not_run: list[tuple[str, str, str]] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.passed.add(report.nodeid)
        elif report.skipped:
            longrepr = report.longrepr
            reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
            self.skipped[_base(report.nodeid)] = reason.removeprefix("Skipped: ")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        result = yield
        from tests.test_docs import runners_by_command

        done = records(self.target)
        recorded = {command for _, command in done}
        recorded_by = {(_base(test), command) for test, command in done}
        passed = {_base(nodeid) for nodeid in self.passed}
        failures = []
        for command, runners in runners_by_command():
            if command.text in recorded:
                continue
            silent = [t for t in runners if t in passed and (t, command.text) not in recorded_by]
            if silent:
                failures.append(
                    f"{command.where}: `{command.text}`: {', '.join(silent)} passed without running it"
                )
                continue
            why = next((self.skipped[t] for t in runners if t in self.skipped), "its tests were not selected")
            self.not_run.append((command.where, command.text, why))
        if failures:
            report = pytest.TestReport(
                CHECK,
                ("tests/test_docs.py", None, CHECK),
                {},
                "failed",
                "tests named as the runners of documented commands did not run them:\n" + "\n".join(failures),
                "call",
            )
            session.config.hook.pytest_runtest_logreport(report=report)
            session.testsfailed += 1
        return result

    def summary_lines(self) -> list[str]:
        """A line per reason: how many documented commands did not run, which, and why."""
        if ANCHOR not in self.passed:
            return []
        from tests.test_docs import NOT_RUN

        by_reason: dict[str, list[str]] = {}
        for where, _text, why in self.not_run:
            by_reason.setdefault(why, []).append(where)
        for text, why in NOT_RUN.items():
            by_reason.setdefault(f"never run here: {why}", []).append(f"`{text}`")
        return [
            f"docs: {len(places)} documented {'command' if len(places) == 1 else 'commands'} not run "
            f"({', '.join(places)}): {why}"
            for why, places in by_reason.items()
        ]


def pytest_configure(config: pytest.Config) -> None:
    """On the first process (not an xdist worker): a record file for this run, in the environment
    the workers inherit."""
    if hasattr(config, "workerinput"):
        return
    handle, name = tempfile.mkstemp(prefix="dra-documented-runs-", suffix=".jsonl")
    os.close(handle)
    os.environ[RECORDS] = name
    config.pluginmanager.register(DocumentedRuns(Path(name)), "documented-runs")


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.pluginmanager.get_plugin("documented-runs")
    if isinstance(plugin, DocumentedRuns):
        plugin.target.unlink(missing_ok=True)
        os.environ.pop(RECORDS, None)


def not_run_lines(config: pytest.Config) -> list[str]:
    """The "what did not run" lines for documented commands (none before the end of the run)."""
    plugin = config.pluginmanager.get_plugin("documented-runs")
    return plugin.summary_lines() if isinstance(plugin, DocumentedRuns) else []
