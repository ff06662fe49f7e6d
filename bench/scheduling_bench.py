"""Scheduling-loop benchmark: kube-scheduler's loop over real HTTP against ``dra-extender serve``.

One loop, as kube-scheduler runs it: for each pod, filter over all nodes, prioritize the
feasible ones, pick the best, and bind asynchronously (at most 16 binds in flight) while the
loop goes on with the next pod. Modes: ``embedded`` (``serve --state``) and ``cluster``
(``serve --kubeconfig`` against the project's fake API server, where pods and claims are
created). Pod shapes: one GPU; one GPU with a CEL selector on memory and driver version;
GPU + NIC with matchAttribute pcieRoot; four GPUs with matchAttribute numaNode. Sizes: N nodes
x 8 GPUs + 2 NICs.

Reported per run: pods/s, per-verb p50/p99, the server's CPU per pod and RSS, and a floor
measured in the same run: the same sequence of calls to an empty endpoint. At the end the
cluster state is checked: no device held twice, every bound pod's claim reserved for it on its
node.

Run: ``python -m bench.scheduling_bench`` (``--mode``, ``--nodes``, ``--shapes``, ``--pods``,
``--json FILE``).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import chain
from pathlib import Path
from typing import Any

import httpx
import orjson
import psutil

from bench import profile as profiler
from bench.allocator_bench import GPU, POD_CLAIMS, claim_object, cluster, pod_object
from bench.service_bench import FLOOR_SERVER
from tests.integration.servers import server_process
from tests.integration.test_serve_cluster import kubeconfig
from tests.service.fixtures import args_names, binding, scheduler_pod

#: Pod shape -> (the claim's devices spec, GPUs per pod, NICs per pod).
SHAPES: dict[str, tuple[dict[str, Any], int, int]] = {
    "one-gpu": ({"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU}}]}, 1, 0),
    "gpu-cel-memory": (POD_CLAIMS["1 GPU + CEL selector"], 1, 0),
    "gpu-nic-pcieroot": (POD_CLAIMS["GPU + NIC, matchAttribute pcieRoot"], 1, 1),
    "four-gpus-numa": (POD_CLAIMS["4 GPUs, matchAttribute numaNode"], 4, 0),
}
GPUS_PER_NODE, NICS_PER_NODE = 8, 2
BINDS_IN_FLIGHT = 16
#: Cluster mode: the fake API server's own p50 time per write (ms), per run.
FAKE_WRITES: list[float] = []


def pod_count(shape: str, nodes: int, wanted: int) -> int:
    _, gpus, nics = SHAPES[shape]
    capacity = nodes * GPUS_PER_NODE // gpus
    if nics:
        capacity = min(capacity, nodes * NICS_PER_NODE // nics)
    return min(wanted, capacity)


def workload(shape: str, pods: int) -> list[dict[str, Any]]:
    spec = SHAPES[shape][0]
    out: list[dict[str, Any]] = []
    for i in range(pods):
        out.append(claim_object(f"c-{i}", spec))
        out.append(pod_object(f"p-{i}", f"c-{i}", uid=f"uid-p-{i}"))
    return out


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3


#: kube-scheduler's Filter runs over the nodes on 16 goroutines (parallelism's default), each
#: taking chunks of about sqrt(n) nodes, and lists a feasible node when its check ends
#: (pkg/scheduler/schedule_one.go findNodesThatPassFilters: ``feasibleNodes[length-1]`` after an
#: atomic increment; framework/parallelize/parallelism.go chunkSizeFor; v1.36.3): the extender is
#: sent the names in another order for nearly every pod. The order is not what an exact-bytes
#: memo of the request's names could ever hit on.
PARALLELISM = 16


class SchedulerOrder:
    """The node names in the order kube-scheduler's filter would list them: its chunks in a
    random order (seeded: the floor and the extender are sent the same sequence). ``fixed``:
    always the cluster's order (what this benchmark sent before 2 December 2026; kube-scheduler
    sends that only when it runs no filter plugin)."""

    def __init__(self, names: list[str], seed: int = 54, fixed: bool = False) -> None:
        size = max(1, min(int(math.sqrt(len(names))), len(names) // PARALLELISM + 1))
        self._chunks = [names[i : i + size] for i in range(0, len(names), size)]
        self._names = names
        self._rng = random.Random(seed)
        self._fixed = fixed

    def __call__(self) -> list[str]:
        if self._fixed:
            return self._names
        chunks = self._chunks.copy()
        self._rng.shuffle(chunks)
        return list(chain.from_iterable(chunks))


class Loop:
    """kube-scheduler's loop: filter, prioritize, then an asynchronous bind per pod."""

    def __init__(self, url: str, order: SchedulerOrder, path: str = "/scheduler") -> None:
        self.url = url
        self.order = order
        self.path = path
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.bound = 0
        self.unschedulable = 0
        self.bind_errors: list[str] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def _http(self) -> http.client.HTTPConnection:
        """This thread's kept-alive connection. The standard library's client costs about a third
        of httpx's CPU per request: at 5,000 nodes the load generator (Python, where
        kube-scheduler is Go) shared the two cores with the server at 5 ms per pod."""
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            address = urllib.parse.urlsplit(self.url)
            connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=60)
            self._local.connection = connection
        return connection

    def _post(self, verb: str, body: bytes) -> Any:
        start = time.perf_counter()
        connection = self._http()
        connection.request(
            "POST",
            f"{self.path}/{verb}" if self.path else "/empty",
            body=body,
            headers={"Content-Type": "application/json"},
        )
        content = connection.getresponse().read()
        elapsed = time.perf_counter() - start
        with self._lock:
            self.latency[verb].append(elapsed)
        return orjson.loads(content)

    def _bind(self, name: str, node: str) -> None:
        error = self._post("bind", binding(name, f"uid-{name}", node)).get("Error")
        with self._lock:
            if error:
                self.bind_errors.append(f"{name}: {error}")
            else:
                self.bound += 1

    def run(self, pods: list[tuple[str, dict[str, Any]]], floor: bool = False) -> float:
        in_flight = threading.Semaphore(BINDS_IN_FLIGHT)
        futures: list[Future[None]] = []
        start = time.perf_counter()
        with ThreadPoolExecutor(BINDS_IN_FLIGHT) as binder:
            for name, spod in pods:
                names = self.order()
                filtered = self._post("filter", args_names(spod, names))
                passing = names if floor else (filtered.get("NodeNames") or [])
                if not passing:
                    self.unschedulable += 1
                    continue
                scores = self._post("prioritize", args_names(spod, passing))
                # Nodes scoring 0 are left out of the answer (kube-scheduler reads them as 0).
                best = max(scores, key=lambda s: s["Score"])["Host"] if scores and not floor else passing[0]
                in_flight.acquire()

                def bind(name: str = name, best: str = best) -> None:
                    try:
                        self._bind(name, best)
                    finally:
                        in_flight.release()

                futures.append(binder.submit(bind))
            for f in futures:
                f.result()
        return time.perf_counter() - start


