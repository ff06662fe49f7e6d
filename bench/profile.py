"""Where the extender's CPU goes: a CPU-time sampling profile of the running process, bucketed
by phase.

Why not py-spy: it samples every thread that is runnable, and on a 2-core machine that the
extender shares with kube-apiserver, etcd and kube-scheduler a runnable thread is often not
running. Its profile of a 100 x 8 run put 22% of the extender in the two socket writes of each
HTTP answer (the peer woken by the send takes the core), where ``perf`` found 74% of the
process's CPU in the interpreter and 13% in the kernel. This profiler counts CPU time only:
``ITIMER_PROF`` ticks with the process's CPU time. Python runs the handler in the main thread,
so recording the main thread's stack would put the CPU of the other threads (the informers'
reflectors, the log writer) on whatever the main thread does next: on each tick, every
thread's stack is recorded, weighted by the CPU its clock (``pthread_getcpuclockid``) advanced
since the last tick, in microseconds. The header gives each thread's CPU seconds.

``python -m bench.profile run OUTPUT MODULE ARGS...`` runs ``python -m MODULE ARGS...`` with
the sampler installed and idle; SIGUSR1 starts sampling, SIGUSR2 stops it and writes OUTPUT:
collapsed stacks, one line per distinct stack with its CPU microseconds (as flame-graph tools
read counts).
``python -m bench.profile table FILE...`` prints the share of each phase: every sample goes
to the first phase whose pattern matches its stack, read from the innermost frame outwards.

Used by ``python -m bench.realcluster_bench --profile DIR``.
"""

from __future__ import annotations

import argparse
import gc
import os
import runpy
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType

#: Seconds of process CPU between samples.
INTERVAL = 0.002

#: The engine's own work, split by the verb it serves (:data:`VERBS`).
DECISIONS = "decisions"

#: (phase, the engine's method): a sample in the engine's code goes to the outermost verb on
#: its stack, so a bind's allocation is the bind's, not the filter's; what no verb called (the
#: cache's bookkeeping, sweeps) is "decisions: other".
VERBS: tuple[tuple[str, str], ...] = (
    ("filter", "filter_request ("),
    ("filter", "filter ("),
    ("prioritize", "prioritize ("),
    ("bind", "bind ("),
    ("preempt", "preempt_request ("),
)

#: (phase, substrings of a frame): the first phase with a frame matching, read from the
#: innermost frame outwards, takes the sample. Frames look like ``function (path/file.py:line)``.
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("imports", ("<frozen importlib._bootstrap", "_find_and_load")),
    ("logging", ("logging/__init__.py", "logging/handlers.py", "extender/service/logs.py")),
    ("metrics", ("prometheus_client/", "extender/service/metrics.py")),
    ("informers: JSON decoding", ("extender/model/nesting.py",)),
    ("informers: model", ("extender/model/",)),
    ("informers: cache", ("extender/cluster/reflector.py", "extender/cluster/state.py")),
    (
        "bind: API client",
        (
            "extender/cluster/async_kube.py",
            "extender/cluster/keepalive.py",
            "aiohttp/",
            "yarl/",
            "multidict/",
        ),
    ),
    (DECISIONS, ("extender/scheduling/", "extender/allocator/", "extender/cel/")),
    ("request decode/encode", ("extender/service/wire.py",)),
    # The verbs' own HTTP protocol (issue 54) is what uvicorn's was: the HTTP server.
    ("HTTP server", ("extender/service/verbs_http.py",)),
    ("verbs (app, admission)", ("extender/service/",)),
    ("HTTP server", ("uvicorn/",)),
    ("event loop", ("asyncio/", "uvloop/")),
    ("TLS", ("ssl.py",)),
    ("informer threads", ("kubernetes/", "urllib3/", "threading.py")),
)


