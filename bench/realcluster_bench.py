"""The real kube-scheduler with the in-tree DynamicResources plugin vs. with dra-extender, on
the same workload, the same real kube-apiserver and etcd, one after the other in one run.

Per node count (N nodes x 8 GPUs + 2 NICs, the scheduling bench's cluster) and pod shape
(``one-gpu``, ``four-gpus-numa``, ``gpu-nic-pcieroot``): every GPU's worth of pods plus 5 that
cannot fit, each pod with a ResourceClaim of its own, all created before kube-scheduler starts.
Both runs use the shipped ``scheduler-config/second-scheduler.yaml`` with the same client
settings (qps and burst 5000, as kube-scheduler's own scheduler_perf does), the in-tree run with
the extender removed and DynamicResources enabled.

Reported per run: pods bound and pods/s from kube-scheduler's start to the last bind (seen on a
pod watch), FailedScheduling events, the CPU seconds of kube-scheduler, kube-apiserver, etcd
and the extender, the pods' scheduling SLI p50/p99 (queue to bound) and the Bind/PreBind
extension points from kube-scheduler's metrics, the extender's own bind p50/p99, and the store
checked afterwards (no device twice, every bound pod's claim allocated on its node).

Needs the real binaries (tests/realcluster/binaries.py says where they are looked for).
Run: ``python -m bench.realcluster_bench`` (``--nodes 100 500``, ``--shapes``, ``--json FILE``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from bench import profile as profiler
from bench.allocator_bench import cluster
from bench.scheduling_bench import GPUS_PER_NODE, NICS_PER_NODE, SHAPES
from tests.integration import invariants
from tests.realcluster import binaries as found
from tests.realcluster.bind_watch import BindWatch
from tests.realcluster.components import Extender, Scheduler, scheduler_config
from tests.realcluster.conftest import empty
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import PAUSE, remove

NAMESPACE = "default"
UNFIT = 5
CLIENT_QPS = 5000.0


def pods_for(shape: str, nodes: int) -> int:
    _, gpus, nics = SHAPES[shape]
    capacity = nodes * GPUS_PER_NODE // gpus
    if nics:
        capacity = min(capacity, nodes * NICS_PER_NODE // nics)
    return capacity + UNFIT


def create_cluster(plane: ControlPlane, nodes: int) -> None:
    api = plane.api
    objects = cluster(nodes, GPUS_PER_NODE, 0.0)
    node_objects = [o for o in objects if o["kind"] == "Node"]
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda n: plane.add_node(n["metadata"]["name"], labels=n["metadata"]["labels"]), node_objects
            )
        )
        list(pool.map(api.create, [o for o in objects if o["kind"] != "Node"]))


def create_pods(plane: ControlPlane, shape: str, count: int) -> None:
    api = plane.api
    spec = SHAPES[shape][0]

    def one(i: int) -> None:
        api.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": f"c-{i:05d}", "namespace": NAMESPACE},
                "spec": {"devices": spec},
            }
        )
        api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"p-{i:05d}", "namespace": NAMESPACE},
                "spec": {
                    "schedulerName": "dra-extender-scheduler",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "main", "image": PAUSE}],
                    "resourceClaims": [{"name": "devices", "resourceClaimName": f"c-{i:05d}"}],
                },
            }
        )

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))


def cpu_seconds(pid: int, part: str = "all") -> float:
    """CPU seconds of a process so far: ``user``, ``system`` or ``all`` (with its children)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    if part == "user":
        return float(times.user)
    if part == "system":
        return float(times.system)
    return float(times.user + times.system + times.children_user + times.children_system)


def histogram_quantiles(
    metrics: str, name: str, labels: dict[str, str] | None = None
) -> tuple[float, float, int]:
    """(p50, p99, count) of a Prometheus histogram, summed over series matching ``labels``,
    interpolated within buckets (as histogram_quantile does)."""
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name != f"{name}_bucket":
                continue
            if any(sample.labels.get(k) != v for k, v in (labels or {}).items()):
                continue
            le = float(sample.labels["le"])
            buckets[le] = buckets.get(le, 0.0) + sample.value
    if not buckets:
        return (float("nan"), float("nan"), 0)
    bounds = sorted(buckets)
    total = buckets[bounds[-1]]

    def quantile(q: float) -> float:
        rank = q * total
        previous_bound, previous_count = 0.0, 0.0
        for bound in bounds:
            count = buckets[bound]
            if count >= rank:
                if bound == float("inf"):
                    return previous_bound
                width = count - previous_count
                return previous_bound + (bound - previous_bound) * (
                    (rank - previous_count) / width if width else 0
                )
            previous_bound, previous_count = bound, count
        return bounds[-1]

    return (quantile(0.5), quantile(0.99), int(total))


