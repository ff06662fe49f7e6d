"""The README and docs/ hold together (issue 41): the README stays short and lists every page,
every relative link reaches a file and a heading, every path and module they name exists, every
flag is in the configuration reference, and every command they give is run: here when it is
quick and needs no cluster (its exit status and the output shown), else by a test named below."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_pages import Command, all_commands, anchors, defined_tests, doc_section, page_text, pages
from tests.documented_runs import ran
from tests.realcluster.test_documented_commands import DOCUMENTED_WRITES
from tests.shared import REPO

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_short_and_lists_every_page_of_docs() -> None:
    assert len(page_text("README.md").splitlines()) < 250
    listed = LINK.findall(doc_section("README.md", "Documentation"))
    assert {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")} <= set(listed)


@pytest.mark.parametrize("page", pages())
def test_every_relative_link_reaches_a_file_and_a_heading(page: str) -> None:
    for target in LINK.findall(page_text(page)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (REPO / page).parent / path if path else REPO / page
        assert file.exists(), (page, target)
        if anchor:
            assert file.suffix == ".md", (page, target)
            assert anchor in anchors(file.read_text()), (page, target)


@pytest.mark.parametrize("page", pages())
def test_every_path_and_module_named_exists(page: str) -> None:
    text = page_text(page)
    for path in re.findall(
        r"`((?:extender|bench|tests|examples|manifests|scheduler-config|docs)/[\w/.*-]*)`", text
    ):
        assert list(REPO.glob(path.rstrip("/"))), (page, path)
    for module in re.findall(r"`python3? -m ((?:bench|extender)\.[\w.]+)", text):
        file = REPO / module.replace(".", "/")
        assert file.with_suffix(".py").exists() or (file / "__main__.py").exists(), (page, module)


def test_every_flag_is_in_the_configuration_reference() -> None:
    from extender.cli import _parser

    reference = doc_section("docs/configuration.md", "Configuration reference")
    subparsers = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    choices: dict[str, argparse.ArgumentParser] = dict(subparsers.choices)
    for name, parser in choices.items():
        for action in parser._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert f"`{option}" in reference, (name, option)


def options(parser: argparse.ArgumentParser) -> set[str]:
    """Every ``--option`` of a parser and of its subcommands."""
    found = {o for a in parser._actions for o in a.option_strings if o.startswith("--") and o != "--help"}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= options(sub)
    return found


def test_every_kubectl_dra_option_is_on_its_page() -> None:
    from extender.commands.kubectl_dra import _parser

    page = page_text("docs/kubectl-and-browser.md")
    missing = sorted(o for o in options(_parser()) if f"`{o}" not in page)
    assert missing == [], missing


#: dra-extender subcommands that read only files and finish in seconds (explain only with --state).
OFFLINE = {"simulate", "explain", "lint", "examples", "--help", "--version"}


def runs_here(command: Command) -> bool:
    words = command.text.split()
    if words[:2] == ["kubectl", "dra"]:
        return "--help" in words
    if words[:1] != ["dra-extender"] or len(words) < 2 or words[1] not in OFFLINE:
        return False
    return words[1] != "explain" or "--state" in words


@pytest.mark.parametrize("command", [c for c in all_commands() if runs_here(c)], ids=lambda c: c.where)
def test_the_commands_that_run_here_do_what_the_page_shows(command: Command, tmp_path: Path) -> None:
    """Through bash as written (``; echo "exit $?"`` included), with the package's entry points
    on the PATH, in a folder where ``examples/`` is the repository's."""
    scripts = Path(sys.executable).parent  # where pip installed the entry points
    assert (scripts / "dra-extender").exists(), f"{scripts}: the dra-extender entry point is not installed"
    env = {**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"}
    (tmp_path / "examples").symlink_to(REPO / "examples")
    done = subprocess.run(["bash", "-c", command.text], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if command.output:
        assert done.stdout.rstrip("\n").split("\n") == list(command.output)
    ran(command.text)


RUNS_HERE = "tests/test_docs.py::test_the_commands_that_run_here_do_what_the_page_shows"


TOUR = "tests/test_readme.py::test_curl_examples_give_the_documented_answers"
KUBECTL_DRA = "tests/commands/test_kubectl_dra_fake_api.py::test_each_documented_command_runs_as_written"

#: The commands that need a cluster, the network or minutes: (a pattern the command matches in
#: full, the tests, "path::name", that run it). Each of those tests records each command it runs
#: as written (tests/documented_runs.py ``ran``): a command counts as run only when one did in
#: this run, and a named test that passed without recording it fails the run.
RUN_ELSEWHERE: tuple[tuple[str, tuple[str, ...]], ...] = (
    # The tour serves as this command serves (its arguments, the package installed by the suite's
    # own install); the lock it installs is checked by tests/deploy/test_locks.py.
    (
        r"python3 -m pip install -c constraints\.txt -e \. && dra-extender serve --state examples/",
        (TOUR,),
    ),
    (r"curl -s -X POST localhost:8888/scheduler/(filter|prioritize|bind) -d '.*'", (TOUR,)),
    (r"curl -s '?localhost:8888/(debug/[^ ']*|metrics)'?", (TOUR,)),
    (
        r"kubectl apply -k manifests/(standalone/|monitoring/)?",
        (
            "tests/realcluster/test_manifests_applied.py::"
            "test_the_api_server_accepts_every_object_of_each_kustomization",
        ),
    ),
    (
        DOCUMENTED_WRITES,
        ("tests/realcluster/test_documented_commands.py::test_documented_kubectl_writes_are_accepted",),
    ),
    # Each `kubectl dra` command as written, against the fake API server and an extender in
    # cluster mode (a fresh clone runs it); tests/realcluster/test_kubectl_dra.py asks the same
    # questions of the real kube-apiserver.
    (r"kubectl dra (explain|simulate|pending|capacity|snapshot|make-room|lint)( .*)?", (KUBECTL_DRA,)),
    # A kustomization of one's own with the debug-views component, as the page shows it.
    (
        r"kubectl apply -k \.",
        (
            "tests/realcluster/test_manifests_applied.py::"
            "test_the_api_server_accepts_each_deployment_with_the_debug_views_component",
        ),
    ),
)

#: The rows whose commands only the real control plane's binaries can run (kubectl against a
#: real kube-apiserver, which a fresh clone does not have), with the reason.
REAL_BINARIES_ONLY: dict[str, str] = {
    DOCUMENTED_WRITES: "kubectl's writes need the real kube-apiserver's validation, RBAC and admission",
    r"kubectl apply -k manifests/(standalone/|monitoring/)?": (
        "kubectl apply -k needs the real kube-apiserver's discovery, validation, RBAC and admission"
    ),
    r"kubectl apply -k \.": "as kubectl apply -k manifests/",
}

#: The commands no test can run, with the reason.
NOT_RUN = {
    'python3 -m pip install -c constraints-test.txt -e ".[test]" && python3 -m pytest': (
        "the suite's own command: .ci/run runs it as written (tests/test_readme.py checks that), "
        "and this run is it"
    ),
    "kubectl -n dra-extender port-forward deploy/dra-extender-scheduler 8888 &": (
        "needs the pod running on a kubelet: the real control plane of tests/realcluster/ has none "
        "(Nodes are objects); the curl after it is the tour's"
    ),
}


def run_elsewhere(command: Command) -> bool:
    return any(re.fullmatch(pattern, command.text) for pattern, _ in RUN_ELSEWHERE)


def runners_by_command() -> list[tuple[Command, tuple[str, ...]]]:
    """Each documented command that a test runs, with the tests ("path::name") that run it."""
    out = []
    for command in all_commands():
        if command.text in NOT_RUN:
            continue
        runners: list[str] = [RUNS_HERE] if runs_here(command) else []
        for pattern, tests in RUN_ELSEWHERE:
            if re.fullmatch(pattern, command.text):
                runners += tests
        out.append((command, tuple(runners)))
    return out


def test_what_only_the_real_binaries_run_is_listed_and_short() -> None:
    """A row whose every runner is a real-control-plane test is skipped on a fresh clone: it is
    listed with its reason, and the list stays short."""
    only_real = {
        pattern for pattern, tests in RUN_ELSEWHERE if all(t.startswith("tests/realcluster/") for t in tests)
    }
    assert only_real == set(REAL_BINARIES_ONLY)
    assert len(REAL_BINARIES_ONLY) <= 3


def test_every_command_is_run_here_or_by_a_named_test() -> None:
    commands = all_commands()
    uncovered = [
        f"{c.where}: {c.text}"
        for c in commands
        if not runs_here(c) and not run_elsewhere(c) and c.text not in NOT_RUN
    ]
    assert not uncovered, (
        "no test runs these; run them here or name their test in RUN_ELSEWHERE:\n" + "\n".join(uncovered)
    )
    assert sum(map(runs_here, commands)) >= 3  # the samples of docs/simulate-and-explain.md


def test_the_named_tests_exist_and_every_row_is_used() -> None:
    written = {c.text for c in all_commands()}
    for pattern, tests in RUN_ELSEWHERE:
        assert any(re.fullmatch(pattern, text) for text in written), f"no command matches {pattern}"
        for test in tests:
            path, name = test.split("::")
            assert (REPO / path).exists() and name in defined_tests(REPO / path), test
    assert set(NOT_RUN) <= written, set(NOT_RUN) - written
