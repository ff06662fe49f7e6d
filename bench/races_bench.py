"""Issue 30's races with the real kube-scheduler, measured with the in-tree DynamicResources
plugin and with dra-extender on the same real control plane.

The scenarios are tests/realcluster/races.py's: 10 nodes x 4 GPUs and 4 CPUs, kube-controller-
manager's resourceclaim controller and garbage collector, a thread playing the kubelet, pods
with a 30 s grace period.

- ``template-churn``: 4 waves of 40 pods with one template claim (1 GPU) each: created, bound,
  deleted, gone. ``deletions-mid-scheduling``: each wave deleted 0.3 s after it was created.
- ``preemption-gpu[-cpu][-late-claims]``: 40 low-priority pods hold every GPU (``-cpu``: and
  every CPU), then 4 high-priority pods need one GPU (and one CPU) each, with claims of their
  own made before them, or (``-late-claims``) from a template, after them.

Per scenario and mode, over the runs: seconds per wave (churn) or from a high pod's claims
existing to its bind (preemption; pods not bound within 30 s are "stuck"), failed binds by
reason (the extender's log of its binds; kube-scheduler's log in-tree), victims per run,
attempts per high pod (kube-scheduler's log; the extender's filter calls), stuck pods and the
store's invariants (and the extender's writes the API server refused).

Needs the real binaries, kube-controller-manager included (tests/realcluster/binaries.py).
Run: ``python -m bench.races_bench --runs 2 --modes in-tree extender`` (``--scenarios``,
``--json FILE``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.realcluster import binaries as found
from tests.realcluster.conftest import empty
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.races import (
    EXTENDER,
    IN_TREE,
    MODES,
    SCENARIOS,
    ChurnResult,
    PreemptionResult,
)

Result = ChurnResult | PreemptionResult


def spread(values: list[float]) -> str:
    """``median (min-max)`` of the values, or ``-``."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def per_run(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)


def reasons(results: list[Result]) -> str:
    total: Counter[str] = Counter()
    for r in results:
        total.update(r.failed_binds_by_reason)
    listed = ", ".join(f"{k} {v}" for k, v in sorted(total.items()))
    return f"{sum(total.values())}" + (f" ({listed})" if listed else "")


def integrity(results: list[Result]) -> str:
    violations = sum(len(r.violations) for r in results)
    refused = sum(len(r.refused_writes) for r in results)
    return f"{violations} / {refused}"


