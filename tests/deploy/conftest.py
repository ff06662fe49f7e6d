"""The project's wheel, built once per test process (the packaging and krew tests read it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import REPO


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(REPO), "-w", str(out)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("dra_extender-*.whl")
    return built
