"""The make-room mover on the real control plane, at full size (issue 52), mover off and on.

The cluster is tests/realcluster/fragmented.py's: ``--nodes`` nodes (default 16) x 8 GPUs (two
PCIe roots of four), 3 to 5 one-GPU pods on each (``random_layout``: ReplicaSets' pods placed by
the real kube-scheduler through the extender; two pods on one node in four under a
PodDisruptionBudget allowing none, a high-priority pod on one in four, a bare pod on one in
eight), then ``big`` (8 GPUs) and ``pcie`` (4 under one root), which fit nowhere until pods move.
``--shared-budget N``: the movable pods of the two nodes ``big`` may have are under one budget
of maxUnavailable N as well (N=1: its plan's evictions one by one, each waiting for the last
one's replacement to be counted healthy).

Each run starts kube-scheduler and the extender afresh (both with ``--make-room-min-age 8
--make-room-hint-interval 1``, the pods built older than that when the targets come; ``on`` adds
``--make-room --make-room-after 1 --make-room-rate 60 --make-room-cooldown 5``), builds the
cluster, then creates the targets and reports per target the
seconds from its first FailedScheduling event (as this process first lists it, every 0.1 s) to
its bind, then the pods moved (evictions answered 201, from the audit log), the evictions
refused by budgets (429) and otherwise, the mover's plans by outcome (its metrics), whether a
pod that may never move did, and whether any device was ever allocated to two claims (every
change of a claim the watch showed). With the mover off the targets are watched for ``--off-wait``
seconds (default 20), then given up on.

Needs the real binaries (tests/realcluster/binaries.py says where they are looked for).
Run: ``python -m bench.make_room_mover_bench`` (``--nodes 16``, ``--modes off on``,
``--shared-budget N``, ``--seed``, ``--json FILE``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.realcluster import binaries as found
from tests.realcluster.components import Extender, extender, scheduler, scheduler_config
from tests.realcluster.conftest import empty
from tests.realcluster.controlplane import DRA_CONTROLLERS, WORKLOAD_CONTROLLERS, ControlPlane
from tests.realcluster.fragmented import (
    NAMESPACE,
    TARGETS,
    Fragmented,
    NodeShare,
    random_layout,
    remove_workloads,
)
from tests.realcluster.kubelet import playing_kubelet
from tests.realcluster.mover_checks import ClaimWatch, eviction_rights, evictions, pod_deletes
from tests.realcluster.workload import store_violations

MODES = ("off", "on")
#: Pods started less than this long ago never move: the built pods are older when the targets
#: come (the run waits), those recreated during the run younger (tests/realcluster/
#: test_make_room_mover.py does the same).
MIN_AGE = 8
RULES = ("--make-room-min-age", str(MIN_AGE), "--make-room-hint-interval", "1")
#: The mover acting after 1 s of waiting, up to an eviction a second; a plan abandoned keeps
#: its pod from being planned again for 5 s, not 600 (docs/performance.md says why).
MOVER = ("--make-room", "--make-room-after", "1", "--make-room-rate", "60", "--make-room-cooldown", "5")
NEVER_MOVED = ("guarded", "high", "bare")


class Timeline:
    """When (time.monotonic) each target was first listed with a FailedScheduling event, and bound."""

    def __init__(self, plane: ControlPlane, period: float = 0.1) -> None:
        self.api = plane.api
        self.period = period
        self.failed: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timeline", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            with contextlib.suppress(Exception):  # the next round
                now = time.monotonic()
                for event in self.api.list("Event", NAMESPACE):
                    name = event["involvedObject"]["name"]
                    if event.get("reason") == "FailedScheduling" and name in TARGETS:
                        self.failed.setdefault(name, now)
                for name in TARGETS:
                    pod = self.api.get("Pod", name, NAMESPACE)
                    if pod is not None and pod["spec"].get("nodeName"):
                        self.bound.setdefault(name, now)

    def seconds(self, name: str) -> float | None:
        if name in self.failed and name in self.bound:
            return max(0.0, self.bound[name] - self.failed[name])
        return None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def samples(ext: Extender, name: str, label: str) -> dict[str, float]:
    """The extender's ``name`` by the value of ``label`` (empty when it has none)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(ext.metrics()):
        for sample in family.samples:
            if sample.name == name and label in sample.labels:
                out[sample.labels[label]] = out.get(sample.labels[label], 0.0) + sample.value
    return out


