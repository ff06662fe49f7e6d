"""The README's set-up commands and curl examples do what the README says."""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import httpx

from tests.integration.servers import cli_server
from tests.shared import REPO

README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, re.S)


def setup_commands() -> list[str]:
    section = README.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [body.strip() for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S) if lang == "sh"]


def test_exactly_two_set_up_commands_and_ci_runs_the_second() -> None:
    commands = setup_commands()
    assert len(commands) == 2
    # Both install from the locks (issue 38): the service the runtime part, the suite all of it.
    assert commands[0].startswith("python3 -m pip install -c constraints.txt -e . && dra-extender serve ")
    assert commands[1].startswith('python3 -m pip install -c constraints-test.txt -e ".[test]" && ')
    ci = (REPO / ".ci" / "run").read_text()
    assert commands[1] in ci


def test_curl_examples_give_the_documented_answers() -> None:
    serve_args = shlex.split(setup_commands()[0].split("dra-extender serve", 1)[1])
    examples: list[tuple[str, str]] = []
    for (lang, body), (next_lang, answer) in itertools.pairwise(BLOCKS):
        if lang == "sh" and body.startswith("curl") and next_lang == "json":
            examples.append((body.strip(), answer.strip()))
    assert len(examples) == 3
    with cli_server(*serve_args) as url, httpx.Client(base_url=url) as http:
        for command, answer in examples:
            words = shlex.split(command)
            method = words[words.index("-X") + 1]
            target = next(w for w in words if w.startswith("localhost:8888"))
            data = words[words.index("-d") + 1]
            path = target.removeprefix("localhost:8888")
            response = http.request(method, path, content=data.encode())
            assert response.status_code == 200
            assert response.json() == json.loads(answer), command
        for line in next(b for lang, b in BLOCKS if lang == "sh" and "/debug/" in b).splitlines():
            path = shlex.split(line.split("#")[0])[-1].removeprefix("localhost:8888")
            assert http.get(path).status_code == 200, path


def test_readme_does_not_point_at_missing_files() -> None:
    for path in re.findall(r"`((?:extender|bench|tests|examples)/[\w/.]*)`", README):
        assert (REPO / path.rstrip("/")).exists() or Path(REPO / path).parent.exists(), path


def test_every_flag_is_in_the_configuration_reference() -> None:
    from extender.cli import _parser

    reference = README.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    subparsers = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    choices: dict[str, argparse.ArgumentParser] = dict(subparsers.choices)
    for name, parser in choices.items():
        for action in parser._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert f"`{option}" in reference, (name, option)


def test_simulate_and_explain_samples_are_the_real_output() -> None:
    samples = re.findall(r"```\n(\$ dra-extender (?:simulate|explain) .*?)```", README, re.S)
    assert len(samples) == 3
    for sample in samples:
        command, *shown = sample.rstrip("\n").split("\n")
        words = shlex.split(command[2:].split(";")[0])
        done = subprocess.run(
            [sys.executable, "-m", "extender.cli", *words[1:]], capture_output=True, text=True, cwd=REPO
        )
        expected = done.stdout.rstrip("\n").split("\n")
        if "echo" in command:
            expected.append(f"exit {done.returncode}")
        assert shown == expected
