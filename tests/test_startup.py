"""The command line answers at once: ``--version``, ``--help`` and ``simulate`` do not import the
server stack or the Kubernetes client (their times are measured in bench/cli_bench.py)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import extender.allocator
from tests.shared import REPO

#: What only ``serve`` (and ``explain --server``) needs.
SERVER_STACK = ("fastapi", "uvicorn", "kubernetes", "aiohttp", "starlette", "prometheus_client")


def imported(*argv: str) -> set[str]:
    """Top-level modules ``python -X importtime -m extender.cli ARGV`` imports."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "extender.cli", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    names = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", done.stderr, re.M)
    assert names, done.stderr[-2000:]
    return {n.split(".")[0] for n in names}


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["simulate", "--help"],
        ["serve", "--help"],
        ["simulate", str(REPO / "examples")],
    ],
    ids=["version", "help", "simulate-help", "serve-help", "simulate"],
)
def test_the_command_line_does_not_load_the_server_stack(argv: list[str]) -> None:
    loaded = imported(*argv)
    assert not loaded & set(SERVER_STACK), sorted(loaded & set(SERVER_STACK))


def test_version_and_help_do_not_load_the_allocator_or_cel() -> None:
    loaded = imported("--help")
    assert {"lark", "celpy", "yaml"}.isdisjoint(loaded), loaded


def test_the_allocator_package_names_resolve_lazily() -> None:
    for name in extender.allocator.__all__:
        assert getattr(extender.allocator, name).__name__ == name
    with pytest.raises(AttributeError):
        _ = extender.allocator.Nope


def test_the_embedded_server_does_not_load_the_kubernetes_client() -> None:
    """``serve --state`` builds its service without the Kubernetes client and aiohttp (half a
    second of every embedded start): only cluster mode imports them."""
    code = (
        "import sys, extender.serve_command, extender.service.runtime, extender.service.app; "
        "print(sorted(m for m in ('kubernetes', 'aiohttp') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "[]", (done.stdout, done.stderr[-2000:])
