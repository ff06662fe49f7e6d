"""The CPU profile's phases (bench/profile.py): library work by the innermost frame, the
engine's own work by the verb it serves."""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from bench.profile import Sampler, phase_of

ROOT = "/src/extender"


def _stack(*frames: str) -> str:
    return ";".join(["<module> (/src/bench/profile.py:1)", *frames])


# (case, stack from the outermost frame in, phase)
STACKS: list[tuple[str, str, str]] = [
    (
        "an allocation in a filter",
        _stack(f"filter_request ({ROOT}/scheduling/engine.py:383)", f"search ({ROOT}/allocator/search.py:9)"),
        "filter",
    ),
    (
        "an allocation in a bind is the bind's",
        _stack(
            f"bind ({ROOT}/scheduling/engine.py:377)",
            f"plan ({ROOT}/scheduling/decide/bind_plan.py:83)",
            f"search ({ROOT}/allocator/search.py:9)",
        ),
        "bind",
    ),
    (
        "the bind's writes are the API client's",
        _stack(
            f"bind ({ROOT}/scheduling/engine.py:377)",
            f"_reserve_once ({ROOT}/scheduling/write/claim_writes.py:169)",
            "request (/venv/aiohttp/client.py:400)",
        ),
        "bind: API client",
    ),
    (
        "prioritize's scores",
        _stack(
            f"prioritize ({ROOT}/scheduling/engine.py:333)",
            f"score_nodes ({ROOT}/scheduling/decide/scores.py:36)",
        ),
        "prioritize",
    ),
    (
        "a log line inside a filter is logging",
        _stack(f"filter ({ROOT}/scheduling/engine.py:151)", "emit (/py/logging/__init__.py:1000)"),
        "logging",
    ),
    (
        "the engine's bookkeeping outside a verb",
        _stack(f"sweep_finalizers ({ROOT}/scheduling/write/binder.py:383)"),
        "decisions: other",
    ),
    (
        "a reflector thread blocked in its watch's TLS read: its CPU is the thread's",
        _stack(
            "_bootstrap (/py/threading.py:995)",
            f"_watch ({ROOT}/cluster/reflector.py:194)",
            f"watch_lines ({ROOT}/cluster/kube.py:248)",
            "read (/py/ssl.py:1158)",
        ),
        "informer threads",
    ),
    (
        "reflector frames on the main thread go by their frames",
        _stack(
            "run (/py/asyncio/runners.py:86)",
            f"on_line ({ROOT}/cluster/reflector.py:260)",
            f"loads ({ROOT}/model/nesting.py:47)",
        ),
        "informers: JSON decoding",
    ),
    (
        "the event loop's TLS on the main thread",
        _stack("run (/py/asyncio/runners.py:86)", "read (/py/ssl.py:912)"),
        "TLS",
    ),
    ("nothing known", _stack("select (/py/selectors.py:1)"), "other"),
]


@pytest.mark.parametrize(("case", "stack", "phase"), STACKS, ids=[c[0] for c in STACKS])
def test_each_sample_goes_to_its_phase(case: str, stack: str, phase: str) -> None:
    assert phase_of(stack) == phase


def _spin_in_thread(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_ticks_go_to_the_thread_that_spent_the_cpu(tmp_path: Path) -> None:
    """The handler runs in the main thread; a tick another thread's CPU caused is that thread's
    (with its stack), not the main thread's, which only waits here (waking every millisecond,
    as the extender's loop does, to run the handler)."""
    sampler = Sampler(tmp_path / "profile.txt")
    previous = signal.signal(signal.SIGPROF, sampler.tick)
    try:
        sampler.start()
        worker = threading.Thread(target=_spin_in_thread, args=(0.3,), name="spinner")
        worker.start()
        while worker.is_alive():
            worker.join(0.001)
        sampler.stop()
    finally:
        signal.signal(signal.SIGPROF, previous)
    text = (tmp_path / "profile.txt").read_text()
    counts = Counter[str]()
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not line.startswith("#"):
            counts["spinner" if "_spin_in_thread" in stack else "other"] += int(count)
    assert counts["spinner"] >= 0.8 * sum(counts.values()) > 0
    threads = next(line for line in text.splitlines() if line.startswith("# threads"))
    assert threads.split(": ", 1)[1].startswith("spinner 0.")
