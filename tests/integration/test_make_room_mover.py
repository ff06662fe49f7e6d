"""The make-room mover (issue 52) through the whole service: ``dra-extender serve --kubeconfig
--make-room`` as a process against the fake API server, whose ``pods/eviction`` honours
PodDisruptionBudgets and whose garbage collector deletes (and first releases) a claim its
deleted pod owned, as kube-controller-manager does. The test plays kube-scheduler: the filter
verb (which asks the background planner), then filter and bind again once room is made.

The cluster: node-1 has 2 GPUs, one held by ``mover`` (a ReplicaSet's, Running and Ready,
its claim its own); node-2 has 1, free. ``trainer`` (priority 100) wants 2 and has waited:
no node fits it until ``mover`` leaves node-1."""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.builders import device_class, node, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.servers import SHORT_LEASE, server_process
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.scheduling.preempt.test_make_room import Mover as Running
from tests.scheduling.preempt.test_make_room import gpus
from tests.scheduling.test_make_room_mover import owned_claim, waiting
from tests.service.fixtures import args_names, binding

NODES = ["node-1", "node-2"]
#: Long before the test runs, whatever the machine's clock: ``mover`` is old enough to move and
#: ``trainer`` has waited long enough (both bounds are 0 here anyway).
LONG_AGO = "2020-01-01T00:00:00Z"
EVICTION = "/api/v1/namespaces/default/pods/mover/eviction"
#: The mover, on the planner's plans: at once (waited >= 0 s, pods of any age), replanned every second.
MOVER_FLAGS = ["--make-room", "--make-room-after", "0", "--make-room-min-age", "0"]
MOVER_FLAGS += ["--make-room-hint-interval", "1"]


def objects() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [device_class()]
    for name, count in (("node-1", 2), ("node-2", 1)):
        out += [node(name), resource_slice(f"{name}-s", gpus(count), pool=name, node=name)]
    out += owned_claim(Running("mover", "node-1", (0,), started=LONG_AGO))
    out += waiting("trainer", "wanted", 2)
    out += waiting("newcomer", "newcomer-claim", 1, priority=0)
    for obj in out:
        for condition in (obj.get("status") or {}).get("conditions") or ():
            if condition.get("type") == "PodScheduled":
                condition["lastTransitionTime"] = LONG_AGO
    return out


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        for obj in objects():
            server.create(obj)
        yield server


@contextlib.contextmanager
def serving(
    fake: FakeApiServer, tmp_path: Path, *flags: str
) -> Iterator[tuple[httpx.Client, httpx.Client, list[str]]]:
    """The extender against ``fake``, ready: (verbs client, ops client, its last log lines)."""
    command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
    command += ["--kubeconfig", kubeconfig(fake, tmp_path), *flags]
    with server_process(command) as (url, process):
        ops_url: str = process.ops_url  # type: ignore[attr-defined]
        log: list[str] = process.output_lines  # type: ignore[attr-defined]
        try:
            with (
                httpx.Client(base_url=url, timeout=10) as http,
                httpx.Client(base_url=ops_url, timeout=10) as ops,
            ):
                wait_until(lambda: ready(http))
                yield http, ops, log
        finally:
            # A graceful stop of the leader waits out the write window (3 s) before it releases
            # the Lease: not what is tested here, and the suite's time is short.
            process.kill()


def filter_(http: httpx.Client, fake: FakeApiServer, name: str) -> dict[str, Any]:
    """The filter verb as kube-scheduler sends it: the pod as its informer has it."""
    answer = http.post("/scheduler/filter", content=args_names(fake.get("Pod", name, "default"), NODES))
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()
    return result


def ask_for_a_plan(http: httpx.Client, fake: FakeApiServer) -> None:
    """kube-scheduler's first attempt: no node fits the trainer (the planner is asked)."""
    wait_until(lambda: filter_(http, fake, "newcomer")["NodeNames"] == NODES)  # the cache is in
    assert filter_(http, fake, "trainer")["NodeNames"] == []


def events(fake: FakeApiServer, reason: str) -> list[str]:
    with fake.store.cond:
        stored = [o for (r, _, _), o in fake.store.objects.items() if r == "events"]
    return [e["involvedObject"]["name"] for e in stored if e.get("reason") == reason]


def metric(ops: httpx.Client, name: str, **labels: str) -> float:
    selector = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^{name}\{{{selector}\}} (\S+)$", ops.get("/metrics").text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def claims(http: httpx.Client) -> list[dict[str, Any]]:
    """The claims in the extender's cache."""
    found: list[dict[str, Any]] = http.get("/debug/claims").json()["claims"]
    return found


def pod_deletes(fake: FakeApiServer) -> list[tuple[str, str, str]]:
    """Pods deleted over HTTP (an eviction's deletion happens inside the API server)."""
    return fake.calls("DELETE", "/pods/")


