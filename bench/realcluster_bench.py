"""The real kube-scheduler deciding with the in-tree DynamicResources plugin, with dra-extender,
and with an extender that decides nothing (the floor), on the same workload, the same real
kube-apiserver and etcd, one after the other in one run.

Per size (N nodes x 8 GPUs + 2 NICs, the scheduling bench's cluster, or N x 1: one GPU slice
per node, kubernetes#136588's shape) and pod shape (``one-gpu``, ``four-gpus-numa``,
``gpu-nic-pcieroot``): every GPU's worth of pods plus 5 that cannot fit, each pod with a
ResourceClaim of its own, all created (by 8 parallel clients, the time reported apart) before
kube-scheduler starts. Every run uses the shipped ``scheduler-config/second-scheduler.yaml``
with the same client settings (qps and burst 5000, as kube-scheduler's own scheduler_perf
does), the in-tree runs with the extender removed and DynamicResources enabled: ``in-tree`` with
kube-scheduler's default share of nodes scored (what a cluster using the in-tree plugin runs; the
base of every ratio), ``in-tree-100`` scoring every node as the shipped file (and so the
extender) needs, reported beside it and labelled as such.

The floor (bench/null_extender.py) passes every node, scores 0 and writes only the Binding, on
the extender's own HTTP stack and API client: what the extender protocol costs before any
decision. It binds the 5 pods that do not fit too, and it makes one write per pod where the
in-tree plugin and the extender make two (the claim's status, then the Binding).

Reported per run: pods bound and pods/s from kube-scheduler's start to the last bind (seen on a
pod watch), kube-scheduler's attempts by result, FailedScheduling events, the CPU seconds of
kube-scheduler, kube-apiserver, etcd and the extender (and the extender's CPU per bound pod,
its start-up apart), the pods' scheduling SLI p50/p99 (queue to bound) and the Bind/PreBind
extension points from kube-scheduler's metrics, the extender's own bind p50/p99, and the store
checked afterwards (no device twice, every bound pod's claim allocated on its node).
``--profile DIR`` samples the extender's CPU (bench/profile.py) and prints each phase's
share of its CPU.

Needs the real binaries (tests/realcluster/binaries.py says where they are looked for).
Run: ``python -m bench.realcluster_bench`` (``--nodes 100 500 1000x8 5000x1``, ``--shapes``,
``--modes``, ``--repeat N``, ``--json FILE``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import threading
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
from tests.realcluster.proxy import Proxy
from tests.realcluster.workload import PAUSE, remove

NAMESPACE = "default"
UNFIT = 5
CLIENT_QPS = 5000.0


#: in-tree: the DynamicResources plugin with kube-scheduler's defaults for everything else (an
#: adaptive share of the nodes scored: what clusters using the in-tree plugin run); in-tree-100:
#: the same with percentageOfNodesToScore 100, the extender's setting (it must see every node
#: kube-scheduler's filters pass), reported beside it and labelled; extender; floor; baseline:
#: the extender from another checkout (``--baseline DIR``), to compare two versions in one run.
MODES = ("in-tree", "in-tree-100", "extender", "floor", "baseline")
IN_TREE = ("in-tree", "in-tree-100")
EXTENDER = "dra-extender"


def pods_for(shape: str, nodes: int, gpus_per_node: int = GPUS_PER_NODE) -> int:
    """Every GPU's worth of pods plus UNFIT; UNFIT or fewer: the size cannot hold the shape."""
    _, gpus, nics = SHAPES[shape]
    capacity = nodes * gpus_per_node // gpus
    if nics:
        capacity = min(capacity, nodes * NICS_PER_NODE // nics) if gpus_per_node > 1 else 0
    return capacity + UNFIT


def create_cluster(plane: ControlPlane, nodes: int, gpus_per_node: int = GPUS_PER_NODE) -> None:
    """Nodes with a GPU slice each, and a NIC slice each where they have more than one GPU."""
    api = plane.api
    objects = cluster(nodes, gpus_per_node, 0.0)
    if gpus_per_node == 1:
        objects = [o for o in objects if not o["metadata"]["name"].endswith("-nic")]
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


def from_checkout(checkout: Path, command: list[str]) -> list[str]:
    """``python -m extender.cli ARGS`` as the package of another checkout runs it: its folder
    goes first on the path (``-m`` would put the current folder, this checkout, before it)."""
    assert command[1:3] == ["-m", "extender.cli"], command
    start = (
        f"import sys; sys.path.insert(0, {str(checkout.resolve())!r}); "
        "from extender.cli import main; sys.exit(main())"
    )
    return [command[0], "-c", start, *command[3:]]


def against_baseline(round_results: dict[str, dict[str, Any]]) -> str:
    """The extender against the baseline checkout's, in one round: CPU per pod and pods/s."""
    new, old = round_results["extender"], round_results["baseline"]
    return (
        f"extender / baseline: CPU per pod {new['extender_ms_per_pod']} / {old['extender_ms_per_pod']} ms "
        f"= {new['extender_ms_per_pod'] / max(old['extender_ms_per_pod'], 1e-9):.2f}x, "
        f"pods/s {new['pods_per_s'] / max(old['pods_per_s'], 1e-9):.2f}x"
    )


def run_mode(
    plane: ControlPlane,
    shape: str,
    nodes: int,
    *,
    mode: str,
    gpus_per_node: int = GPUS_PER_NODE,
    extender_args: tuple[str, ...] = (),
    profile: Path | None = None,
    api_delay: float = 0.0,
    api_load: float = 0.0,
    baseline: Path | None = None,
) -> dict[str, Any]:
    api = plane.api
    count = pods_for(shape, nodes, gpus_per_node)
    created = time.monotonic()
    create_pods(plane, shape, count)
    creation_s = time.monotonic() - created
    ext: Extender | None = None
    link = slow_link(plane, api_delay) if api_delay and mode not in IN_TREE else None
    if mode in ("extender", "baseline"):
        ext = Extender(plane, *extender_args, kubeconfig=link[1] if link else None)
        if mode == "baseline":
            if baseline is None:
                raise ValueError("the baseline mode needs --baseline DIR")
            ext.process.command = from_checkout(baseline, ext.process.command)
    elif mode == "floor":
        ext = null_extender(plane, link[1] if link else None)
    if ext is not None:
        if profile is not None:  # python -m MODULE ARGS under the sampler, idle until started
            ext.process.command = profiler.command(profile, *ext.process.command[2:])
        ext.start()
    config = scheduler_config(
        plane.extender_kubeconfig(), extender_url=ext.url if ext else None, client_qps=CLIENT_QPS
    )
    if mode == "in-tree":
        # kube-scheduler's default (unset: adaptive, 50% minus nodes/125, at least 5% and 100
        # nodes; pkg/scheduler/schedule_one.go numFeasibleNodesToFind, v1.36.3).
        del config["percentageOfNodesToScore"]
    watch = BindWatch(plane)
    sched = Scheduler(plane, config)
    pids = {"kube-apiserver": plane.apiserver.pid, "etcd": plane.etcd.pid}
    if ext is not None:
        pids[EXTENDER] = ext.process.pid
    before = {k: cpu_seconds(p) for k, p in pids.items()}
    system_before = {k: cpu_seconds(p, "system") for k, p in pids.items()}
    sampling = ext is not None and profile is not None
    if sampling:
        profiler.start(pids[EXTENDER])
    loading = threading.Event()
    if api_load:
        threading.Thread(target=load_api, args=(plane, api_load, loading), daemon=True).start()
    started = time.monotonic()
    sched.start()
    pids["kube-scheduler"] = sched.process.pid
    # The floor passes every node: it binds the pods that do not fit too (no device is given).
    fit = count if mode == "floor" else count - UNFIT
    deadline = started + 60 + count / 10
    while len(watch.bound) < fit and time.monotonic() < deadline and sched.process.alive():
        time.sleep(0.05)
    # kube-scheduler exits when it loses its Lease (an API server answering 429 to its renewals)
    scheduler_exited = not sched.process.alive()
    time.sleep(1.0)  # late binds (there should be none beyond the pods that fit)
    after = {k: cpu_seconds(p) for k, p in pids.items()}
    system_after = {k: cpu_seconds(p, "system") for k, p in pids.items()}
    profiled = sampling and profile is not None and profiler.stop(pids[EXTENDER], profile)
    loading.set()
    before.setdefault("kube-scheduler", 0.0)
    metrics = sched.metrics() if not scheduler_exited else ""
    events = api.list("Event", NAMESPACE)
    result: dict[str, Any] = {
        "mode": mode,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "creation_s": round(creation_s, 1),
        "shape": shape,
        "pods": count,
        "bound": len(watch.bound),
        "wall_s": round((watch.last_bind or time.monotonic()) - started, 2),
        "failed_scheduling": sum(1 for e in events if e.get("reason") == "FailedScheduling"),
        # A failed attempt of a pod that was bound later: with an extender, a bind that outlasted
        # kube-scheduler's httpTimeout (its writes landed after kube-scheduler gave up on it).
        "failed_then_bound": len(
            {
                e["involvedObject"]["name"]
                for e in events
                if e.get("reason") == "FailedScheduling" and e["involvedObject"]["name"] in watch.bound
            }
        ),
        "scheduler_exited": scheduler_exited,
        "api_delay_s": api_delay,
        "api_load_s": api_load,
        "failed_scheduling_messages": sorted(
            {str(e.get("message"))[:160] for e in events if e.get("reason") == "FailedScheduling"}
        )[:10],
        "cpu_s": {k: round(after[k] - before[k], 2) for k in pids},
        # From the process's start to ready: imports, the first lists, the informers' sync.
        "startup_cpu_s": round(before[EXTENDER], 2) if ext is not None else None,
        "system_cpu_s": {k: round(system_after[k] - system_before.get(k, 0.0), 2) for k in pids},
    }
    result["pods_per_s"] = round(result["bound"] / result["wall_s"], 1) if result["wall_s"] > 0 else 0.0
    if ext is not None:
        result["extender_ms_per_pod"] = round(1000 * result["cpu_s"][EXTENDER] / max(1, result["bound"]), 2)
    if profiled and profile is not None:
        result["profile"] = str(profile)
        result["profile_shares"] = dict(profiler.shares(profile.read_text().splitlines()))
        result["profile_header"] = profiler.header(profile)
    result["attempts"] = {
        sample.labels["result"]: int(sample.value)
        for family in text_string_to_metric_families(metrics)
        for sample in family.samples
        if sample.name == "scheduler_schedule_attempts_total" and sample.value
    }
    p50, p99, n = histogram_quantiles(metrics, "scheduler_pod_scheduling_sli_duration_seconds")
    result["sli_ms"] = {"p50": round(p50 * 1000, 1), "p99": round(p99 * 1000, 1), "count": n}
    for point in ("PreBind", "Bind"):
        p50, p99, n = histogram_quantiles(
            metrics, "scheduler_framework_extension_point_duration_seconds", {"extension_point": point}
        )
        result[f"{point.lower()}_ms"] = {"p50": round(p50 * 1000, 2), "p99": round(p99 * 1000, 2), "count": n}
    if ext is not None and mode == "extender":
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
    result["store_violations"] = invariants.check(objects)[:5] if mode != "floor" else []
    watch.close()
    sched.stop()
    if ext is not None:
        ext.stop()
    if link is not None:
        link[0].__exit__(None, None, None)
    return result


def null_extender(plane: ControlPlane, kubeconfig: Path | None = None) -> Extender:
    """The floor's extender (bench/null_extender.py), started as the extender is."""
    floor = Extender(plane, name="null-extender")
    floor.process.command = [
        sys.executable,
        "-m",
        "bench.null_extender",
        "--kubeconfig",
        str(kubeconfig or plane.extender_kubeconfig()),
    ]
    return floor


def load_api(plane: ControlPlane, every: float, done: threading.Event) -> None:
    """List every pod of the run's namespace every ``every`` seconds until ``done``: a loaded
    kube-apiserver, as in a busy cluster (its own client, apart from the bench's)."""
    while not done.wait(every):
        with contextlib.suppress(Exception):
            plane.api.list("Pod", NAMESPACE)


def slow_link(plane: ControlPlane, delay: float) -> tuple[Proxy, Path]:
    """A proxy between the extender and kube-apiserver that delays every request ``delay``
    seconds (a loaded API server; watch events still flow), and the extender's kubeconfig
    through it."""
    proxy = Proxy(plane.port).__enter__()
    proxy.request_delay = delay
    kubeconfig = plane.extender_kubeconfig()
    slowed = kubeconfig.with_name("dra-extender-slowed.kubeconfig")
    slowed.write_text(kubeconfig.read_text().replace(plane.url, proxy.url))
    return proxy, slowed


def clear_pods(plane: ControlPlane) -> None:
    """The run's pods, claims (finalizers first), events and the schedulers' leases."""
    remove(plane.api, ("Pod", "ResourceClaim", "Event"), (NAMESPACE,))


def report(r: dict[str, Any]) -> str:
    cpu = " ".join(f"{k}={v} ({r['system_cpu_s'][k]} sys)" for k, v in sorted(r["cpu_s"].items()))
    line = (
        f"{r['mode']:>13} {r['nodes']:>4} nodes {r['shape']:<16} {r['bound']}/{r['pods']} bound in "
        f"{r['wall_s']:.1f} s = {r['pods_per_s']:.1f} pods/s, FailedScheduling {r['failed_scheduling']}, "
        f"SLI p50/p99 {r['sli_ms']['p50']}/{r['sli_ms']['p99']} ms, attempts {r['attempts']}, "
        f"failed then bound {r['failed_then_bound']}"
        f"{' (kube-scheduler EXITED mid-run: it lost its Lease)' if r.get('scheduler_exited') else ''}\n"
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
        line += f"\n{'':>14}profile ({r['profile']}):\n{r['profile_header']}" + profiler.table(
            samples, r["cpu_s"][EXTENDER]
        )
    if r["store_violations"]:
        line += f"\n{'':>14}STORE VIOLATIONS: {r['store_violations']}"
    return line


def size(text: str) -> tuple[int, int]:
    """``NODES`` or ``NODESxGPUS`` (GPUs per node; 8 unless given)."""
    nodes, _, gpus = text.partition("x")
    if not nodes.isdigit() or (gpus and not gpus.isdigit()):
        raise argparse.ArgumentTypeError(f"a size is NODES or NODESxGPUS, not {text!r}")
    return int(nodes), int(gpus or GPUS_PER_NODE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--nodes",
        type=size,
        nargs="+",
        default=[(100, 8), (500, 8)],
        metavar="NODES[xGPUS]",
        help="cluster sizes: 100 or 100x8 (8 GPUs and 2 NICs per node); 5000x1: one GPU slice per "
        "node, no NICs (kubernetes#136588's shape). Default: 100 500",
    )
    parser.add_argument(
        "--shapes",
        nargs="+",
        default=["one-gpu", "four-gpus-numa", "gpu-nic-pcieroot"],
        choices=sorted(SHAPES),
        help="pod shapes; those a size cannot hold (four GPUs on a one-GPU node) are skipped",
    )
    parser.add_argument(
        "--modes",
        nargs="+",
        default=[m for m in MODES if m != "baseline"],
        choices=MODES,
        help="in-tree: the DynamicResources plugin with kube-scheduler's default share of nodes "
        "scored (what clusters run; the ratios' base); in-tree-100: the same scoring every node, "
        "as the extender needs kube-scheduler configured; extender: dra-extender; floor: an "
        "extender that decides nothing (bench/null_extender.py), what the protocol itself costs; "
        "baseline: the extender of the --baseline checkout. Default: all but baseline",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds per shape, the order of the modes rotating between rounds: the median "
        "ratio to in-tree is printed (runs on a shared machine vary by 1.5x)",
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument(
        "--api-load",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="a client lists every pod of the run every SECONDS while kube-scheduler runs (0.05: "
        "a kube-apiserver as loaded as in a busy cluster)",
    )
    parser.add_argument(
        "--api-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="the extender's (and the floor's) traffic to kube-apiserver goes through a proxy that "
        "delays every request this long: an API server slower than kube-scheduler decides",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="sample the extender's CPU during each run (collapsed stacks into DIR, bench/profile.py) "
        "and print the share of each phase",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="another checkout of this project (git worktree add DIR REV): the baseline mode runs "
        "its extender, and extender / baseline is printed per round (CPU per pod and pods/s)",
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
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        # No kube-controller-manager: the claims are created directly, and it would only add
        # its own load to every run.
        plane = ControlPlane(located, Path(folder), controller_manager=False)
        try:
            plane.start()
            for nodes, gpus in args.nodes:
                empty(plane.api)
                created = time.monotonic()
                create_cluster(plane, nodes, gpus)
                print(
                    f"{nodes} nodes x {gpus} GPUs: cluster objects created in "
                    f"{time.monotonic() - created:.1f} s",
                    flush=True,
                )
                for shape in args.shapes:
                    if pods_for(shape, nodes, gpus) <= UNFIT:
                        continue
                    ratios: dict[str, list[float]] = {m: [] for m in args.modes if m != "in-tree"}
                    for repeat in range(args.repeat):
                        shift = repeat % len(args.modes)
                        round_results = {}
                        for mode in args.modes[shift:] + args.modes[:shift]:
                            r = run_mode(
                                plane,
                                shape,
                                nodes,
                                mode=mode,
                                gpus_per_node=gpus,
                                api_delay=args.api_delay,
                                api_load=args.api_load,
                                extender_args=tuple(args.extender_args.split()),
                                baseline=args.baseline,
                                profile=(
                                    args.profile / f"{mode}-{nodes}x{gpus}-{shape}-{repeat}.txt"
                                    # (the baseline's command is not a module the sampler can run)
                                    if args.profile and mode not in (*IN_TREE, "baseline")
                                    else None
                                ),
                            )
                            print(report(r), flush=True)
                            round_results[mode] = r
                            results.append(r)
                            clear_pods(plane)
                        base = round_results.get("in-tree", {}).get("pods_per_s")
                        for mode in ratios:
                            if base:
                                ratios[mode].append(round_results[mode]["pods_per_s"] / base)
                        print(
                            f"{'':>14}"
                            + ", ".join(f"{m} / in-tree: {r[-1]:.2f}x" for m, r in ratios.items() if r),
                            flush=True,
                        )
                        if "extender" in round_results and "baseline" in round_results:
                            print(f"{'':>14}{against_baseline(round_results)}", flush=True)
                    for mode, values in ratios.items():
                        if len(values) > 1:
                            listed = ", ".join(f"{v:.2f}" for v in values)
                            print(
                                f"{'':>14}{mode} / in-tree, median of {len(values)}: "
                                f"{statistics.median(values):.2f}x ({listed})",
                                flush=True,
                            )
        finally:
            plane.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