def scheduler_pods(count: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            f"p-{i}",
            scheduler_pod(f"p-{i}", f"uid-p-{i}", [{"name": "devices", "resourceClaimName": f"c-{i}"}]),
        )
        for i in range(count)
    ]


@contextlib.contextmanager
def embedded_server(
    objects: list[dict[str, Any]], directory: Path, profile: Path | None = None
) -> Iterator[tuple[str, int, Callable[[], list[str]], int | None]]:
    path = directory / "state.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    arguments = ["serve", "--port", "0", "--ops-port", "0", "--state", str(path)]
    if profile is not None:  # under the CPU sampler, idle until the loop starts
        command = profiler.command(profile, "extender.cli", *arguments)
    else:
        command = [sys.executable, "-m", "extender.cli", *arguments]
    with server_process(command) as (url, proc):

        def check() -> list[str]:
            return debug_violations(url)

        yield url, proc.pid, check, None


@contextlib.contextmanager
def cluster_server(
    objects: list[dict[str, Any]], directory: Path, profile: Path | None = None
) -> Iterator[tuple[str, int, Callable[[], list[str]], int | None]]:
    """The extender against the fake API server, which runs in a process of its own."""
    path = directory / "objects.json"
    path.write_text(json.dumps(objects))
    fake = subprocess.Popen(
        [sys.executable, "-m", "bench.fake_api", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert fake.stdin is not None and fake.stdout is not None
    stdin, stdout = fake.stdin, fake.stdout
    try:
        first = stdout.readline().split()
        if first[:1] != ["URL"]:
            raise RuntimeError(f"the fake API server did not start: {first}")
        command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
        command += ["--kubeconfig", kubeconfig(first[1], directory)]
        with server_process(command) as (url, proc):
            deadline = time.monotonic() + 120
            with httpx.Client(base_url=url, timeout=10) as http:
                while http.get("/readyz").status_code != 200:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the extender did not become ready")
                    time.sleep(0.1)

            def ask(what: str) -> Any:
                stdin.write(what + "\n")
                stdin.flush()
                return json.loads(stdout.readline())

            ask("reset")  # the run's writes only

            def check() -> list[str]:
                answer = ask("check")
                FAKE_WRITES.append(answer["write_p50_ms"])
                problems: list[str] = answer["problems"]
                return problems

            yield url, proc.pid, check, fake.pid
    finally:
        stdin.close()
        fake.wait(timeout=30)


def server_quantile(url: str, verb: str, q: float) -> float:
    """The extender's own request-duration quantile for ``verb`` (ms), from its /metrics
    histogram as Prometheus' histogram_quantile computes it (linear within a bucket): the time
    inside the server, without the load generator's own waits."""
    with httpx.Client(base_url=url, timeout=30) as http:
        text = http.get("/metrics").text
    pattern = re.compile(
        r'^dra_extender_request_duration_seconds_bucket\{le="([^"]+)",verb="' + verb + r'"\} (\S+)$', re.M
    )
    buckets = sorted(
        (float("inf") if le == "+Inf" else float(le), float(n)) for le, n in pattern.findall(text)
    )
    if not buckets or buckets[-1][1] == 0:
        return 0.0
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower * 1e3
            return (lower + (upper - lower) * (rank - below) / max(count - below, 1e-9)) * 1e3
        lower, below = upper, count
    return lower * 1e3


def debug_violations(url: str) -> list[str]:
    """The embedded store as /debug/claims shows it: no device twice, claims on their pods' nodes."""
    with httpx.Client(base_url=url, timeout=60) as http:
        claims = http.get("/debug/claims").json()["claims"]
    problems = []
    holders: dict[str, list[str]] = defaultdict(list)
    for c in claims:
        for d in c["devices"]:
            holders[d.split("=", 1)[1]].append(c["claim"])
    problems += [f"device {d} is held by {', '.join(h)}" for d, h in holders.items() if len(h) > 1]
    for c in claims:
        if c["allocated"] and not c["reservedFor"]:
            continue  # allocated earlier, not by this run
        nodes = {d.split("=", 1)[1].split("/")[1] for d in c["devices"]}
        if c["reservedFor"] and len(nodes) != 1:
            problems.append(f"claim {c['claim']} spans nodes {sorted(nodes)}")
    return problems


def measure(
    mode: str,
    shape: str,
    nodes: int,
    wanted_pods: int,
    profile: Path | None = None,
    fixed_order: bool = False,
) -> dict[str, Any]:
    pods = pod_count(shape, nodes, wanted_pods)
    objects = cluster(nodes, GPUS_PER_NODE, 0.0) + workload(shape, pods)
    node_names = [f"node-{n:04d}" for n in range(nodes)]
    spods = scheduler_pods(pods)
    server = embedded_server if mode == "embedded" else cluster_server
    with tempfile.TemporaryDirectory() as tmp:
        floor_script = Path(tmp) / "floor.py"
        floor_script.write_text(FLOOR_SERVER)
        with server_process([sys.executable, str(floor_script)]) as (floor_url, floor_proc):
            floor_cpu_before = sum(psutil.Process(floor_proc.pid).cpu_times()[:2])
            floor = Loop(floor_url, SchedulerOrder(node_names, fixed=fixed_order), path="")
            floor_s = floor.run(spods, floor=True)
            floor_cpu = sum(psutil.Process(floor_proc.pid).cpu_times()[:2]) - floor_cpu_before
        sampled = profile if mode == "embedded" else None
        with server(objects, Path(tmp), sampled) as (url, pid, check, fake_pid):
            proc = psutil.Process(pid)
            fake_proc = psutil.Process(fake_pid) if fake_pid is not None else None
            rss_before = proc.memory_info().rss
            cpu_before = sum(proc.cpu_times()[:2])
            fake_before = sum(fake_proc.cpu_times()[:2]) if fake_proc is not None else 0.0
            client_before = time.process_time()
            loop = Loop(url, SchedulerOrder(node_names, fixed=fixed_order))
            if sampled is not None:
                profiler.start(pid)
            elapsed = loop.run(spods)
            cpu = sum(proc.cpu_times()[:2]) - cpu_before
            if sampled is not None and profiler.stop(pid, sampled):
                samples = profiler.shares(sampled.read_text().splitlines())
                print(
                    f"profile ({sampled}):\n{profiler.header(sampled)}{profiler.table(samples, cpu)}",
                    flush=True,
                )
            client_cpu = time.process_time() - client_before
            server_bind_p50 = server_quantile(url, "bind", 0.5)
            fake_cpu = sum(fake_proc.cpu_times()[:2]) - fake_before if fake_proc is not None else None
            rss_after = proc.memory_info().rss
            problems = check()
    # The same run split in quarters (pods in order): is the rate flat over the run?
    filters = loop.latency["filter"]
    quarter = max(len(filters) // 4, 1)
    result = {
        "mode": mode,
        "shape": shape,
        "nodes": nodes,
        "names_order": "fixed" if fixed_order else "kube-scheduler",
        "pods": pods,
        "bound": loop.bound,
        "unschedulable": loop.unschedulable,
        "bind_errors": len(loop.bind_errors),
        "seconds": elapsed,
        "pods_per_s": loop.bound / elapsed if elapsed else 0.0,
        "floor_pods_per_s": pods / floor_s if floor_s else 0.0,
        "cpu_ms_per_pod": cpu * 1e3 / max(pods, 1),
        "floor_cpu_ms_per_pod": floor_cpu * 1e3 / max(pods, 1),
        "load_generator_cpu_ms_per_pod": client_cpu * 1e3 / max(pods, 1),
        "rss_mb": rss_after / 2**20,
        "rss_growth_mb": (rss_after - rss_before) / 2**20,
        "filter_p50_first_quarter_ms": percentile(filters[:quarter], 0.5),
        "filter_p50_last_quarter_ms": percentile(filters[-quarter:], 0.5),
        "problems": problems,
        "server_bind_p50_ms": server_bind_p50,
    }
    if fake_cpu is not None:
        result["fake_api_cpu_ms_per_pod"] = fake_cpu * 1e3 / max(pods, 1)
    if mode == "cluster" and FAKE_WRITES:
        # A bind makes three writes (finalizer, status, Binding): the rest is the extender's.
        result["fake_write_p50_ms"] = FAKE_WRITES.pop()
    for verb in ("filter", "prioritize", "bind"):
        result[f"{verb}_p50_ms"] = percentile(loop.latency[verb], 0.5)
        result[f"{verb}_p99_ms"] = percentile(loop.latency[verb], 0.99)
        result[f"floor_{verb}_p50_ms"] = percentile(floor.latency[verb], 0.5)
    if loop.bind_errors:
        result["first_bind_errors"] = loop.bind_errors[:3]
    return result


def report(r: dict[str, Any]) -> str:
    ratio = r["floor_pods_per_s"] / r["pods_per_s"] if r["pods_per_s"] else float("inf")
    lines = [
        f"{r['mode']:8s} {r['nodes']:5d} nodes  {r['shape']:16s} {r['bound']:5d}/{r['pods']} bound "
        f"in {r['seconds']:6.2f} s: {r['pods_per_s']:7.1f} pods/s (floor {r['floor_pods_per_s']:7.1f}, "
        f"{ratio:4.1f}x)  cpu {r['cpu_ms_per_pod']:5.2f} ms/pod (floor {r['floor_cpu_ms_per_pod']:4.2f})  "
        f"rss {r['rss_mb']:6.1f} MB "
        f"(+{r['rss_growth_mb']:.1f})",
        "         "
        + "  ".join(
            f"{v} p50 {r[f'{v}_p50_ms']:6.2f} p99 {r[f'{v}_p99_ms']:6.2f} "
            f"(floor {r[f'floor_{v}_p50_ms']:5.2f})"
            for v in ("filter", "prioritize", "bind")
        )
        + f"  filter p50 first/last quarter {r['filter_p50_first_quarter_ms']:.2f}/"
        f"{r['filter_p50_last_quarter_ms']:.2f} ms"
        + (f"  fake API write p50 {r['fake_write_p50_ms']:.2f} ms" if "fake_write_p50_ms" in r else ""),
        f"         bind p50 inside the extender {r['server_bind_p50_ms']:.2f} ms (its histogram)"
        f"  cpu per pod: load generator {r['load_generator_cpu_ms_per_pod']:.2f} ms"
        + (
            f", fake API server {r['fake_api_cpu_ms_per_pod']:.2f} ms"
            if "fake_api_cpu_ms_per_pod" in r
            else ""
        ),
    ]
    if r["problems"] or r["bind_errors"] or r["unschedulable"]:
        lines.append(
            f"         unschedulable {r['unschedulable']}, bind errors {r['bind_errors']} "
            f"{r.get('first_bind_errors', '')}, PROBLEMS {r['problems'][:3]}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=["embedded", "cluster", "both"], default="both")
    parser.add_argument("--nodes", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES))
    parser.add_argument("--pods", type=int, default=2000, help="pods per run (capped by capacity)")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="embedded mode: sample the server's CPU during each loop (bench/profile.py) and print "
        "the share of each phase",
    )
    parser.add_argument(
        "--fixed-order",
        action="store_true",
        help="send the node names in the cluster's order for every pod, not in kube-scheduler's "
        "(a new order per pod: its filter lists nodes as its goroutines find them)",
    )
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    modes = ["embedded", "cluster"] if args.mode == "both" else [args.mode]
    results = []
    for mode in modes:
        for nodes in args.nodes:
            for shape in args.shapes:
                profile = args.profile / f"{mode}-{nodes}-{shape}.txt" if args.profile else None
                r = measure(mode, shape, nodes, args.pods, profile, args.fixed_order)
                print(report(r), flush=True)
                results.append(r)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if any(r["problems"] for r in results):
        raise SystemExit("consistency problems found (see PROBLEMS above)")


if __name__ == "__main__":
    main()
