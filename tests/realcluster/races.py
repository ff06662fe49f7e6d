"""Issue 30's races with the real kube-scheduler, as scenarios measured in each mode.

The cluster: 10 nodes with 4 GPUs (one ResourceSlice each) and 4 CPUs; kube-controller-manager's
resourceclaim controller and garbage collector make and remove the template claims; a thread
plays the kubelet (tests/realcluster/kubelet.py: bound pods Running, Terminating pods gone
0.5 s after their deletion), and the pods have a real terminationGracePeriodSeconds, so that a
deleted pod goes through Terminating as in a real cluster.

Modes (:data:`MODES`): ``in-tree`` is kube-scheduler with the DynamicResources plugin;
``extender`` is the shipped configuration with dra-extender; ``extender --device-preemption``
the same with that flag (which falls back, with its warning, against a 1.36 API server).

Scenarios, each a function of the control plane and the mode returning its measurements:

- :func:`template_churn`: waves of pods, each with one ResourceClaimTemplate entry (1 GPU),
  created, bound, deleted, gone; ``delete_after``: the wave deleted that long after it was
  created (deletions mid-scheduling, :func:`deletions_mid_scheduling`).
- :func:`preemption`: every GPU held by a low-priority pod, then high-priority pods that need
  one GPU each (``cpu_coupled``: and one CPU, with the nodes CPU-full too); ``late_claims``:
  the high pods' claims come from templates, so they appear after the pods.

Every scenario checks the store's invariants afterwards (:func:`workload.store_violations`)
and, with the extender, the writes the API server refused (``ControlPlane.refused_writes``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.realcluster.api import Api
from tests.realcluster.components import Extender, Scheduler, extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.kubelet import Kubelet, playing_kubelet
from tests.realcluster.workload import (
    GPU_CLASS,
    PAUSE,
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
    priority_classes,
    store_violations,
)

IN_TREE = "in-tree"
EXTENDER = "extender"
DEVICE_PREEMPTION = "extender --device-preemption"
MODES = (IN_TREE, EXTENDER, DEVICE_PREEMPTION)

NAMESPACE = "default"
NODES = 10
GPUS_PER_NODE = 4
CPUS_PER_NODE = 4
#: A ResourceClaimTemplate asking one GPU of the class.
TEMPLATE = "one-gpu"
#: The pods' terminationGracePeriodSeconds: deletions go through Terminating.
GRACE = 30

WAVES = 4
WAVE_PODS = 40
HIGH_PODS = 4
#: Deletions mid-scheduling: a wave is deleted this long after it was created.
MID_SCHEDULING_DELETE_AFTER = 0.3

#: How a failed bind's text is classified (first match wins); anything else is "other". A pod
#: deleted while it was being bound comes first: its ``pods "name" not found`` is not a claim's.
BIND_FAILURE_REASONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pod-deleted", ("is being deleted", 'pods "', "pod not found")),
    # A claim the garbage collector removed while the bind wrote it (its pod was deleted): the
    # in-tree plugin's words, or the API server's 404 to the extender's write of a claim it had
    # read (so it existed).
    ("claim-deleted", ("got deleted in the meantime", 'resourceclaims.resource.k8s.io "')),
    ("claim-not-created", ("not created yet", "not found")),
    ("devices-in-use", ("in use", "does not fit", "cannot bind", "already allocated")),
)

#: FailedScheduling messages of a scheduling cycle that found no node ("0/10 nodes are
#: available: ..."). kube-scheduler 1.36 writes any other failure, a failed binding cycle among
#: them, as the error's own text: an extender's bind error verbatim (no prefix), the in-tree
#: plugins' as ``running PreBind plugin "DynamicResources": ...`` or ``running Bind plugin
#: "DefaultBinder": ...``.
NO_FIT_EVENT = re.compile(r"^\d+/\d+ nodes are available")


#: kube-scheduler's FailedScheduling for a pod it took from its queue after the pod's deletion:
#: no attempt was made, nothing failed.
SKIPPED_EVENT = "skip schedule deleting pod"


def is_bind_failure_event(message: str) -> bool:
    return not NO_FIT_EVENT.search(message) and not message.startswith(SKIPPED_EVENT)


def classify(text: str) -> str:
    lowered = text.lower()
    for reason, needles in BIND_FAILURE_REASONS:
        if any(n in lowered for n in needles):
            return reason
    return "other"


# --- the cluster --------------------------------------------------------------------------------


def build_cluster(
    plane: ControlPlane, *, nodes: int = NODES, gpus: int = GPUS_PER_NODE, cpus: int = CPUS_PER_NODE
) -> None:
    """The nodes, their GPUs, the class, the one-GPU template and the priority classes
    ``low`` (0) and ``high`` (1000), on an emptied API server."""
    api = plane.api
    names = [f"node-{i:02d}" for i in range(nodes)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda n: plane.add_node(n, cpu=str(cpus)), names))
    api.create(gpu_class())
    for name in names:
        api.create(gpu_slice(name, gpus=gpus))
    api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": TEMPLATE, "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": 1}}]
                    }
                }
            },
        }
    )
    priority_classes(api, low=0, high=1000)


def admin_api(plane: ControlPlane) -> Api:
    """A client of its own (the kubelet's thread and the test's must not share one)."""
    return Api(plane.url, ca=str(plane.certs.ca_file), cert=plane.certs.pair("admin"))


# --- what the extender decided --------------------------------------------------------------------


@dataclass
class Decisions:
    """The extender's /debug/decisions, polled while a scenario runs (it keeps the last 200)."""

    extender: Extender
    period: float = 0.2
    seen: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    #: Polls that found none of the decisions already seen in a full answer: some were missed.
    gaps: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    LIMIT = 200

    def poll(self) -> None:
        try:
            answer = self.extender.get(f"/debug/decisions?limit={self.LIMIT}")["decisions"]
        except Exception:  # the extender stopping, or busy past the timeout: the next poll
            return
        with self._lock:
            keys = [(d.get("time"), d.get("verb"), d.get("pod"), d.get("durationMs")) for d in answer]
            if self.seen and len(answer) >= self.LIMIT and not any(k in self.seen for k in keys):
                self.gaps += 1
            for key, decision in zip(keys, answer, strict=True):
                self.seen.setdefault(key, decision)

    def run(self) -> None:
        while not self._stop.wait(self.period):
            self.poll()

    def all(self) -> list[dict[str, Any]]:
        self.poll()
        with self._lock:
            return sorted(self.seen.values(), key=lambda d: float(d.get("time") or 0))

    def of(self, verb: str, pod: str | None = None) -> list[dict[str, Any]]:
        return [d for d in self.all() if d.get("verb") == verb and (pod is None or d.get("pod") == pod)]

    def stop(self) -> None:
        self._stop.set()


