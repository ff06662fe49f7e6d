"""The command line answers at once: ``--version``, ``--help`` and ``simulate`` do not import the
server stack or the Kubernetes client (their times are measured in bench/cli_bench.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import extender.allocator
from extender.cel.parser import Parser
from extender.user_cache import cache_file
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


def test_the_cache_directory_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = cache_file("x")
    assert path == str(tmp_path / "dra-extender" / "x")
    assert (tmp_path / "dra-extender").stat().st_mode & 0o777 == 0o700


def test_a_directory_others_can_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "dra-extender"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_file("x") is None


def test_no_directory_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where the directory would go
    assert cache_file("x") is None


def test_a_cached_parser_parses_alike_and_survives_a_broken_cache(tmp_path: Path) -> None:
    path = tmp_path / "cel-parser.lark"
    expression = (
        'device.attributes["d"].model == "a" && device.capacity["d"].mem.isGreaterThan(quantity("1Gi"))'
    )
    fresh = repr(Parser((), None).parse(expression))  # AST calls compare by identity: compare text
    assert repr(Parser((), str(path)).parse(expression)) == fresh  # builds and writes the cache
    assert path.stat().st_size > 0
    assert repr(Parser((), str(path)).parse(expression)) == fresh  # loads it
    path.write_bytes(os.urandom(512))
    assert repr(Parser((), str(path)).parse(expression)) == fresh  # rebuilds over garbage
