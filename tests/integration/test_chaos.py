"""Chaos: two replicas on a short Lease, a scheduler loop, and a fault thread that freezes and
kills the leader at random moments while the API server loses answers and lags its watches.

A kube-scheduler-like loop sends each attempt (filter over every node, bind to a passing one,
up to 8 at once, 10 s per request as kube-scheduler's httpTimeout) to whichever replica is ready,
as a Service would. Pods use claims of their own, two claims, a claim shared by two pods, claims
made from templates (owned by the pod, named in its status) and extended resources a DeviceClass
backs (the bind creates their claim). The fault thread SIGSTOPs the leader for 0.5-4 s (at any
moment: mid-bind included) and SIGKILLs it (a new replica starts); the rest of its faults are
three of the API server's (tests/integration/test_bind_faults_stress.py), drawn per seed: lost
answers, refused writes, garbage, lagging, dropped or expired watches, a short outage. Then the faults stop, every replica runs, and the loop retries until no
unbound pod fits. On the fake API server's own store afterwards: no device in two claims, every
bound pod's claims allocated on its node and reserved for it, no claim of an unbound pod holding
devices, no request left unanswered (or its connection broken) by a replica that was neither
frozen nor killed, no answer that no fault explains (:data:`EXPECTED_BIND_ERRORS`), every
replica that was not killed still running, and no traceback in any replica's log.

``DRA_CHAOS_SEEDS`` runs more seeds (``DRA_CHAOS_SEEDS=5``); seeds that found a bug stay in
``REGRESSIONS``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.builders import claim, container, device, device_class, node, pod, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations
from tests.integration.servers import SHORT_LEASE, server_process
from tests.integration.test_bind_faults_stress import API_FAULTS, apply_api_fault, clear
from tests.integration.test_serve_cluster import kubeconfig, wait_until
from tests.service.fixtures import args_names, binding

NODES = [f"node-{i}" for i in range(6)]
ER = "example.com/gpu"
LEASE = [*SHORT_LEASE, "--cache-stale-after", "3"]
#: Seeds that once found a bug (none yet); run in every run, with the default seeds.
REGRESSIONS: list[int] = []
SEEDS = sorted({*REGRESSIONS, *range(1, 1 + int(os.environ.get("DRA_CHAOS_SEEDS", "2")))})
HTTP_TIMEOUT = 10.0
#: A Python traceback, printed or logged (the text log quotes it): never in a replica's log.
TRACEBACK = "Traceback (most recent call last)"

#: The bind errors this chaos explains (a verb's answer that matches none is recorded), each a
#: legitimate outcome of a fault the test injects; "" is a bind that completed. An internal
#: error or a traceback is never one, whatever it is wrapped in.
EXPECTED_BIND_ERRORS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (why, re.compile(pattern))
    for why, pattern in (
        # It stopped leading, or waits out a takeover, between the filter and the bind.
        ("fenced", r"^this dra-extender replica may not bind: "),
        # An earlier attempt bound it: its answer lost, or a frozen replica's bind ended late.
        ("already-bound", r"^pod is (already|being) bound to "),
        # A bind meanwhile took the devices the filter saw free.
        ("devices-taken", r"^cannot bind to \S+: "),
        # A write the API server refused (the injected 403/409/422/500/503, a conflict), lost or
        # answered with garbage; the writes made before it are released.
        ("api-fault", r"^binding pod to \S+ failed: "),
        # The Binding's answer was lost and the pod cannot be read back: its claims stay reserved.
        ("binding-outcome-unknown", r"^binding pod to \S+: outcome unknown "),
        # An earlier write's answer was lost, and the API server cannot say yet how it ended.
        ("earlier-write-unsettled", r"^an earlier write of resourceclaim \S+ .*is not settled: "),
        # Its watches lagged, were dropped or expired, or the API server was away.
        ("stale-cache", r"^the DRA extender's cache is stale "),
    )
)
UNEXPLAINED = re.compile(rf"internal error|{re.escape(TRACEBACK)}")


def unexpected_answer(status: int, body: str) -> str | None:
    """What is wrong with a verb's answer (None: nothing). A 503 is a replica that does not
    decide now (it stopped leading); any other status but 200 is a bug, as is a bind error
    :data:`EXPECTED_BIND_ERRORS` does not explain."""
    try:
        error = str(json.loads(body).get("Error") or "")
    except (ValueError, AttributeError):
        return f"{status} {body[:300]!r}"
    if status == 503 and error.startswith("this dra-extender replica does not decide now: "):
        return None
    if status != 200 or UNEXPLAINED.search(error):
        return f"{status} {error[:300]!r}"
    if error and not any(pattern.search(error) for _, pattern in EXPECTED_BIND_ERRORS):
        return f"{status} {error[:300]!r}"
    return None


def cluster() -> tuple[list[dict[str, Any]], list[str]]:
    """Objects, and the names of the pods to schedule (more of them than devices)."""
    objects: list[dict[str, Any]] = [device_class(), device_class("gpu", extended_resource=ER)]
    for name in NODES:
        devices = [device(f"d{i}") for i in range(4)]
        objects += [node(name), resource_slice(f"{name}-slice", devices, node=name, pool=name)]
    pods: list[dict[str, Any]] = []
    for i in range(14):
        objects.append(claim(f"c-single-{i}"))
        pods.append(pod(f"single-{i}", [f"c-single-{i}"]))
    for i in range(3):
        objects += [claim(f"c-double-{i}-a"), claim(f"c-double-{i}-b")]
        pods.append(pod(f"double-{i}", [f"c-double-{i}-a", f"c-double-{i}-b"]))
    for i in range(3):
        objects.append(claim(f"c-shared-{i}"))
        pods += [pod(f"share-{i}-x", [f"c-shared-{i}"]), pod(f"share-{i}-y", [f"c-shared-{i}"])]
    for i in range(5):
        owner = {"apiVersion": "v1", "kind": "Pod", "name": f"templ-{i}", "uid": f"uid-templ-{i}"}
        made = claim(f"templ-{i}-gpu-abcde")
        made["metadata"]["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
        made["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
        objects.append(made)
        pods.append(pod(f"templ-{i}", templates={"gpu": f"templ-{i}-gpu-abcde"}))
    for i in range(4):
        pods.append(pod(f"er-{i}", containers=[container("main", {ER: 1})]))
    return objects + pods, [p["metadata"]["name"] for p in pods]


@dataclass
class Replica:
    url: str
    process: subprocess.Popen[str]
    #: (from, to) monotonic windows when it was frozen, and when it was killed.
    frozen: list[tuple[float, float]] = field(default_factory=list)
    killed_at: float | None = None
    tracebacks: list[str] = field(default_factory=list)

    def ready(self) -> bool:
        if self.killed_at is not None:
            return False
        try:
            return httpx.get(self.url + "/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def alive(self) -> bool:
        return self.process.poll() is None

    def scan(self) -> list[str]:
        """The lines of its log that show a Python traceback, so far. :func:`server_process`
        keeps only its last 200 lines: :meth:`Scheduler.round` calls this after each round."""
        lines: list[str] = list(self.process.output_lines)  # type: ignore[attr-defined]
        for line in lines:
            if TRACEBACK in line and line.rstrip()[:500] not in self.tracebacks:
                self.tracebacks.append(line.rstrip()[:500])
        return self.tracebacks

    def excused(self, start: float, end: float) -> bool:
        """A request to it in [start, end] may go unanswered: it was frozen or killed meanwhile."""
        if self.killed_at is not None and self.killed_at <= end:
            return True
        return any(f <= end and start <= t for f, t in self.frozen)


class Replicas:
    def __init__(self, stack: contextlib.ExitStack, config: str) -> None:
        self.stack = stack
        self.config = config
        self.all: list[Replica] = []
        self.lock = threading.Lock()
        for _ in range(2):
            self.start()

    def start(self) -> Replica:
        command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
        url, process = self.stack.enter_context(
            server_process([*command, "--kubeconfig", self.config, *LEASE])
        )
        replica = Replica(url, process)
        with self.lock:
            self.all.append(replica)
        return replica

    def running(self) -> list[Replica]:
        with self.lock:
            return [r for r in self.all if r.killed_at is None]

    def leader(self) -> Replica | None:
        return next((r for r in self.running() if r.ready()), None)

    def thaw(self) -> None:
        for replica in self.running():
            with contextlib.suppress(ProcessLookupError):
                replica.process.send_signal(signal.SIGCONT)


class Scheduler:
    """kube-scheduler's loop: each attempt goes to the replica that is ready now."""

    def __init__(self, fake: FakeApiServer, replicas: Replicas, rng: random.Random) -> None:
        self.fake = fake
        self.replicas = replicas
        self.rng = rng
        self.hangs: list[str] = []
        #: Answers no fault explains (see :func:`unexpected_answer`).
        self.unexpected: list[str] = []
        #: (replica, from, to, what): connections broken without an answer; judged once the
        #: chaos is over, when every window the replica was frozen in is known.
        self.broken: list[tuple[Replica, float, float, str]] = []

    def schedule(self, name: str) -> bool:
        """One attempt; True when some node passed the filter."""
        replica = self.replicas.leader()
        if replica is None:
            return True  # nobody decides right now: try again
        spec = self.fake.get("Pod", name, "default")
        started = time.monotonic()
        try:
            with httpx.Client(base_url=replica.url, timeout=HTTP_TIMEOUT) as http:
                answer = http.post("/scheduler/filter", content=args_names(spec, NODES))
                if answer.status_code != 200:
                    self.judge(f"filter {name}", replica, answer)
                    return True  # refused (a replica that stopped leading): try again
                passing = answer.json()["NodeNames"] or []
                if not passing:
                    return False
                target = self.rng.choice(passing)
                answer = http.post("/scheduler/bind", content=binding(name, f"uid-{name}", target))
                self.judge(f"bind {name} to {target}", replica, answer)
            return True
        except httpx.TimeoutException:
            if not replica.excused(started, time.monotonic()):
                self.hangs.append(f"{name} on {replica.url}")
            return True
        except httpx.TransportError as exc:
            self.broken.append((replica, started, time.monotonic(), f"{name}: {exc!r}"))
            return True

    def judge(self, what: str, replica: Replica, answer: httpx.Response) -> None:
        wrong = unexpected_answer(answer.status_code, answer.text)
        if wrong is not None:
            self.unexpected.append(f"{what} on {replica.url}: {wrong}")

    def unexcused_breaks(self) -> list[str]:
        """Broken connections of a replica that was neither frozen nor killed meanwhile."""
        return [f"{what} on {r.url}" for r, start, end, what in self.broken if not r.excused(start, end)]

    def round(self, names: list[str]) -> list[bool]:
        with ThreadPoolExecutor(8) as pool:
            fits = list(pool.map(self.schedule, names))
        with self.replicas.lock:
            every = list(self.replicas.all)
        for replica in every:
            replica.scan()
        return fits

    def unbound(self, names: list[str]) -> list[str]:
        return [n for n in names if not self.fake.get("Pod", n, "default")["spec"].get("nodeName")]


