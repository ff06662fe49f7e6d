"""The README's set-up commands and curl examples do what the README says."""

from __future__ import annotations

import itertools
import json
import shlex

import httpx

from tests.docs_pages import blocks, doc_section, page_text, without_comment
from tests.documented_runs import ran
from tests.integration.servers import cli_server
from tests.shared import REPO

BLOCKS = [(block.lang, block.body) for block in blocks(page_text("README.md"))]


def setup_commands() -> list[str]:
    return [block.body.strip() for block in blocks(doc_section("README.md", "Set-up")) if block.lang == "sh"]


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
            ran(command)  # the request as written, to the service as the set-up command runs it
        for line in next(b for lang, b in BLOCKS if lang == "sh" and "/debug/" in b).splitlines():
            path = shlex.split(line.split("#")[0])[-1].removeprefix("localhost:8888")
            assert http.get(path).status_code == 200, path
            ran(without_comment(line))
    ran(setup_commands()[0])
