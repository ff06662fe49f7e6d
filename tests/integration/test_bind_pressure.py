"""Back-pressure as ``dra-extender serve`` wires it (extender/service/bind_pressure.py, issue 50
item 2), over HTTP against the fake API server: a filter is held while binds queue at the API
server, and let go when one ends; binds parked on their devices' binding conditions hold
nothing. tests/realcluster/test_bind_pressure.py is the same promise on the real control plane.

The API server here answers no bind's write until the test says so (a gate per claim, at the
fake's request hook), so what happens is told by order and state, never by how long it took:
the extender's ``dra_extender_filters_held`` gauge says a filter is being held, and which binds
have answered says what let it go. ``--scheduler-http-timeout`` is long (a filter is held at most
a fifth of it: 720 s) so that within the test only a bind's end can let a held filter go.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from extender.service.bind_pressure import UNKNOWN_RATE_IN_FLIGHT
from tests.builders import claim, device, device_class, device_status, node, pod, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations
from tests.integration.servers import cli_server_and_ops
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import args_names, binding, scheduler_pod

#: Enough binds in flight with none completed to be a queue (the rate is unknown), 8 per node.
BINDS = UNKNOWN_RATE_IN_FLIGHT
NODES = [f"node-{i}" for i in range(BINDS // 8)]
#: A node nothing is bound to, where the filtered pod fits.
FREE = "node-free"
HTTP_TIMEOUT = "3600"  # held at most 720 s: only a bind's end lets a filter go here
#: The longest any step is waited for (a hang guard on a loaded machine, never a measurement).
WAIT = 60.0


def cluster(binding_conditions: bool) -> list[dict[str, Any]]:
    """``BINDS`` pods with a claim each, 8 devices per node for them (with a binding condition,
    or none), and pod ``probe`` with its claim, which fits only on :data:`FREE`."""
    extra: dict[str, Any] = {}
    if binding_conditions:
        extra = {"bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}
    objects: list[dict[str, Any]] = [device_class()]
    for name in [*NODES, FREE]:
        devices = [device(f"d{i}", **(extra if name != FREE else {})) for i in range(8)]
        objects += [node(name), resource_slice(f"{name}-slice", devices, node=name, pool=name)]
    for i in range(BINDS):
        objects += [claim(f"c{i}"), pod(f"p{i}", [f"c{i}"])]
    return [*objects, claim("probe"), pod("probe", ["probe"])]


class Gates:
    """The fake API server's hook: a write to a claim waits until its gate opens; which claims'
    writes have arrived, in order."""

    def __init__(self) -> None:
        self.arrived: list[str] = []
        self._open: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._all_open = False

    def __enter__(self) -> Gates:
        return self

    def __exit__(self, *exc: object) -> None:
        """Every gate opens (also for writes still to come), the test passed or not."""
        with self._lock:
            self._all_open = True
            for gate in self._open.values():
                gate.set()

    def __call__(self, method: str, path: str) -> None:
        if method != "PUT" or "/resourceclaims/" not in path or self._all_open:
            return
        name = path.split("/resourceclaims/")[1].split("/")[0]
        with self._lock:
            gate = self._open.setdefault(name, threading.Event())
            if not path.endswith("/status"):
                self.arrived.append(name)
        gate.wait(60)  # a hang guard: the test opens every gate well before

    def open(self, *names: str) -> None:
        with self._lock:
            for name in names:
                self._open.setdefault(name, threading.Event()).set()


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


def metric(ops: httpx.Client, name: str) -> float:
    text = ops.get("/metrics").text
    (found,) = [s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]
    return found


def filter_probe(http: httpx.Client) -> list[str]:
    probe = scheduler_pod("probe", "uid-probe", [{"name": "probe", "resourceClaimName": "probe"}])
    answer = http.post("/scheduler/filter", content=args_names(probe, [*NODES, FREE]))
    assert answer.status_code == 200, answer.text
    names: list[str] = answer.json()["NodeNames"]
    return names


def bind_all(http: httpx.Client, pool: ThreadPoolExecutor) -> dict[str, Future[str]]:
    """Every pod's bind, each on its own thread (as kube-scheduler's binding goroutines)."""

    def bind(i: int) -> str:
        answer = http.post("/scheduler/bind", content=binding(f"p{i}", f"uid-p{i}", NODES[i // 8]))
        error: str = answer.json()["Error"]
        return error

    return {f"c{i}": pool.submit(bind, i) for i in range(BINDS)}


def serve(fake: FakeApiServer, tmp_path: Path) -> Any:
    return cli_server_and_ops(
        "--kubeconfig",
        kubeconfig(fake, tmp_path),
        "--scheduler-http-timeout",
        HTTP_TIMEOUT,
        "--binding-conditions-wait",
        "600",
    )


def test_a_filter_is_held_while_binds_queue_and_let_go_when_one_ends(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    for obj in cluster(binding_conditions=False):
        fake.create(obj)
    gates = Gates()
    fake.faults.on_request = gates
    with (
        ThreadPoolExecutor(BINDS + 1) as pool,  # left last: the server is stopped before
        gates,
        serve(fake, tmp_path) as (url, ops_url),
        httpx.Client(base_url=url, timeout=120) as http,
        httpx.Client(base_url=ops_url, timeout=30) as ops,
    ):
        wait_until(lambda: ready(http), WAIT)
        binds = bind_all(http, pool)
        wait_until(lambda: len(gates.arrived) == BINDS, WAIT)  # every bind waits on the API server
        held = pool.submit(filter_probe, http)
        wait_until(lambda: metric(ops, "dra_extender_filters_held") == 1, WAIT)
        assert not held.done() and not any(b.done() for b in binds.values())

        first, *others = gates.arrived
        gates.open(first)  # one bind completes: the queue moves, the filter goes on
        assert held.result(timeout=60) == [FREE]
        assert binds[first].result(timeout=60) == ""
        assert not any(binds[name].done() for name in others)  # let go by that one bind
        assert metric(ops, "dra_extender_filters_held") == 0
        assert metric(ops, "dra_extender_filter_held_seconds_count") == 1

        gates.open(*others)
        assert [b.result(timeout=60) for b in binds.values()] == [""] * BINDS
    assert violations(fake) == []


def test_binds_parked_on_binding_conditions_hold_no_filter(fake: FakeApiServer, tmp_path: Path) -> None:
    for obj in cluster(binding_conditions=True):
        fake.create(obj)
    with (
        ThreadPoolExecutor(BINDS + 1) as pool,  # left last: the server is stopped before
        serve(fake, tmp_path) as (url, ops_url),
        httpx.Client(base_url=url, timeout=120) as http,
        httpx.Client(base_url=ops_url, timeout=30) as ops,
    ):
        wait_until(lambda: ready(http), WAIT)
        binds = bind_all(http, pool)
        # A bind records this event once it waits on the cluster: every bind is parked then.
        wait_until(lambda: waiting_for_conditions(fake) == BINDS, WAIT)
        answer = pool.submit(filter_probe, http)
        wait_until(lambda: answer.done() or metric(ops, "dra_extender_filters_held") > 0, WAIT)
        assert answer.result(timeout=0) == [FREE]  # answered, not held
        assert not any(b.done() for b in binds.values())  # while every bind was still parked
        assert metric(ops, "dra_extender_filter_held_seconds_count") == 0  # not even briefly

        for i in range(BINDS):
            attach(fake, f"c{i}")  # the driver's part: the binds go on
        assert [b.result(timeout=60) for b in binds.values()] == [""] * BINDS
    assert violations(fake) == []


def waiting_for_conditions(fake: FakeApiServer) -> int:
    with fake.store.cond:
        return sum(
            1
            for (resource, _, _), event in fake.store.objects.items()
            if resource == "events" and event.get("reason") == "BindingConditionsPending"
        )


def attach(fake: FakeApiServer, name: str) -> None:
    """The claim's device is attached: its driver sets the binding condition."""

    def conditions(raw: dict[str, Any]) -> None:
        (result,) = raw["status"]["allocation"]["devices"]["results"]
        raw["status"]["devices"] = device_status(
            result["device"], driver=result["driver"], pool=result["pool"], Attached="True"
        )

    fake.update_direct("ResourceClaim", name, "default", conditions)