#: Every run freezes and kills a leader at least once.
REQUIRED = ("freeze", "kill")


def chaos(
    fake: FakeApiServer, replicas: Replicas, rng: random.Random, stop: threading.Event, done: list[str]
) -> None:
    """Faults until ``stop``, each appended to ``done`` as it is made: the two of
    :data:`REQUIRED` first, a required one tried again while no leader is there to take it (a
    takeover that outlasts the wait on a loaded machine lost the freeze, 28 Nov)."""
    first = rng.sample(list(REQUIRED), 2)
    # Half the faults freeze or kill the leader; the rest are the API server's.
    kinds = ["freeze", "freeze", "kill", *rng.sample(API_FAULTS, 3)]
    while not stop.wait(rng.uniform(0.2, 0.8)):
        kind = first.pop() if first else rng.choice(kinds)
        leader = replicas.leader()
        if kind in ("freeze", "kill"):
            deadline = time.monotonic() + 8
            while leader is None and time.monotonic() < deadline and not stop.is_set():
                stop.wait(0.05)  # a takeover in progress: hit the next leader
                leader = replicas.leader()
            if leader is None:
                if kind in REQUIRED and kind not in done:
                    first.append(kind)
                continue
        done.append(kind)
        if kind == "freeze" and leader is not None:
            seconds = rng.uniform(0.5, 4.0)
            began = time.monotonic()
            leader.process.send_signal(signal.SIGSTOP)
            stop.wait(seconds)
            leader.process.send_signal(signal.SIGCONT)
            leader.frozen.append((began, time.monotonic()))
        elif kind == "kill" and leader is not None:
            leader.killed_at = time.monotonic()
            leader.process.send_signal(signal.SIGKILL)
            replicas.start()
        else:
            apply_api_fault(fake, kind, rng, stop)


