"""The closing lines of a test run name what did not run (tests/skip_summary.py, issue 50): a
run with skipped tests ends, just before pytest's count, with a line per folder and reason."""

from __future__ import annotations

import pytest

from tests.shared import REPO

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a process of its own with the plugin, as the suite loads it."""
    return pytester.runpytest_subprocess(
        "-p", "tests.skip_summary", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", "-ra", *args
    )


def test_the_last_lines_before_the_count_name_each_skipped_group(pytester: pytest.Pytester) -> None:
    (pytester.path / "suite/realcluster").mkdir(parents=True)
    (pytester.path / "suite/cel").mkdir(parents=True)
    (pytester.path / "suite/realcluster/test_plane.py").write_text(
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def plane():\n"
        "    pytest.skip('real control plane: no kube-apiserver found')\n\n"
        "def test_a(plane): pass\n\n"
        "def test_b(plane): pass\n\n"
        "def test_c(plane): pass\n"
    )
    (pytester.path / "suite/cel/test_cases.py").write_text(
        "import pytest\n\n"
        "def test_ok(): pass\n\n"
        "@pytest.mark.skip(reason='needs promtool')\n"
        "def test_rules(): pass\n"
    )
    result = run(pytester, "suite")
    result.assert_outcomes(passed=1, skipped=4)
    lines = [line for line in result.outlines if line.strip()]
    assert lines[-3:] == [
        "suite/realcluster: 3 tests skipped: real control plane: no kube-apiserver found",
        "suite/cel: 1 test skipped: needs promtool",
        lines[-1],
    ], result.outlines
    assert "1 passed, 4 skipped" in lines[-1]


def test_a_run_that_skipped_nothing_says_nothing_more(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_one="def test_ok(): pass\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    assert not any("skipped:" in line for line in result.outlines)
