"""The real-control-plane benchmark's baseline mode runs another checkout's extender."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.realcluster_bench import against_baseline, from_checkout


def test_the_baseline_command_imports_the_other_checkout_s_package(tmp_path: Path) -> None:
    package = tmp_path / "extender"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(
        "import sys\ndef main():\n    print('other', sys.argv[1:])\n    return 3\n"
    )
    command = from_checkout(tmp_path, [sys.executable, "-m", "extender.cli", "serve", "--port", "0"])
    # Run from this checkout's root: -m would import this checkout's package.
    done = subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).parents[2], timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout.strip() == "other ['serve', '--port', '0']"


def test_a_round_compares_cpu_per_pod_and_throughput() -> None:
    line = against_baseline(
        {
            "extender": {"extender_ms_per_pod": 5.0, "pods_per_s": 90.0},
            "baseline": {"extender_ms_per_pod": 7.5, "pods_per_s": 60.0},
        }
    )
    assert line == "extender / baseline: CPU per pod 5.0 / 7.5 ms = 0.67x, pods/s 1.50x"