def churn_table(results: dict[str, list[ChurnResult]]) -> str:
    lines = [
        "| mode | runs | s per wave | s to all bound (or: bound when deleted) | failed binds (by reason) "
        "| failed-bind events "
        "| stuck pods / leftover claims | invariant violations / refused writes "
        "| attempts unschedulable / scheduled / error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, rs in results.items():
        waves = [w for r in rs for w in r.wave_seconds]
        binds = [b for r in rs for b in r.bind_seconds if b is not None]
        # Waves deleted mid-scheduling: how many of each wave's pods were bound by then.
        bound = (
            spread(binds)
            if binds
            else f"({'; '.join(per_run(r.bound_when_deleted) for r in rs)} of {rs[0].pods_per_wave})"
        )
        attempts = [
            "/".join(f"{r.schedule_attempts.get(k, 0):.0f}" for k in ("unschedulable", "scheduled", "error"))
            for r in rs
        ]
        lines.append(
            f"| {mode} | {len(rs)} | {spread(waves)} | {bound or '-'} | {reasons(list(rs))} "
            f"| {sum(r.failed_bind_events for r in rs)} "
            f"| {sum(r.stuck_pods for r in rs)} / {sum(r.leftover_claims for r in rs)} "
            f"| {integrity(list(rs))} | {'; '.join(attempts)} |"
        )
    return "\n".join(lines)


def preemption_table(results: dict[str, list[PreemptionResult]]) -> str:
    lines = [
        "| mode | runs | bound | s to bind after claims exist, median (max) | victims per run "
        "| attempts per high pod: scheduler median (max) / extender filters max | failed binds "
        "| stuck high pods | invariant violations / refused writes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, rs in results.items():
        times = [s for r in rs for s in r.seconds_to_bind.values() if s is not None]
        pods = sum(len(r.seconds_to_bind) for r in rs)
        latency = f"{statistics.median(times):.2f} ({max(times):.2f})" if times else "-"
        sched = [a for r in rs for a in r.scheduler_attempts.values()]
        filters = max((a for r in rs for a in r.filter_attempts.values()), default=0)
        attempts = f"{statistics.median(sched):.0f} ({max(sched)})" if sched else "-"
        lines.append(
            f"| {mode} | {len(rs)} | {len(times)}/{pods} | {latency} | {per_run([r.victims for r in rs])} "
            f"| {attempts} / {filters if mode != IN_TREE else '-'} | {reasons(list(rs))} "
            f"| {sum(r.stuck for r in rs)} | {integrity(list(rs))} |"
        )
    return "\n".join(lines)


def notes(results: dict[str, list[Result]]) -> list[str]:
    """What a reader needs besides the numbers: the kinds of FailedScheduling messages, failed
    binds' texts, invariant violations and refused writes (a few of each)."""
    out = []
    for mode, rs in results.items():
        seen: list[str] = []
        for r in rs:
            texts = list(r.violations[:3]) + [f"refused: {w}" for w in r.refused_writes[:3]]
            texts += [f"extender warning: {w}" for w in r.warnings]
            if isinstance(r, ChurnResult):
                texts += [f"failed bind: {s}" for s in r.failed_bind_samples]
            else:
                texts += [f"event: {e}" for e in r.events]
            seen += [t for t in texts if t not in seen]
        out += [f"- {mode}: {t[:240]}" for t in seen[:6]]
    return out


def table(results: dict[str, list[Result]]) -> str:
    """The scenario's table and notes (every result of one scenario, by mode)."""
    first = next(r for rs in results.values() for r in rs)
    if isinstance(first, ChurnResult):
        body = churn_table({m: [r for r in rs if isinstance(r, ChurnResult)] for m, rs in results.items()})
    else:
        body = preemption_table(
            {m: [r for r in rs if isinstance(r, PreemptionResult)] for m, rs in results.items()}
        )
    extra = notes(results)
    return f"### {first.scenario}\n\n{body}" + ("\n\n" + "\n".join(extra) if extra else "")


def loaded(entry: dict[str, Any]) -> Result:
    """A result as --json wrote it."""
    kind: type[ChurnResult] | type[PreemptionResult] = ChurnResult if "waves" in entry else PreemptionResult
    names = {f.name for f in dataclasses.fields(kind)}
    return kind(**{k: v for k, v in entry.items() if k in names})


def tables_from(path: str) -> str:
    """The tables of a previous run's --json file."""
    by_scenario: dict[str, dict[str, list[Result]]] = {}
    for entry in json.loads(Path(path).read_text()):
        by_scenario.setdefault(entry["scenario"], {}).setdefault(entry["mode"], []).append(loaded(entry))
    return "\n\n".join(table(results) for results in by_scenario.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1, help="runs per scenario and mode")
    parser.add_argument(
        "--modes",
        nargs="+",
        default=[IN_TREE, EXTENDER],
        help=f"{', '.join(MODES)}, or 'extender FLAGS...' (one argument, quoted)",
    )
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--json", help="write every run's measurements here (after each scenario)")
    parser.add_argument(
        "--tables-from", metavar="JSON", help="print the tables of a previous --json; run nothing"
    )
    args = parser.parse_args(argv)
    if args.tables_from:
        print(tables_from(args.tables_from))
        return 0
    located = found.for_bench()
    if located.kube_controller_manager is None:
        print("races need kube-controller-manager (template claims, released reservations)", file=sys.stderr)
        return 2
    # A TERM (a background job ignores INT) stops the processes started here on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    everything: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        plane = ControlPlane(located, Path(folder))
        try:
            plane.start()
            for scenario in args.scenarios:
                results: dict[str, list[Result]] = {mode: [] for mode in args.modes}
                for run in range(args.runs):
                    # Alternate which mode goes first: the machine is shared.
                    modes = args.modes if run % 2 == 0 else list(reversed(args.modes))
                    for mode in modes:
                        empty(plane.api)
                        started = time.monotonic()
                        r = SCENARIOS[scenario](plane, mode)
                        took = time.monotonic() - started
                        print(f"{scenario} {mode} run {run + 1}: {took:.0f} s", file=sys.stderr, flush=True)
                        results[mode].append(r)
                        everything.append(
                            {
                                "name": scenario,
                                "run": run,
                                "seconds": round(took, 1),
                                **dataclasses.asdict(r),
                            }
                        )
                print("\n" + table(results), flush=True)
                if args.json:
                    Path(args.json).write_text(json.dumps(everything, indent=2))
            empty(plane.api)
        finally:
            plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