@contextlib.contextmanager
def recording(ext: Extender) -> Iterator[Decisions]:
    decisions = Decisions(ext)
    thread = threading.Thread(target=decisions.run, name="decisions", daemon=True)
    thread.start()
    try:
        yield decisions
    finally:
        decisions.stop()
        thread.join(10)


# --- kube-scheduler's view ------------------------------------------------------------------------


def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def schedule_attempts(sched: Scheduler) -> dict[str, float]:
    """``scheduler_schedule_attempts_total`` by result (scheduled, unschedulable, error), and
    ``scheduler_pod_scheduling_attempts``' count and sum (attempts of the pods bound)."""
    text = sched.metrics()
    out: dict[str, float] = {}
    for labels, value in metric_samples(text, "scheduler_schedule_attempts_total"):
        result = labels.get("result", "?")
        out[result] = out.get(result, 0.0) + value
    for suffix in ("count", "sum"):
        for _, value in metric_samples(text, f"scheduler_pod_scheduling_attempts_{suffix}"):
            out[f"pod_attempts_{suffix}"] = out.get(f"pod_attempts_{suffix}", 0.0) + value
    return dict(out)


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: round(v - before.get(k, 0.0), 3) for k, v in after.items() if v - before.get(k, 0.0)}


#: kube-scheduler (klog, --v=2) lines that end one scheduling attempt of a pod.
ATTEMPT_LINES = (
    "Successfully bound pod to node",
    "Unable to schedule pod; no fit; waiting",
    "Unable to schedule pod, pod is unschedulable",
    "Error scheduling pod; retrying",
)


