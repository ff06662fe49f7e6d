"""How fast the command line answers: ``--version``, ``--help`` and ``simulate`` on the examples,
against the floor of starting Python at all, measured in the same run.

Run: ``python -m bench.cli_bench`` (``--runs``). Each command runs ``--runs`` times as a new
process; the best and the median wall time are printed. Targets (issue 29): ``--version`` and
``--help`` within 0.15 s, ``simulate`` within 0.5 s on a 2-core machine; the floor says how much
of that is the interpreter's own start.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

COMMANDS = {
    "python -c pass (floor)": [sys.executable, "-c", "pass"],
    "--version": [sys.executable, "-m", "extender.cli", "--version"],
    "--help": [sys.executable, "-m", "extender.cli", "--help"],
    "simulate examples": [sys.executable, "-m", "extender.cli", "simulate", str(REPO / "examples")],
}


def wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    for name, command in COMMANDS.items():
        times = [wall(command) for _ in range(args.runs)]
        print(f"{name:24s} best {min(times) * 1e3:6.0f} ms   median {statistics.median(times) * 1e3:6.0f} ms")


if __name__ == "__main__":
    main()