def run_mode(
    plane: ControlPlane,
    shape: str,
    nodes: int,
    *,
    with_extender: bool,
    extender_args: tuple[str, ...] = (),
    profile: Path | None = None,
) -> dict[str, Any]:
    api = plane.api
    count = pods_for(shape, nodes)
    create_pods(plane, shape, count)
    ext: Extender | None = None
    if with_extender:
        ext = Extender(plane, *extender_args).start()
    config = scheduler_config(
        plane.extender_kubeconfig(), extender_url=ext.url if ext else None, client_qps=CLIENT_QPS
    )
    watch = BindWatch(plane)
    sched = Scheduler(plane, config)
    pids = {"kube-apiserver": plane.apiserver.pid, "etcd": plane.etcd.pid}
    if ext is not None:
        pids["dra-extender"] = ext.process.pid
    before = {k: cpu_seconds(p) for k, p in pids.items()}
    system_before = {k: cpu_seconds(p, "system") for k, p in pids.items()}
    spy = profiler.record(ext.process.pid, profile) if ext is not None and profile is not None else None
    started = time.monotonic()
    sched.start()
    pids["kube-scheduler"] = sched.process.pid
    fit = count - UNFIT
    deadline = started + 60 + count / 10
    while len(watch.bound) < fit and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # late binds (there should be none beyond the pods that fit)
    after = {k: cpu_seconds(p) for k, p in pids.items()}
    system_after = {k: cpu_seconds(p, "system") for k, p in pids.items()}
    profiler.stop(spy)
    before.setdefault("kube-scheduler", 0.0)
    metrics = sched.metrics()
    events = api.list("Event", NAMESPACE)
    result: dict[str, Any] = {
        "mode": "dra-extender" if with_extender else "in-tree",
        "nodes": nodes,
        "shape": shape,
        "pods": count,
        "bound": len(watch.bound),
        "wall_s": round((watch.last_bind or time.monotonic()) - started, 2),
        "failed_scheduling": sum(1 for e in events if e.get("reason") == "FailedScheduling"),
        "failed_scheduling_messages": sorted(
            {str(e.get("message"))[:160] for e in events if e.get("reason") == "FailedScheduling"}
        )[:10],
        "cpu_s": {k: round(after[k] - before[k], 2) for k in pids},
        # From the process's start to ready: imports, the first lists, the informers' sync.
        "startup_cpu_s": round(before["dra-extender"], 2) if ext is not None else None,
        "system_cpu_s": {k: round(system_after[k] - system_before.get(k, 0.0), 2) for k in pids},
    }
    result["pods_per_s"] = round(result["bound"] / result["wall_s"], 1) if result["wall_s"] > 0 else 0.0
    if ext is not None:
        result["extender_ms_per_pod"] = round(
            1000 * result["cpu_s"]["dra-extender"] / max(1, result["bound"]), 2
        )
    if spy is not None and profile is not None and profile.exists():
        result["profile"] = str(profile)
        result["profile_shares"] = dict(profiler.shares(profile.read_text().splitlines()))
    p50, p99, n = histogram_quantiles(metrics, "scheduler_pod_scheduling_sli_duration_seconds")
    result["sli_ms"] = {"p50": round(p50 * 1000, 1), "p99": round(p99 * 1000, 1), "count": n}
    for point in ("PreBind", "Bind"):
        p50, p99, n = histogram_quantiles(
            metrics, "scheduler_framework_extension_point_duration_seconds", {"extension_point": point}
        )
        result[f"{point.lower()}_ms"] = {"p50": round(p50 * 1000, 2), "p99": round(p99 * 1000, 2), "count": n}
    if ext is not None:
        ext_metrics = ext.metrics()
        result["extender_calls"] = {
            verb: histogram_quantiles(ext_metrics, "dra_extender_request_duration_seconds", {"verb": verb})[2]
            for verb in ("filter", "prioritize", "bind")
        }
        result["extender_conflicts"] = sum(
            sample.value
            for family in text_string_to_metric_families(ext_metrics)
            for sample in family.samples
            if sample.name == "dra_extender_claim_write_conflicts_total"
        )
        p50, p99, n = histogram_quantiles(
            ext_metrics, "dra_extender_request_duration_seconds", {"verb": "bind"}
        )
        result["extender_bind_ms"] = {"p50": round(p50 * 1000, 2), "p99": round(p99 * 1000, 2), "count": n}
        result["extender_bind_failures"] = {
            sample.labels["reason"]: sample.value
            for family in text_string_to_metric_families(ext_metrics)
            for sample in family.samples
            if sample.name == "dra_extender_bind_failures_total" and sample.value
        }
    objects = {
        "resourceclaims": api.list("ResourceClaim", NAMESPACE),
        "pods": api.list("Pod", NAMESPACE),
        "resourceslices": api.list("ResourceSlice"),
    }
    result["store_violations"] = invariants.check(objects)[:5]
    watch.close()
    sched.stop()
    if ext is not None:
        ext.stop()
    return result