def scheduler_attempts(log: str, pod: str) -> int:
    """Attempts of ``pod`` (``ns/name``) the scheduler's log reports as ended."""
    needle = f'pod="{pod}"'
    return sum(1 for line in log.splitlines() if needle in line and any(a in line for a in ATTEMPT_LINES))


#: The extender's line for each bind (INFO, WARNING when it failed), in its text log format.
EXTENDER_BIND_LINE = re.compile(r'dra_extender\.decisions: bind (\S+) .*? error=("(?:[^"\\]|\\.)*"|\S+)')


def extender_bind_errors(log: str, pods: Callable[[str], bool]) -> list[str]:
    """The errors of the extender's failed binds, of pods ``pods`` accepts (``ns/name``), from
    its log: every bind is logged there, while /debug/decisions keeps only the last 200
    decisions (filters included), fewer than a wave makes."""
    out = []
    for match in EXTENDER_BIND_LINE.finditer(log):
        if pods(match.group(1)):
            raw = match.group(2)
            out.append(str(json.loads(raw)) if raw.startswith('"') else raw)
    return out


def scheduler_bind_errors(log: str, pods: Callable[[str], bool]) -> list[str]:
    """The errors kube-scheduler logged for binding cycles that failed, of pods ``pods`` accepts."""
    out = []
    for line in log.splitlines():
        if "Error scheduling pod; retrying" not in line and "Failed to bind" not in line:
            continue
        match = re.search(r'pod="([^"]+)"', line)
        if match is None or not pods(match.group(1)):
            continue
        err = re.search(r'err="((?:[^"\\]|\\.)*)"', line)
        text = err.group(1).replace('\\"', '"') if err else line
        if "Bind plugin" in text or "PreBind plugin" in text or "binding" in text:
            out.append(text)
    return out


def failed_scheduling(api: Api, pods: Callable[[str], bool]) -> list[tuple[str, str, int]]:
    """(pod, message, count) of the FailedScheduling events of pods ``pods`` accepts (names).
    kube-scheduler's event recorder writes an event once and its second occurrence as a
    series of 2; later repeats reach the API server only every 30 minutes, so counts are a
    lower bound."""
    out = []
    for e in api.list("Event", NAMESPACE):
        if e.get("reason") != "FailedScheduling":
            continue
        name = str((e.get("involvedObject") or e.get("regarding") or {}).get("name"))
        if not pods(name):
            continue
        count = max(1, int(e.get("count") or 0), int((e.get("series") or {}).get("count") or 0))
        out.append((name, str(e.get("message") or e.get("note") or ""), count))
    return out


def extender_bind_failure_metric(ext: Extender | None) -> dict[str, float]:
    """``dra_extender_bind_failures_total`` by reason, the nonzero ones (an extender without
    that counter: none)."""
    if ext is None:
        return {}
    out: dict[str, float] = {}
    for labels, value in metric_samples(ext.metrics(), "dra_extender_bind_failures_total"):
        if value:
            reason = labels.get("reason", "?")
            out[reason] = out.get(reason, 0.0) + value
    return out


def extender_warnings(ext: Extender | None, limit: int = 3) -> list[str]:
    """The extender's distinct WARNING lines other than failed binds (``--device-preemption is
    off: the API server is 1.36`` ...), without their times."""
    if ext is None:
        return []
    out: list[str] = []
    for line in ext.log().splitlines():
        _, _, rest = line.partition(" WARNING ")
        if rest and "dra_extender.decisions:" not in rest and rest not in out:
            out.append(rest[:240])
    return out[:limit]


# --- a mode, running ----------------------------------------------------------------------------


