"""Real servers for integration tests: the CLI as a subprocess, or uvicorn in a thread."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import uvicorn
from fastapi import FastAPI

from tests import zygote
from tests.shared import REPO

#: Two replicas on a short Lease, as the frozen-leader and chaos tests run them. The takeover
#: delay is the write window: 2 s for a connection + min(--api-timeout, 10 s).
SHORT_LEASE = [
    "--leader-elect",
    "--leader-elect-namespace",
    "default",
    "--leader-elect-lease-duration",
    "1.5",
    "--leader-elect-renew-deadline",
    "1",
    "--leader-elect-retry-period",
    "0.2",
    "--api-timeout",
    "1",
]


@contextlib.contextmanager
def cli_server(*args: str) -> Iterator[str]:
    """``dra-extender serve ARGS --port 0``; yields the base URL once it listens."""
    command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0", *args]
    with process_server(command) as url:
        yield url


@contextlib.contextmanager
def cli_server_and_ops(*args: str) -> Iterator[tuple[str, str]]:
    """Like :func:`cli_server`, also yielding the ops listener's URL (probes and metrics)."""
    command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0", *args]
    with server_process(command) as (url, proc):
        ops = getattr(proc, "ops_url", None)
        assert ops is not None, "the server named no ops listener"
        yield url, ops


@contextlib.contextmanager
def process_server(command: list[str]) -> Iterator[str]:
    """A server process that logs its "verbs and debug views on URL" line; yields the URL."""
    with server_process(command) as (url, _proc):
        yield url


@contextlib.contextmanager
def server_process(command: list[str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Like :func:`process_server`, also yielding the process (to signal it): forked from the
    zygote (tests/zygote.py) when it is the CLI, else a plain subprocess."""
    # Typed as the Popen it stands for: a ZygoteProcess has the surface the tests use.
    proc = cast(
        "subprocess.Popen[str]",
        zygote.popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True),
    )
    assert proc.stdout is not None
    output = proc.stdout
    lines: list[str] = []
    found = threading.Event()
    url: str | None = None

    def keep_reading() -> None:
        # Read the server's output (its log) for as long as it runs: a full pipe would block it.
        nonlocal url
        for line in iter(output.readline, ""):
            lines.append(line)
            del lines[:-200]
            match = re.search(r"verbs and debug views on (https?://[^/\s]+)", line) if url is None else None
            if match:
                ops = re.search(r"probes and metrics on (https?://[^/\s]+)", line)
                proc.ops_url = ops.group(1) if ops else None  # type: ignore[attr-defined]
                url = match.group(1)
                found.set()
        found.set()  # the server exited: stop waiting

    proc.output_lines = lines  # type: ignore[attr-defined]  # the last 200 lines of its log
    threading.Thread(target=keep_reading, daemon=True).start()
    # A deadline that holds even when the server prints nothing at all (e.g. --log-level warning).
    found.wait(timeout=60)
    try:
        assert url is not None, "server did not start:\n" + "".join(lines)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def thread_server(app: FastAPI) -> Iterator[str]:
    """uvicorn serving ``app`` on 127.0.0.1 (a free port) in a background thread."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "uvicorn did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


EXAMPLES = str(Path(REPO) / "examples")