def clear_pods(plane: ControlPlane) -> None:
    """The run's pods, claims (finalizers first), events and the schedulers' leases."""
    remove(plane.api, ("Pod", "ResourceClaim", "Event"), (NAMESPACE,))


def report(r: dict[str, Any]) -> str:
    cpu = " ".join(f"{k}={v} ({r['system_cpu_s'][k]} sys)" for k, v in sorted(r["cpu_s"].items()))
    line = (
        f"{r['mode']:>13} {r['nodes']:>4} nodes {r['shape']:<16} {r['bound']}/{r['pods']} bound in "
        f"{r['wall_s']:.1f} s = {r['pods_per_s']:.1f} pods/s, FailedScheduling {r['failed_scheduling']}, "
        f"SLI p50/p99 {r['sli_ms']['p50']}/{r['sli_ms']['p99']} ms\n"
        f"{'':>14}CPU s: {cpu}"
    )
    if "extender_ms_per_pod" in r:
        line += f"; extender {r['extender_ms_per_pod']} ms/pod (start-up {r['startup_cpu_s']} s)"
    if "extender_bind_ms" in r:
        line += f"; extender bind p50/p99 {r['extender_bind_ms']['p50']}/{r['extender_bind_ms']['p99']} ms"
        line += (
            f"\n{'':>14}extender calls {r['extender_calls']}, write conflicts {r['extender_conflicts']:.0f}"
            f", failed binds {r['extender_bind_failures'] or 0}"
        )
    else:
        line += f"; PreBind p50/p99 {r['prebind_ms']['p50']}/{r['prebind_ms']['p99']} ms"
    for message in r["failed_scheduling_messages"]:
        line += f"\n{'':>14}FailedScheduling: {message}"
    if "profile_shares" in r:
        samples = Counter(r["profile_shares"])
        line += f"\n{'':>14}profile ({r['profile']}):\n" + profiler.table(samples, r["cpu_s"]["dra-extender"])
    if r["store_violations"]:
        line += f"\n{'':>14}STORE VIOLATIONS: {r['store_violations']}"
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 500])
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=["one-gpu", "four-gpus-numa", "gpu-nic-pcieroot"],
        choices=sorted(SHAPES),
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="pairs per shape, the order alternating (in-tree first, then extender first): the "
        "median ratio is printed (runs on a shared machine vary by 1.5x)",
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="sample the extender with py-spy during each run (raw stacks into DIR) and print the "
        "share of each phase",
    )
    parser.add_argument(
        "--extender-args",
        default="",
        help="flags for dra-extender serve, one string ('--hold-after-prioritize 1')",
    )
    args = parser.parse_args(argv)
    located = found.for_bench()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        # No kube-controller-manager: the claims are created directly, and it would only add
        # its own load to both runs.
        plane = ControlPlane(located, Path(folder), controller_manager=False)
        try:
            plane.start()
            for nodes in args.nodes:
                empty(plane.api)
                create_cluster(plane, nodes)
                for shape in args.shapes:
                    ratios = []
                    for repeat in range(args.repeat):
                        order = (False, True) if repeat % 2 == 0 else (True, False)
                        pair = {}
                        for with_extender in order:
                            r = run_mode(
                                plane,
                                shape,
                                nodes,
                                with_extender=with_extender,
                                extender_args=tuple(args.extender_args.split()),
                                profile=(
                                    args.profile / f"extender-{nodes}-{shape}-{repeat}.txt"
                                    if args.profile
                                    else None
                                ),
                            )
                            print(report(r), flush=True)
                            pair[with_extender] = r
                            clear_pods(plane)
                        base = pair[False]["pods_per_s"]
                        ratio = pair[True]["pods_per_s"] / base if base else 0.0
                        ratios.append(ratio)
                        print(f"{'':>14}extender / in-tree: {ratio:.2f}x", flush=True)
                        results += [pair[False], pair[True]]
                    if len(ratios) > 1:
                        listed = ", ".join(f"{r:.2f}" for r in ratios)
                        print(
                            f"{'':>14}median of {len(ratios)}: {statistics.median(ratios):.2f}x ({listed})",
                            flush=True,
                        )
        finally:
            plane.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