@dataclass
class Running:
    mode: str
    plane: ControlPlane
    scheduler: Scheduler
    extender: Extender | None
    decisions: Decisions | None
    kubelet: Kubelet
    audit_from: int

    def refused_writes(self, deleted_pods: Collection[str] = ()) -> list[str]:
        """See :meth:`ControlPlane.refused_writes`."""
        if self.extender is None:
            return []
        return self.plane.refused_writes(self.audit_from, deleted_pods)


def extender_args(mode: str) -> tuple[str, ...] | None:
    """The extender's flags for ``mode``; None: the in-tree plugin, no extender."""
    if mode == IN_TREE:
        return None
    if mode == EXTENDER:
        return ()
    if mode.startswith(EXTENDER + " "):  # the extender with these flags ("extender --flag value")
        return tuple(mode.split()[1:])
    raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)}, or 'extender FLAGS...')")


@contextlib.contextmanager
def running(plane: ControlPlane, mode: str) -> Iterator[Running]:
    """kube-scheduler (and the extender) for ``mode``, the decisions recorded, the kubelet played."""
    args = extender_args(mode)
    audit_from = len(plane.audit_events())
    kubelet_api = admin_api(plane)
    with contextlib.ExitStack() as stack:
        stack.callback(kubelet_api.close)
        ext = stack.enter_context(extender(plane, *args)) if args is not None else None
        config = scheduler_config(plane.extender_kubeconfig(), extender_url=ext.url if ext else None)
        sched = stack.enter_context(scheduler(plane, config))
        decisions = stack.enter_context(recording(ext)) if ext is not None else None
        kubelet = stack.enter_context(playing_kubelet(kubelet_api))
        yield Running(mode, plane, sched, ext, decisions, kubelet, audit_from)


# --- helpers ------------------------------------------------------------------------------------


def create_all(api: Api, objects: Iterable[dict[str, Any]], workers: int = 8) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(api.create, objects))


def delete_pods(api: Api, names: Iterable[str], workers: int = 8) -> None:
    """Deleted as a user or controller deletes them: with the pod's own grace period."""
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda n: api.delete("Pod", n, NAMESPACE, grace=None), names))


def owned_claims(api: Api, prefix: str) -> list[dict[str, Any]]:
    """Claims made from templates for pods named ``prefix...`` (generateName ``<pod>-<entry>-``)."""
    return [c for c in api.list("ResourceClaim", NAMESPACE) if c["metadata"]["name"].startswith(prefix)]


