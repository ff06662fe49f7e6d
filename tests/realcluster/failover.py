"""Failover under load on the real control plane (issue 40, item 2).

The real kube-scheduler drives a burst of pods (one ResourceClaim of one GPU each, every one of
them fits) while the member that leads is killed (SIGKILL), frozen (SIGSTOP, then thawed after
a successor binds) and cut off from kube-apiserver (its traffic held at a proxy, then let go),
one fault after another as the burst goes on. Two deployments, each as manifests/ ships it with
its store fence installed:

- **standalone** (manifests/standalone/): two dra-extender replicas with ``--leader-elect`` on
  the ``dra-extender`` Lease, pod-bound tokens of their own pods, behind one address that follows
  readiness (:class:`ReadyService`, the Service: the endpoints controller and kube-proxy send new
  connections to ready pods only); one kube-scheduler calls that address.
- **sidecar** (manifests/): two pods, each a kube-scheduler with leader election on its own
  Lease and a dra-extender beside it on localhost, both with the pod's token; each
  kube-scheduler sees its pod's name as host name (a UTS namespace of its own), so its Lease
  identity names the pod, as the sidecar's store fence expects.

A killed member is replaced by a new one (the ReplicaSet's new pod); a frozen or cut-off
standalone replica stays, and must stand down by itself; a sidecar kube-scheduler that lost its
Lease exits (as it does in a pod, to be restarted), so that pair is replaced too.

Reported per fault: the seconds from the fault until another member leads, and until the first
bind after that. Checked afterwards: every pod bound, the store's invariants (no device twice, no
claim reserved for a pod that is not bound), every write the API server refused was the fence's,
and every member neither killed nor replaced is alive with no traceback in its log.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from tests.realcluster.bind_watch import BindWatch
from tests.realcluster.components import Extender, Scheduler, scheduler_config
from tests.realcluster.controlplane import (
    EXTENDER_ACCOUNT,
    EXTENDER_NAMESPACE,
    STANDALONE_ACCOUNT,
    ControlPlane,
    standalone_fence,
)
from tests.realcluster.proxy import Proxy
from tests.realcluster.workload import gpu_class, gpu_slice, one_gpu_claim, pod_with_claims, store_violations

STANDALONE = "standalone"
SIDECAR = "sidecar"
FAULTS = ("kill", "freeze", "partition")
#: The standalone replicas' election, shortened from the shipped defaults (15 s lease) to keep
#: the suite short; the takeover waits 2 s + --api-timeout more for the old leader's writes.
STANDALONE_ELECTION = (
    "--leader-elect",
    f"--leader-elect-namespace={EXTENDER_NAMESPACE}",
    "--leader-elect-name=dra-extender",
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
    "--api-timeout=3",
)
#: kube-scheduler's election in the sidecar runs, shortened the same way (the shipped
#: configuration keeps kube-scheduler's defaults: 15 s, 10 s, 2 s).
SCHEDULER_ELECTION = {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "1s"}
SCHEDULER_LEASE = "dra-extender-scheduler"
#: What the store fence's refusals say (manifests/*/leader-fence.yaml).
FENCE_REFUSAL = "dra-extender: not the leader"


def abandoned(refused: str) -> bool:
    """A write kube-apiserver answered 504 because its own timeout (the ``timeout=`` the
    extender sends) ran out before it was done: held on the way, it came too late to be made."""
    return ": 504 " in refused and "context canceled" in refused


def written(refused: str) -> str:
    """``update /apis/.../namespaces/ns/resourceclaims/name/status?...: 403 ...`` -> the verb and
    the resource: ``update resourceclaims/status``."""
    verb, _, rest = refused.partition(" ")
    parts = rest.split("?")[0].split(":")[0].split("/")
    if "namespaces" in parts:
        parts = parts[parts.index("namespaces") + 2 :]
    resource = "/".join([parts[0], *parts[2:]]) if parts else "?"
    return f"{verb} {resource}"


def ready(replica: Extender) -> bool:
    """Its /readyz answers 200: the Service would send it connections."""
    try:
        return httpx.get(f"{replica.ops_url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def standing_by(replica: Extender) -> bool:
    try:
        return "standby" in httpx.get(f"{replica.ops_url}/readyz", timeout=1).text
    except httpx.HTTPError:
        return False


class ReadyService:
    """One address in front of the standalone replicas: each new connection goes to a replica
    whose /readyz answers 200, looked at every ``period`` seconds; with none ready it is closed
    at once. Connections already made stay where they are (kube-proxy does not move them either).
    """

    def __init__(self, members: Callable[[], list[Extender]], period: float = 0.25) -> None:
        self.members = members
        self.period = period
        self._ready: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._proxy = Proxy(lambda: self._ready[0] if self._ready else None)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._proxy.port}"

    def __enter__(self) -> ReadyService:
        self._look()
        threading.Thread(target=self._follow, name="service-endpoints", daemon=True).start()
        self._proxy.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proxy.__exit__(None, None, None)

    def _look(self) -> None:
        found = []
        for e in list(self.members()):
            if e.url and e.ops_url and ready(e):
                host, _, port = e.url.removeprefix("http://").partition(":")
                found.append((host, int(port)))
        self._ready = found

    def _follow(self) -> None:
        while not self._stop.wait(self.period):
            self._look()


class Member(Protocol):
    """A replica (standalone) or a kube-scheduler + extender pod (sidecar)."""

    name: str
    extender: Extender

    def leading(self) -> bool: ...
    def signal(self, sig: signal.Signals) -> None: ...
    def partition(self, cut: bool) -> None: ...
    def gone_by_itself(self) -> bool: ...
    def stop(self) -> None: ...


class Pod:
    """What a member shares: a Pod object its token is bound to (the fence reads its name) and a
    proxy all its traffic to kube-apiserver goes through (a partition holds it there)."""

    def __init__(self, plane: ControlPlane, name: str, account: str) -> None:
        self.plane = plane
        self.name = name
        self.pod = plane.replica_pod(name, account)
        token = plane.token(EXTENDER_NAMESPACE, account, pod=self.pod)
        self.proxy = Proxy(plane.port).__enter__()
        self.kubeconfig = plane.kubeconfig(name, token=token)
        self.kubeconfig.write_text(self.kubeconfig.read_text().replace(plane.url, self.proxy.url))

    def partition(self, cut: bool) -> None:
        if cut:
            self.proxy.hold()
        else:
            self.proxy.release()

    def remove(self) -> None:
        self.proxy.__exit__(None, None, None)
        self.plane.api.delete("Pod", self.name, EXTENDER_NAMESPACE)


class Replica(Pod):
    def __init__(self, plane: ControlPlane, name: str) -> None:
        super().__init__(plane, name, STANDALONE_ACCOUNT)
        self.extender = Extender(
            plane, *STANDALONE_ELECTION, name=name, kubeconfig=self.kubeconfig, env={"POD_NAME": name}
        ).start(ready=False)

    def leading(self) -> bool:
        return ready(self.extender)

    def signal(self, sig: signal.Signals) -> None:
        self.extender.process.signal(sig)

    def gone_by_itself(self) -> bool:
        return False  # a deposed replica stays, as a standby

    def stop(self) -> None:
        self.extender.stop()
        self.remove()


class Pair(Pod):
    def __init__(self, plane: ControlPlane, name: str) -> None:
        super().__init__(plane, name, EXTENDER_ACCOUNT)
        self.extender = Extender(
            plane, name=f"{name}-extender", kubeconfig=self.kubeconfig, env={"POD_NAME": name}
        ).start()
        config = scheduler_config(self.kubeconfig, extender_url=self.extender.url, leader_elect=True)
        config["leaderElection"].update(SCHEDULER_ELECTION)
        self.scheduler = Scheduler(plane, config, name=f"{name}-scheduler", hostname=name).start()

    def leading(self) -> bool:
        lease = self.plane.api.get("Lease", SCHEDULER_LEASE, EXTENDER_NAMESPACE) or {}
        holder = str((lease.get("spec") or {}).get("holderIdentity") or "")
        return self.scheduler.process.alive() and holder.startswith(self.name + "_")

    def signal(self, sig: signal.Signals) -> None:
        self.scheduler.process.signal(sig)
        self.extender.process.signal(sig)

    def gone_by_itself(self) -> bool:
        return not self.scheduler.process.alive()  # lost its Lease: kube-scheduler exits

    def stop(self) -> None:
        self.scheduler.stop()
        self.extender.stop()
        self.remove()


@dataclass
class FaultRecord:
    kind: str
    member: str
    #: Pods created and pods bound when the fault came.
    at_created: int
    at_bound: int
    #: Seconds from the fault until another member led (None: none did in time).
    leader_after: float | None = None
    #: Seconds from the fault until the first bind after another member led.
    next_bind_after: float | None = None


@dataclass
class FailoverResult:
    deployment: str
    pods: int
    bound: int = 0
    seconds: float = 0.0
    faults: list[FaultRecord] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    #: Writes the API server refused: by the fence; answered 504 because their sender had given
    #: up before they arrived (a cut-off member's held requests, let go); and otherwise.
    fenced: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)
    refused_otherwise: list[str] = field(default_factory=list)
    #: Members that should be alive and are not, or logged a traceback.
    member_problems: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k not in ("faults", "fenced", "abandoned")}
        out["fenced"], out["abandoned"] = len(self.fenced), len(self.abandoned)
        # "update resourceclaims/status": how many of each write the fence refused.
        out["fenced_writes"] = dict(Counter(written(r) for r in self.fenced))
        out["faults"] = [vars(f) for f in self.faults]
        return out


class Members:
    """The deployment's members, a new one started when one is replaced."""

    def __init__(self, plane: ControlPlane, deployment: str) -> None:
        self.plane = plane
        self.kind: type[Replica] | type[Pair] = Replica if deployment == STANDALONE else Pair
        self.prefix = "fo-r" if deployment == STANDALONE else "fo-p"
        self.all: list[Replica | Pair] = []
        self.retired: list[Replica | Pair] = []
        self._count = 0

    def start(self) -> Replica | Pair:
        member = self.kind(self.plane, f"{self.prefix}{self._count}")
        self._count += 1
        self.all.append(member)
        return member

    def extenders(self) -> list[Extender]:
        return [m.extender for m in self.all]

    def leader(self) -> Replica | Pair | None:
        leaders = [m for m in self.all if m.leading()]
        return leaders[0] if len(leaders) == 1 else None

    def replace(self, member: Replica | Pair) -> None:
        self.all.remove(member)
        self.retired.append(member)
        member.stop()
        self.start()

    def stop(self) -> None:
        for m in self.all:
            m.stop()


