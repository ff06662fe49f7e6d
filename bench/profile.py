"""Where the extender's CPU goes: a sampling profile (py-spy) of the running process, bucketed
by phase.

py-spy reads the stacks of another process from outside (no code in the extender, no
slowdown beyond the sampling itself); ``--format raw`` writes collapsed stacks, one line per
distinct stack with its sample count. :func:`table` assigns every sample to the first phase
whose pattern matches its stack, innermost frame first, and prints the share of each.

Used by ``python -m bench.realcluster_bench --profile DIR``; on its own:
``python -m bench.profile FILE...`` prints the table of recorded profiles.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

#: (phase, substrings of a frame): the first phase with a frame matching, read from the
#: innermost frame outwards, takes the sample. Frames look like ``function (module/file.py:line)``.
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("imports", ("<frozen importlib._bootstrap", "_find_and_load")),
    ("logging", ("logging/__init__.py", "extender/service/logs.py")),
    ("metrics", ("prometheus_client",)),
    ("informers: JSON decoding", ("orjson", "loads (json", "msgspec")),
    ("informers: model", ("extender/model/",)),
    ("informers", ("extender/cluster/reflector.py", "extender/cluster/state.py")),
    ("bind: API writes", ("extender/cluster/async_kube.py", "aiohttp/")),
    ("bind", ("extender/scheduling/write/", "bind (extender/scheduling/engine.py")),
    ("filter", ("filter_request", "extender/scheduling/decide/", "extender/allocator/")),
    ("prioritize", ("prioritize",)),
    ("request decode/encode", ("extender/service/wire.py",)),
    ("verb plumbing", ("extender/service/",)),
    ("HTTP (uvicorn, httptools)", ("uvicorn/", "httptools", "h11")),
    ("event loop and sockets", ("asyncio/", "uvloop", "selectors.py", "ssl.py")),
    ("kubernetes client (threads)", ("kubernetes/", "urllib3/", "requests/")),
)


def record(pid: int, output: Path, rate: int = 250) -> subprocess.Popen[bytes] | None:
    """Start sampling ``pid`` into ``output`` (stop it with :func:`stop`); None without py-spy."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("py-spy is not installed: no profile", file=sys.stderr)
        return None
    return subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(rate),
            "--format",
            "raw",
            "--nonblocking",
            "--output",
            str(output),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop(spy: subprocess.Popen[bytes] | None) -> None:
    if spy is None:
        return
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(timeout=30)
    except subprocess.TimeoutExpired:
        spy.kill()


def phase_of(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        for phase, patterns in PHASES:
            if any(p in frame for p in patterns):
                return phase
    return "other"


def shares(lines: list[str]) -> Counter[str]:
    samples: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and count.isdigit():
            samples[phase_of(stack)] += int(count)
    return samples


def table(samples: Counter[str], cpu_seconds: float | None = None) -> str:
    total = sum(samples.values()) or 1
    rows = [f"{'phase':<30} {'share':>6}" + ("  CPU s" if cpu_seconds is not None else "")]
    for phase, count in samples.most_common():
        row = f"{phase:<30} {100 * count / total:5.1f}%"
        if cpu_seconds is not None:
            row += f"  {cpu_seconds * count / total:5.2f}"
        rows.append(row)
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for file in args.files:
        print(f"{file}:\n{table(shares(file.read_text().splitlines()))}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