def holding_devices_while_unbound(fake: FakeApiServer, unbound: list[str]) -> list[str]:
    """Claims allocated although every pod using them is unbound (after things settled)."""
    bound_users: dict[str, bool] = {}
    uses: dict[str, list[str]] = {}
    with fake.store.cond:
        pods = [o for (r, _, _), o in fake.store.objects.items() if r == "pods"]
        claims = [o for (r, _, _), o in fake.store.objects.items() if r == "resourceclaims"]
    for p in pods:
        name = p["metadata"]["name"]
        refs = [r.get("resourceClaimName") for r in p["spec"].get("resourceClaims") or []]
        refs += [s["resourceClaimName"] for s in (p.get("status") or {}).get("resourceClaimStatuses") or []]
        er = ((p.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        for c in [*refs, er]:
            if c:
                uses.setdefault(c, []).append(name)
                bound_users[c] = bound_users.get(c, False) or bool(p["spec"].get("nodeName"))
    out = []
    for c in claims:
        name = c["metadata"]["name"]
        if (c.get("status") or {}).get("allocation") and not bound_users.get(name, False):
            users = uses.get(name, [])
            if users and all(u in unbound for u in users):
                out.append(f"{name} (used by {', '.join(users)})")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_chaos_never_gives_a_device_twice_and_settles(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    objects, names = cluster()
    with FakeApiServer() as fake, contextlib.ExitStack() as stack:
        for obj in objects:
            fake.create(obj)
        replicas = Replicas(stack, kubeconfig(fake, tmp_path))
        stack.callback(replicas.thaw)
        wait_until(lambda: replicas.leader() is not None, timeout=30)
        scheduler = Scheduler(fake, replicas, rng)
        stop = threading.Event()
        injected: list[str] = []
        thread = threading.Thread(target=chaos, args=(fake, replicas, rng, stop, injected))
        thread.start()
        try:
            chaos_ends = time.monotonic() + 15
            # Until the 15 s are over or every pod is bound, and in any case (for at most 45 s
            # more) until the leader was frozen and killed: the run is judged on both.
            while (time.monotonic() < chaos_ends and scheduler.unbound(names)) or (
                not set(REQUIRED) <= set(injected) and time.monotonic() < chaos_ends + 45
            ):
                unbound = scheduler.unbound(names)
                if not unbound:
                    time.sleep(0.1)
                    continue
                scheduler.round(rng.sample(unbound, len(unbound)))
        finally:
            stop.set()
            thread.join()
            replicas.thaw()
        clear(fake)
        context = f"seed {seed}; chaos: {sorted(set(injected))}"
        assert set(REQUIRED) <= set(injected), context  # the leader was frozen and killed
        assert violations(fake, allow_unbound=set(names)) == [], context  # never a device twice
        wait_until(lambda: replicas.leader() is not None, timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not any(scheduler.round(scheduler.unbound(names))):
                break
            time.sleep(0.3)  # let the watches bring the last writes in
        unbound = scheduler.unbound(names)
        assert scheduler.hangs == [], context
        assert violations(fake) == [], context
        assert not any(scheduler.schedule(n) for n in unbound), f"{context}: pods that fit stay unbound"
        assert holding_devices_while_unbound(fake, unbound) == [], context
        assert len(names) - len(unbound) >= 20, context  # 24 devices: most pods got one
        assert scheduler.unexpected == [], context
        assert scheduler.unexcused_breaks() == [], context
        # Only a kill ends a replica (a frozen one is thawed), and none ever raised unhandled.
        assert [r.url for r in replicas.all if r.killed_at is None and not r.alive()] == [], context
        assert {r.url: r.scan() for r in replicas.all if r.scan()} == {}, context
