"""The README and docs/ hold together (issue 41): the README stays short and lists every page,
every relative link reaches a file and a heading, every path and module they name exists, every
flag is in the configuration reference, and the commands that are quick and need no cluster do
what the pages show (their exit status and output)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_pages import Command, all_commands, anchors, doc_section, page_text, pages
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


#: dra-extender subcommands that read only files and finish in seconds (explain only with --state).
OFFLINE = {"simulate", "explain", "examples", "--help", "--version"}


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