class Sampler:
    def __init__(self, output: Path) -> None:
        self.output = output
        self.samples: Counter[str] = Counter()
        self.started = 0.0
        #: The cyclic garbage collector's passes while sampling: per generation, (count, CPU s).
        self.collections: dict[int, list[float]] = {}
        self._collecting = 0.0
        #: Per thread (ident, native id: an ident is reused by later threads): its CPU clock,
        #: its CPU seconds at the last tick.
        self._clocks: dict[tuple[int, int | None], tuple[int, float]] = {}
        #: CPU seconds per thread name while sampling.
        self.thread_cpu: dict[str, float] = {}

    def _spent(self) -> list[tuple[int, float]]:
        """Per thread, the CPU seconds it spent since the last tick."""
        out: list[tuple[int, float]] = []
        clocks: dict[tuple[int, int | None], tuple[int, float]] = {}  # the threads alive now
        for thread in threading.enumerate():
            ident = thread.ident
            if ident is None:
                continue
            key = (ident, thread.native_id)
            entry = self._clocks.get(key)
            try:
                clock = entry[0] if entry else time.pthread_getcpuclockid(ident)
                now = time.clock_gettime(clock)
            except OSError:  # the thread ended
                continue
            spent = now - entry[1] if entry else 0.0
            clocks[key] = (clock, now)
            self.thread_cpu[thread.name] = self.thread_cpu.get(thread.name, 0.0) + spent
            out.append((ident, spent))
        self._clocks = clocks
        return out

    def collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._collecting = time.process_time()
            return
        entry = self.collections.setdefault(info["generation"], [0, 0.0])
        entry[0] += 1
        entry[1] += time.process_time() - self._collecting

    def tick(self, _signum: int, frame: FrameType | None) -> None:
        main = threading.main_thread().ident
        frames = sys._current_frames()
        try:
            for ident, spent in self._spent():
                micros = round(spent * 1e6)
                if micros > 0:
                    self._record(frame if ident == main else frames.get(ident), micros)
        finally:
            # It holds this very frame, which holds it: a cycle per tick that kept every
            # interrupted frame (and the tasks they run) alive until the collector came.
            frames.clear()

    def _record(self, frame: FrameType | None, micros: int) -> None:
        stack = []
        while frame is not None:
            code = frame.f_code
            stack.append(f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})")
            frame = frame.f_back
        if stack:
            self.samples[";".join(reversed(stack))] += micros

    def start(self, *_: object) -> None:
        self.samples.clear()
        self.collections.clear()
        self.thread_cpu.clear()
        self._clocks.clear()
        self._spent()  # every thread's clock as sampling starts
        self.thread_cpu.clear()
        self.started = time.process_time()
        gc.callbacks.append(self.collected)
        signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)

    def stop(self, *_: object) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        if self.collected in gc.callbacks:
            gc.callbacks.remove(self.collected)
        cpu = time.process_time() - self.started
        collections = ", ".join(
            f"generation {g}: {int(n)} in {s:.3f} s" for g, (n, s) in sorted(self.collections.items())
        )
        busiest = sorted(self.thread_cpu.items(), key=lambda item: -item[1])
        threads = ", ".join(f"{name} {seconds:.2f}" for name, seconds in busiest)
        lines = [f"{stack} {count}" for stack, count in self.samples.most_common()]
        self.output.write_text(
            f"# process CPU seconds {cpu:.3f}\n# garbage collections: {collections or 'none'}\n"
            f"# threads' CPU seconds (to the last tick): {threads or 'none'}\n" + "\n".join(lines) + "\n"
        )

    def install(self) -> None:
        signal.signal(signal.SIGPROF, self.tick)
        signal.signal(signal.SIGUSR1, self.start)
        signal.signal(signal.SIGUSR2, self.stop)


def start(pid: int) -> None:
    os.kill(pid, signal.SIGUSR1)


def stop(pid: int, output: Path, wait: float = 10.0) -> bool:
    """Stop sampling ``pid`` and wait for its profile; False if none came."""
    output.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if output.exists() and output.read_text().endswith("\n"):
            return True
        time.sleep(0.05)
    return False


def command(output: Path, module: str, *args: str) -> list[str]:
    """The command that runs ``python -m module args`` under the sampler."""
    return [sys.executable, "-m", "bench.profile", "run", str(output), module, *args]


def header(file: Path) -> str:
    """The profile's comment lines (process CPU, garbage collections)."""
    return "".join(line[2:] + "\n" for line in file.read_text().splitlines() if line.startswith("# "))


#: A reflector thread's samples (its stack starts in ``threading.py`` and runs through the
#: reflector): its CPU since the last tick, recorded where it is at the tick, which is nearly
#: always the blocking read of its watch (``ssl.py``). Most of that CPU went to the event before
#: (reading it, decoding it, handing it over) and to waking up for it: all of it is the
#: thread's, not TLS's (``perf`` put libssl and libcrypto at 2.2% of the extender's CPU at
#: 500 x 8 on 2 December 2026, where "TLS" read 10.5%). Reflector frames on the main thread
#: (none today) would go by their frames like the rest.
INFORMER_THREADS = ("informer threads", ("threading.py", "extender/cluster/reflector.py"))


def phase_of(stack: str) -> str:
    frames = stack.split(";")
    if all(part in stack for part in INFORMER_THREADS[1]):
        return INFORMER_THREADS[0]
    for frame in reversed(frames):
        for phase, patterns in PHASES:
            if any(p in frame for p in patterns):
                return _verb_of(frames) if phase == DECISIONS else phase
    return "other"


def _verb_of(frames: list[str]) -> str:
    for frame in frames:  # outermost first
        if "extender/scheduling/engine.py" in frame:
            for verb, method in VERBS:
                if frame.startswith(method):
                    return verb
    return f"{DECISIONS}: other"


def shares(lines: list[str]) -> Counter[str]:
    samples: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        if stack and not stack.startswith("#") and count.isdigit():
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
    verbs = parser.add_subparsers(dest="verb", required=True)
    run = verbs.add_parser("run", help="run a module under the sampler")
    run.add_argument("output", type=Path)
    run.add_argument("module")
    run.add_argument("args", nargs=argparse.REMAINDER)
    shown = verbs.add_parser("table", help="print the phases of recorded profiles")
    shown.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    if args.verb == "run":
        Sampler(args.output).install()
        sys.argv = [args.module, *args.args]
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
        return 0
    for file in args.files:
        print(f"{file}:\n{header(file)}{table(shares(file.read_text().splitlines()))}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
