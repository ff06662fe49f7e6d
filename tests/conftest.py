"""Test-wide configuration."""

from __future__ import annotations

import os

import pytest

# Which documented commands a test ran, and the closing lines that name what did not run (issue 50).
from tests.documented_runs import pytest_configure, pytest_unconfigure  # noqa: F401
from tests.skip_summary import pytest_terminal_summary  # noqa: F401


@pytest.hookimpl(optionalhook=True)  # the conftest loads without xdist too
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker more than there are cores (``--maxprocesses`` caps it). The
    real-control-plane groups (tests/realcluster/conftest.py) spend much of their time waiting
    for leases to lapse and pods to arrive at a set rate; a third worker on two cores fills
    those waits: the whole suite in 489 s instead of 615 s (27 Nov 2026). A number in
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still wins (xdist reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    del config
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1