def run(
    plane: ControlPlane,
    layout: tuple[NodeShare, ...],
    mode: str,
    *,
    shared_budget: int | None,
    off_wait: float,
    timeout: float,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    api = plane.api
    remove_workloads(api)
    empty(api)
    audit_from = len(plane.audit_events())
    cluster = Fragmented(plane, layout, shared_budget=shared_budget)
    args = (*RULES, *(MOVER if mode == "on" else ()), *extra)
    result: dict[str, Any] = {"mode": mode, "nodes": len(layout), "pods": cluster.expected_pods()}
    rights = eviction_rights(plane) if mode == "on" else contextlib.nullcontext()
    with (
        rights,
        playing_kubelet(api),
        extender(plane, *args, name=f"dra-extender-{mode}") as ext,
        scheduler(plane, scheduler_config(plane.extender_kubeconfig(), extender_url=ext.url)),
    ):
        started = time.monotonic()
        cluster.build(timeout=300)
        result["build_s"] = round(time.monotonic() - started, 1)
        before = cluster.pods_by_role()
        cluster.wait_older_than(MIN_AGE)
        audit_targets = len(plane.audit_events())
        watch = ClaimWatch(plane)
        timeline = Timeline(plane)
        try:
            cluster.add_targets()
            began = time.monotonic()
            limit = off_wait if mode == "off" else timeout
            while time.monotonic() - began < limit and len(timeline.bound) < len(TARGETS):
                time.sleep(0.2)
            if mode == "on":
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not cluster.all_running(but=TARGETS):
                    time.sleep(0.2)
                result["replacements_running"] = cluster.all_running(but=TARGETS)
                settled = time.monotonic() + 10  # the mover counts a plan once it sees the bind
                while time.monotonic() < settled:
                    plans = samples(ext, "dra_extender_make_room_plans_total", "outcome")
                    if plans.get("started", 0) <= plans.get("carried_out", 0) + plans.get("abandoned", 0):
                        break
                    time.sleep(0.2)
            result["unbound_plans"] = {
                t: ext.get(f"/debug/make-room?pod={NAMESPACE}/{t}").get("summary")
                for t in TARGETS
                if t not in timeline.bound
            }
        finally:
            timeline.close()
            watch.close()
        after = cluster.pods_by_role()
        result["plans"] = samples(ext, "dra_extender_make_room_plans_total", "outcome")
        result["abandoned"] = samples(ext, "dra_extender_make_room_abandoned_total", "reason")
        result["mover_evictions"] = samples(ext, "dra_extender_make_room_evictions_total", "outcome")
    for name in TARGETS:
        result[f"{name}_s"] = timeline.seconds(name)
    asked = evictions(plane, audit_targets)
    result["moved"] = sum(1 for e in asked if e.code == 201)
    result["refused_by_budget"] = sum(1 for e in asked if e.by_budget)
    result["refused_otherwise"] = sum(1 for e in asked if e.code != 201 and not e.by_budget)
    result["evicted_during_build"] = len(evictions(plane, audit_from)) - len(asked)
    result["plain_pod_deletes"] = len(pod_deletes(plane, audit_from))
    result["never_moved_kept"] = all(set(before.get(r, {})) <= set(after.get(r, {})) for r in NEVER_MOVED)
    result["device_twice"] = len(watch.violations)
    result["claim_changes"] = watch.changes
    result["store_violations"] = len(store_violations(api))
    return result


def seconds(value: float | None) -> str:
    return "not bound" if value is None else f"{value:.1f}"


def table(results: list[dict[str, Any]]) -> str:
    head = (
        f"{'mode':<5} {'nodes':>5} {'pods':>4} {'build s':>7} {'big s':>9} {'pcie s':>9} {'moved':>5} "
        f"{'budget 429':>10} {'other refused':>13} {'carried out':>11} {'abandoned':>9} "
        f"{'never-movable kept':>18} {'device twice':>12}"
    )
    lines = [head]
    for r in results:
        plans = r.get("plans") or {}
        lines.append(
            f"{r['mode']:<5} {r['nodes']:>5} {r['pods']:>4} {r['build_s']:>7} {seconds(r['big_s']):>9} "
            f"{seconds(r['pcie_s']):>9} {r['moved']:>5} {r['refused_by_budget']:>10} "
            f"{r['refused_otherwise']:>13} {plans.get('carried_out', 0):>11.0f} "
            f"{plans.get('abandoned', 0):>9.0f} {r['never_moved_kept']!s:>18} {r['device_twice']:>12}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--shared-budget", type=int, default=None, metavar="N")
    parser.add_argument("--off-wait", type=float, default=20.0, metavar="SECONDS")
    parser.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--keep", type=Path, metavar="DIR", help="the control plane's folder (logs kept)")
    parser.add_argument("--extender-args", default="", help="more flags for dra-extender serve, one string")
    args = parser.parse_args(argv)
    located = found.for_bench()
    if located.kube_controller_manager is None:
        print("needs kube-controller-manager (ReplicaSets, budgets)")
        return 2
    layout = random_layout(args.nodes, args.seed)
    results = []
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.keep or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        plane = ControlPlane(located, folder, controllers=(*DRA_CONTROLLERS, *WORKLOAD_CONTROLLERS))
        try:
            plane.start()
            for mode in args.modes:
                r = run(
                    plane,
                    layout,
                    mode,
                    shared_budget=args.shared_budget,
                    off_wait=args.off_wait,
                    timeout=args.timeout,
                    extra=tuple(args.extender_args.split()),
                )
                print(json.dumps(r), flush=True)
                results.append(r)
            remove_workloads(plane.api)
        finally:
            plane.stop()
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