def devices_given_twice(fake: FakeApiServer) -> list[str]:
    seen: dict[tuple[str, str, str], str] = {}
    twice = []
    with fake.store.cond:
        claims = [o for (r, _, _), o in fake.store.objects.items() if r == "resourceclaims"]
    for c in claims:
        allocation = (c.get("status") or {}).get("allocation") or {}
        for result in allocation.get("devices", {}).get("results", []):
            device = (result["driver"], result["pool"], result["device"])
            if device in seen:
                twice.append(f"{device} in {seen[device]} and {c['metadata']['name']}")
            seen[device] = c["metadata"]["name"]
    return twice


def test_the_leader_evicts_through_the_eviction_api_and_keeps_the_room_for_the_pod(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    with serving(fake, tmp_path, *SHORT_LEASE, *MOVER_FLAGS) as (http, ops, _log):
        ask_for_a_plan(http, fake)
        wait_until(lambda: fake.calls("POST", EVICTION), timeout=10)
        # Events are posted off the mover's step, each on its own: they may land in either order.
        wait_until(lambda: events(fake, "MovedToMakeRoom") and events(fake, "MakingRoom"), timeout=5)
        assert events(fake, "MakingRoom") == ["trainer"] and events(fake, "MovedToMakeRoom") == ["mover"]
        assert metric(ops, "dra_extender_make_room_evictions_total", outcome="evicted") == 1
        sent = [orjson.loads(b) for m, p, b in fake.bodies if m == "POST" and p.startswith(EVICTION)]
        assert [e["deleteOptions"]["preconditions"] for e in sent] == [{"uid": "uid-mover"}]
        # The resourceclaim controller and the garbage collector: the fake deleted the claim the
        # evicted pod owned (releasing it first) as it deleted the pod; the cache shows it.
        with pytest.raises(KeyError):
            fake.get("ResourceClaim", "mover-claim", "default")
        wait_until(lambda: not any(c["claim"] == "default/mover-claim" for c in claims(http)))
        # node-1's GPUs are the trainer's now: it passes there, and a newcomer of lower priority
        # is sent to node-2 (node-1's freed GPUs are held for the trainer).
        assert filter_(http, fake, "trainer")["NodeNames"] == ["node-1"]
        newcomer = filter_(http, fake, "newcomer")
        assert newcomer["NodeNames"] == ["node-2"]
        failed = {**newcomer["FailedNodes"], **newcomer["FailedAndUnresolvableNodes"]}
        assert list(failed) == ["node-1"] and "kept for default/trainer" in failed["node-1"]
        wait_until(lambda: events(fake, "MadeRoom") == ["trainer"], timeout=5)
        bound = http.post("/scheduler/bind", content=binding("trainer", "uid-trainer", "node-1"))
        assert bound.json() == {"Error": ""}
        wait_until(lambda: metric(ops, "dra_extender_make_room_plans_total", outcome="carried_out") == 1)
        assert metric(ops, "dra_extender_make_room_plans_total", outcome="started") == 1
    assert [path.split("?")[0] for _, path, _ in fake.calls("POST", "/eviction")] == [EVICTION]
    assert pod_deletes(fake) == []
    assert fake.get("Pod", "trainer", "default")["spec"]["nodeName"] == "node-1"
    stored = fake.get("ResourceClaim", "wanted", "default")["status"]["allocation"]["devices"]["results"]
    assert sorted((r["pool"], r["device"]) for r in stored) == [("node-1", "gpu-0"), ("node-1", "gpu-1")]
    assert devices_given_twice(fake) == []


def test_a_replica_that_cannot_tell_whether_it_leads_moves_nothing(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    """The sidecar (no --leader-elect) without the store fence installed."""
    with serving(fake, tmp_path, *MOVER_FLAGS) as (http, ops, log):
        ask_for_a_plan(http, fake)
        unsure = "make room: not moving pods: without --leader-elect or the store fence"
        wait_until(lambda: any(unsure in line and "cannot tell whether it leads" in line for line in log))
        wait_until(lambda: metric(ops, "dra_extender_make_room_hints_total", outcome="plan") >= 1)
        time.sleep(1.0)  # two more of the mover's steps, the plan still in
        assert fake.calls("POST", "/eviction") == [] and pod_deletes(fake) == []
        assert events(fake, "MakingRoom") == []
    assert fake.get("Pod", "mover", "default")["spec"]["nodeName"] == "node-1"


def test_a_dry_run_logs_the_plan_and_moves_nothing(fake: FakeApiServer, tmp_path: Path) -> None:
    with serving(fake, tmp_path, *SHORT_LEASE, *MOVER_FLAGS, "--make-room-dry-run") as (http, ops, log):
        ask_for_a_plan(http, fake)
        line = "make room (dry run): would make room for default/trainer on node-1 by moving default/mover"
        wait_until(lambda: any(line in entry for entry in log), timeout=10)
        time.sleep(1.0)  # two more of the mover's steps: the plan is shown once, nothing moved
        assert metric(ops, "dra_extender_make_room_plans_total", outcome="dry_run") == 1
        assert fake.calls("POST", "/eviction") == [] and pod_deletes(fake) == []
        assert events(fake, "MakingRoom") == []
        # Nothing held: the newcomer may take node-1's free GPU.
        assert filter_(http, fake, "newcomer")["NodeNames"] == ["node-1", "node-2"]
    assert fake.get("Pod", "mover", "default")["spec"]["nodeName"] == "node-1"