def wait_for(check: Callable[[], Any], timeout: float, period: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(period)
    return None


def build(plane: ControlPlane, nodes: int, gpus: int, pods: int) -> None:
    """The nodes, their GPUs and one claim per pod to come."""
    api = plane.api
    api.create(gpu_class())
    names = [f"fo-node-{i:03d}" for i in range(nodes)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(plane.add_node, names))
        list(pool.map(lambda n: api.create(gpu_slice(n, gpus=gpus)), names))
        list(pool.map(lambda i: api.create(one_gpu_claim(f"fo-{i:03d}")), range(pods)))


class Arrivals:
    """The burst's pods, created at ``rate`` a second on a thread of their own (with a claim
    made beforehand each): the faults come while pods keep arriving and others wait.

    ``stops``: arrival counts at which the thread waits until :meth:`go_on` (a fault has been
    injected), so every fault comes while pods are still to arrive, however long the previous
    fault's recovery took: on a loaded machine, or a release whose components start slower, a
    sidecar pair's replacement outlasted the burst and the last fault came after every pod was
    bound (1.34, 1.35 and a loaded 1.36 run, 28 Nov)."""

    def __init__(
        self, plane: ControlPlane, pods: int, rate: float, stops: tuple[int, ...] = (), wait: float = 180.0
    ) -> None:
        self.plane, self.pods, self.rate = plane, pods, rate
        self.created = 0
        self._stops = {at: threading.Event() for at in stops}
        self._wait = wait
        self._thread = threading.Thread(target=self._run, name="arrivals", daemon=True)

    def go_on(self, at: int) -> None:
        """Arrivals may pass the stop at ``at``."""
        self._stops[at].set()

    def _run(self) -> None:
        api, started = self.plane.api, time.monotonic()
        for i in range(self.pods):
            stop = self._stops.get(i)
            if stop is not None:
                paused = time.monotonic()
                stop.wait(self._wait)
                started += time.monotonic() - paused  # the rate resumes from here
            time.sleep(max(0.0, started + i / self.rate - time.monotonic()))
            api.create(pod_with_claims(f"fo-{i:03d}", [f"fo-{i:03d}"]))
            self.created += 1

    def __enter__(self) -> Arrivals:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join()


def inject(fault: str, leader: Replica | Pair) -> None:
    if fault == "kill":
        leader.signal(signal.SIGKILL)
    elif fault == "freeze":
        leader.signal(signal.SIGSTOP)
    else:
        leader.partition(True)


def recover(fault: str, member: Replica | Pair, members: Members) -> None:
    """What follows the fault once a successor binds: a killed member is replaced; a frozen one
    is thawed, a cut-off one reconnected, and then stands down (standalone) or exits and is
    replaced (sidecar)."""
    if fault == "kill":
        members.replace(member)
        return
    time.sleep(1.0)  # the successor binds on; then the old leader wakes or its network heals
    if fault == "freeze":
        member.signal(signal.SIGCONT)
    else:
        member.partition(False)
    if isinstance(member, Pair):
        wait_for(member.gone_by_itself, 30)
        members.replace(member)
    else:
        wait_for(lambda: not member.leading() and standing_by(member.extender), 30)


@contextlib.contextmanager
def deployment(plane: ControlPlane, kind: str) -> Iterator[Members]:
    """The members, the first leading; for the standalone one, kube-scheduler calling them
    through the Service (each sidecar member has its own)."""
    members = Members(plane, kind)
    with contextlib.ExitStack() as stack:
        if kind == STANDALONE:
            stack.enter_context(standalone_fence(plane))
        stack.callback(members.stop)
        first = members.start()
        if not wait_for(first.leading, 60):
            raise RuntimeError(f"{first.name} did not lead:\n{first.extender.process.tail()}")
        members.start()
        if kind != STANDALONE:
            yield members
            return
        service = stack.enter_context(ReadyService(members.extenders))
        config = scheduler_config(plane.extender_kubeconfig(), extender_url=service.url)
        sched = Scheduler(plane, config, name="fo-kube-scheduler").start()
        stack.callback(sched.stop)
        yield members


def member_problems(members: Members) -> list[str]:
    out = []
    for m in members.all:
        for process, what in ((m.extender.process, "extender"), *scheduler_of(m)):
            if not process.alive():
                out.append(f"{m.name} {what} is not running:\n{process.tail(20)}")
        if "Traceback" in m.extender.log():
            out.append(f"{m.name} extender logged a traceback:\n{m.extender.process.tail(40)}")
    for m in members.retired:
        if "Traceback" in m.extender.log():
            out.append(f"{m.name} (replaced) extender logged a traceback:\n{m.extender.process.tail(40)}")
    return out


def scheduler_of(member: Replica | Pair) -> list[tuple[Any, str]]:
    return [(member.scheduler.process, "kube-scheduler")] if isinstance(member, Pair) else []


def one_fault(fault: str, members: Members, watch: BindWatch, arrivals: Arrivals, due: int) -> FaultRecord:
    """``fault`` to the leader, timed until a successor leads and binds; then its recovery.
    Arrivals wait at ``due`` until it is injected."""
    # A snapshot can catch no leader: Replica.leading asks /readyz, which a loaded machine may
    # answer late, and a Lease just taken over is renewed by its new holder within seconds.
    leader = wait_for(members.leader, 15)
    if leader is None:
        arrivals.go_on(due)
        raise RuntimeError(f"no single leader before the {fault}")
    record = FaultRecord(fault, leader.name, arrivals.created, len(watch.bound))
    at = time.monotonic()
    inject(fault, leader)
    arrivals.go_on(due)
    if wait_for(lambda: any(m.leading() for m in members.all if m is not leader), 60):
        led = time.monotonic()
        record.leader_after = round(led - at, 2)
        bind = wait_for(lambda: watch.first_bind_after(led), 60, 0.05)
        if bind is not None:
            record.next_bind_after = round(bind - at, 2)
    recover(fault, leader, members)
    return record


def failover(
    plane: ControlPlane,
    kind: str,
    *,
    nodes: int = 100,
    gpus: int = 8,
    pods: int = 800,
    rate: float = 12.0,
    faults: tuple[str, ...] = FAULTS,
    settle_timeout: float = 180.0,
) -> FailoverResult:
    """``pods`` arriving at ``rate`` a second, with ``faults`` one after another at even shares
    of the arrivals (each once the previous one is recovered from; see the module)."""
    build(plane, nodes, gpus, pods)
    result = FailoverResult(kind, pods)
    audit_from = len(plane.audit_events())
    watch = BindWatch(plane)
    started = time.monotonic()
    try:
        dues = tuple(pods * (i + 1) // (len(faults) + 1) for i in range(len(faults)))
        with (
            deployment(plane, kind) as members,
            Arrivals(plane, pods, rate, dues, settle_timeout) as arrivals,
        ):
            for fault, due in zip(faults, dues, strict=True):
                wait_for(lambda: arrivals.created >= due, settle_timeout, 0.05)  # noqa: B023
                result.faults.append(one_fault(fault, members, watch, arrivals, due))
            wait_for(lambda: len(watch.bound) >= pods, settle_timeout, 0.2)
            time.sleep(3.0)  # late writes (held ones let go) are answered
            result.bound = len(watch.bound)
            result.seconds = round(time.monotonic() - started, 1)
            result.member_problems = member_problems(members)
    finally:
        watch.close()
    result.violations = store_violations(plane.api)
    for refused in plane.refused_writes(audit_from):
        if FENCE_REFUSAL in refused:
            result.fenced.append(refused)
        elif abandoned(refused):
            result.abandoned.append(refused)
        else:
            result.refused_otherwise.append(refused)
    return result