def wait_until(check: Callable[[], bool], timeout: float, period: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(period)


def bind_failures(run: Running, pods: Callable[[str], bool]) -> tuple[list[str], list[str]]:
    """(the failed binds' errors, the FailedScheduling messages reporting a failed bind) of pods
    whose name ``pods`` accepts. With the extender, its decisions name every failed bind; with
    the in-tree plugin, kube-scheduler's log."""
    events = [
        m
        for _, m, count in failed_scheduling(run.plane.api, pods)
        for _ in range(count)
        if is_bind_failure_event(m)
    ]
    if run.extender is not None:
        errors = extender_bind_errors(run.extender.log(), lambda key: pods(key.partition("/")[2]))
    else:
        errors = scheduler_bind_errors(run.scheduler.log(), lambda key: pods(key.partition("/")[2]))
    return errors, events


# --- template churn -------------------------------------------------------------------------------


@dataclass
class ChurnResult:
    scenario: str
    mode: str
    waves: int
    pods_per_wave: int
    #: Per wave: seconds from the first create to every pod bound (churn; None: not all bound).
    bind_seconds: list[float | None]
    #: Per wave: seconds from the first create to every pod and claim of the wave gone.
    wave_seconds: list[float]
    #: Per wave: pods bound when the wave was deleted.
    bound_when_deleted: list[int]
    failed_binds: int
    failed_binds_by_reason: dict[str, int]
    #: FailedScheduling events whose message reports a failed bind (a lower bound: see
    #: :func:`failed_scheduling`).
    failed_bind_events: int
    failed_bind_samples: list[str]
    #: Pods never bound within the wave's timeout (churn only), and pods or claims of a wave
    #: still there when it should be gone.
    stuck_pods: int
    leftover_claims: int
    violations: list[str]
    refused_writes: list[str]
    schedule_attempts: dict[str, float]
    decision_gaps: int = 0
    #: The extender's own count of its failed binds by reason, where it has one.
    bind_failure_metric: dict[str, float] = field(default_factory=dict)
    #: The extender's warnings (see :func:`extender_warnings`).
    warnings: list[str] = field(default_factory=list)


def template_churn(
    plane: ControlPlane,
    mode: str,
    *,
    waves: int = WAVES,
    pods: int = WAVE_PODS,
    delete_after: float | None = None,
    bind_timeout: float = 60.0,
    gone_timeout: float = 60.0,
) -> ChurnResult:
    """Waves of ``pods`` pods with one template entry each (1 GPU): create them, wait until all
    are bound (``delete_after``: instead, delete them that long after creating them), delete
    them, wait until they and their claims are gone. The claims come from the real
    resourceclaim controller."""
    build_cluster(plane)
    api = plane.api
    scenario = "template churn" if delete_after is None else "deletions mid-scheduling"
    bind_seconds: list[float | None] = []
    wave_seconds: list[float] = []
    bound_when_deleted: list[int] = []
    stuck = leftover = 0
    violations: list[str] = []
    with running(plane, mode) as run:
        before = schedule_attempts(run.scheduler)
        for wave in range(waves):
            prefix = f"w{wave}-"
            names = [f"{prefix}{i:02d}" for i in range(pods)]
            started = time.monotonic()
            create_all(api, [pod_with_claims(n, templates={"gpu": TEMPLATE}, grace=GRACE) for n in names])
            if delete_after is None:
                placed = wait_until(functools.partial(all_bound, api, prefix, pods), bind_timeout)
                bind_seconds.append(round(time.monotonic() - started, 2) if placed else None)
                if not placed:
                    stuck += pods - bound_count(api, prefix)
            else:
                time.sleep(delete_after)  # from the last create on: some bind, some do not
            bound_when_deleted.append(bound_count(api, prefix))
            delete_pods(api, names)

            def gone(prefix: str = prefix) -> bool:
                return not pods_named(api, prefix) and not owned_claims(api, prefix)

            if not wait_until(gone, gone_timeout, period=0.2):
                stuck += len(pods_named(api, prefix))
                leftover += len(owned_claims(api, prefix))
            wave_seconds.append(round(time.monotonic() - started, 2))
            violations += [f"wave {wave}: {v}" for v in store_violations(api)]
        attempts = delta(schedule_attempts(run.scheduler), before)
        errors, events = bind_failures(run, lambda name: name.startswith("w"))
        refused = run.refused_writes()
        gaps = run.decisions.gaps if run.decisions else 0
        metric = extender_bind_failure_metric(run.extender)
        warnings = extender_warnings(run.extender)
    return ChurnResult(
        scenario=scenario,
        mode=mode,
        waves=waves,
        pods_per_wave=pods,
        bind_seconds=bind_seconds,
        wave_seconds=wave_seconds,
        bound_when_deleted=bound_when_deleted,
        failed_binds=len(errors),
        failed_binds_by_reason=dict(Counter(classify(e) for e in errors)),
        failed_bind_events=len(events),
        failed_bind_samples=sorted(set(errors) | set(events))[:5],
        stuck_pods=stuck,
        leftover_claims=leftover,
        violations=violations,
        refused_writes=refused,
        schedule_attempts=attempts,
        decision_gaps=gaps,
        bind_failure_metric=metric,
        warnings=warnings,
    )


def deletions_mid_scheduling(plane: ControlPlane, mode: str, **kw: Any) -> ChurnResult:
    """Template churn with each wave deleted 0.3 s after it was created."""
    return template_churn(plane, mode, delete_after=MID_SCHEDULING_DELETE_AFTER, **kw)


def pods_named(api: Api, prefix: str) -> list[dict[str, Any]]:
    return [p for p in api.list("Pod", NAMESPACE) if p["metadata"]["name"].startswith(prefix)]


def all_bound(api: Api, prefix: str, count: int) -> bool:
    return bound_count(api, prefix) >= count


def bound_count(api: Api, prefix: str) -> int:
    return sum(1 for p in pods_named(api, prefix) if p["spec"].get("nodeName"))


# --- preemption -------------------------------------------------------------------------------------


@dataclass
class PreemptionResult:
    scenario: str
    mode: str
    cpu_coupled: bool
    late_claims: bool
    #: Per high pod: seconds from its claims existing to bound (None: not bound in time).
    seconds_to_bind: dict[str, float | None]
    #: Low-priority pods deleted (gone or Terminating), and their names.
    victims: int
    victim_names: list[str]
    #: Per high pod: the extender's filter decisions, and attempts kube-scheduler's log ended.
    filter_attempts: dict[str, int]
    scheduler_attempts: dict[str, int]
    #: kube-scheduler's metrics over the high pods' phase (see :func:`schedule_attempts`).
    schedule_attempts: dict[str, float]
    failed_binds: int
    failed_binds_by_reason: dict[str, int]
    #: The high pods' FailedScheduling messages (distinct, shortened).
    events: list[str]
    #: Low pods not all bound before the high ones came (the scenario did not start as meant).
    low_unbound: int
    violations: list[str]
    refused_writes: list[str]
    decision_gaps: int = 0
    #: The extender's own count of its failed binds by reason, where it has one.
    bind_failure_metric: dict[str, float] = field(default_factory=dict)
    #: The extender's warnings (see :func:`extender_warnings`).
    warnings: list[str] = field(default_factory=list)

    @property
    def stuck(self) -> int:
        return sum(1 for s in self.seconds_to_bind.values() if s is None)

    @property
    def shape(self) -> str:
        return "gpu+cpu" if self.cpu_coupled else "gpu-only"


def cpu_containers(cpu: str | None) -> list[dict[str, Any]]:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    return [{"name": "main", "image": PAUSE, "resources": resources}]


def preemption(
    plane: ControlPlane,
    mode: str,
    *,
    cpu_coupled: bool = False,
    late_claims: bool = False,
    high_pods: int = HIGH_PODS,
    bind_timeout: float = 30.0,
    fill_timeout: float = 90.0,
) -> PreemptionResult:
    """Every GPU held by a low-priority pod with a claim of its own (``cpu_coupled``: and one
    CPU each, so the nodes are CPU-full too); then ``high_pods`` high-priority pods needing one
    GPU each (and one CPU), with claims of their own created before them, or (``late_claims``)
    from the template, made by the resourceclaim controller after the pod."""
    build_cluster(plane)
    api = plane.api
    total = NODES * GPUS_PER_NODE
    cpu = "1" if cpu_coupled else None
    shape = "gpu+cpu" if cpu_coupled else "gpu-only"
    scenario = f"preemption {shape}" + (", claims created late" if late_claims else "")
    low = [f"low-{i:02d}" for i in range(total)]
    high = [f"high-{i}" for i in range(high_pods)]
    with running(plane, mode) as run:
        create_all(api, [one_gpu_claim(n) for n in low])
        create_all(
            api,
            [
                pod_with_claims(n, [n], priority_class="low", containers=cpu_containers(cpu), grace=GRACE)
                for n in low
            ],
        )
        wait_until(lambda: bound_count(api, "low-") >= total, fill_timeout, period=0.2)
        low_unbound = total - bound_count(api, "low-")
        # The kubelet has marked them Running (it does so within a round or two).
        wait_until(lambda: len(run.kubelet.started) >= total - low_unbound, 10.0)
        before = schedule_attempts(run.scheduler)
        if not late_claims:
            create_all(api, [one_gpu_claim(n) for n in high])
        claims_at: dict[str, float] = {}
        bound_at: dict[str, float] = {}
        uids: dict[str, str] = {}
        for n in high:
            created = api.create(
                pod_with_claims(
                    n,
                    [] if late_claims else [n],
                    templates={"gpu": TEMPLATE} if late_claims else None,
                    priority_class="high",
                    containers=cpu_containers(cpu),
                    grace=GRACE,
                )
            )
            uids[n] = str(created["metadata"]["uid"])
            if not late_claims:
                claims_at[n] = time.monotonic()  # its claim was there before it
        deadline = time.monotonic() + bind_timeout
        while time.monotonic() < deadline and len(bound_at) < high_pods:
            now = time.monotonic()
            if late_claims:
                owners = {
                    ref.get("uid")
                    for c in api.list("ResourceClaim", NAMESPACE)
                    for ref in c["metadata"].get("ownerReferences") or []
                }
                for n, uid in uids.items():
                    if uid in owners:
                        claims_at.setdefault(n, now)
            for p in pods_named(api, "high-"):
                if p["spec"].get("nodeName"):
                    bound_at.setdefault(p["metadata"]["name"], now)
            # Claims first seen no later than the bind they made possible.
            for n in bound_at:
                claims_at.setdefault(n, bound_at[n])
            time.sleep(0.1)
        # Evictions that come late (after the last bind, or after giving up) are victims too.
        time.sleep(2.0)
        remaining = {
            p["metadata"]["name"]
            for p in pods_named(api, "low-")
            if not p["metadata"].get("deletionTimestamp")
        }
        victims = sorted(set(low) - remaining)
        log = run.scheduler.log()
        attempts = delta(schedule_attempts(run.scheduler), before)
        filters = {
            n: len(run.decisions.of("filter", f"{NAMESPACE}/{n}")) if run.decisions else 0 for n in high
        }
        errors, _ = bind_failures(run, lambda name: name.startswith("high-"))
        events = sorted({m for _, m, _ in failed_scheduling(api, lambda name: name.startswith("high-"))})
        refused = run.refused_writes()
        gaps = run.decisions.gaps if run.decisions else 0
        metric = extender_bind_failure_metric(run.extender)
        warnings = extender_warnings(run.extender)
    # The victims are gone and their claims released once the kubelet and the controller are
    # done; the invariants are checked on that store.
    wait_until(lambda: not any(p["metadata"].get("deletionTimestamp") for p in pods_named(api, "low-")), 10.0)
    return PreemptionResult(
        scenario=scenario,
        mode=mode,
        cpu_coupled=cpu_coupled,
        late_claims=late_claims,
        seconds_to_bind={
            n: round(bound_at[n] - claims_at[n], 2) if n in bound_at and n in claims_at else None
            for n in high
        },
        victims=len(victims),
        victim_names=victims,
        filter_attempts=filters,
        scheduler_attempts={n: scheduler_attempts(log, f"{NAMESPACE}/{n}") for n in high},
        schedule_attempts=attempts,
        failed_binds=len(errors),
        failed_binds_by_reason=dict(Counter(classify(e) for e in errors)),
        events=events[:6],
        low_unbound=low_unbound,
        violations=store_violations(api),
        refused_writes=refused,
        decision_gaps=gaps,
        bind_failure_metric=metric,
        warnings=warnings,
    )


# --- the scenarios by name ---------------------------------------------------------------------------

Scenario = Callable[[ControlPlane, str], "ChurnResult | PreemptionResult"]

SCENARIOS: dict[str, Scenario] = {
    "template-churn": lambda plane, mode: template_churn(plane, mode),
    "deletions-mid-scheduling": lambda plane, mode: deletions_mid_scheduling(plane, mode),
    "preemption-gpu": lambda plane, mode: preemption(plane, mode),
    "preemption-gpu-late-claims": lambda plane, mode: preemption(plane, mode, late_claims=True),
    "preemption-gpu-cpu": lambda plane, mode: preemption(plane, mode, cpu_coupled=True),
    "preemption-gpu-cpu-late-claims": lambda plane, mode: preemption(
        plane, mode, cpu_coupled=True, late_claims=True
    ),
}


def median(values: Iterable[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return round(statistics.median(found), 2) if found else None
