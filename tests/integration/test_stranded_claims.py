"""A claim stranded on a node that is gone is freed at once, even while a Binding may land.

A pod's Binding got a 5xx (its outcome unknown), so its claims stay allocated and reserved for
it: a Binding that lands later must find them. Then its node is deleted (the Node and its
ResourceSlice). No Binding can make those devices usable any more (a pod bound to a deleted
node is deleted by the pod garbage collector), so the next filter's PostFilter deallocates the
claim at once instead of after the 90 s window, and the pod binds on another node: here
kube-scheduler is played by a loop that retries filter and bind every 0.2 s.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.builders import claim, device, device_class, node, pod, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations
from tests.integration.servers import cli_server
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import args_names, binding

POD = pod("p", ["c"])
OBJECTS = [
    device_class(),
    node("node-1"),
    node("node-2"),
    resource_slice("s1", [device("d0")], pool="node-1", node="node-1"),
    resource_slice("s2", [device("d0")], pool="node-2", node="node-2"),
    claim("c"),
    POD,
]


@contextlib.contextmanager
def bound_with_its_binding_unanswered(fake: FakeApiServer, tmp_path: Path) -> Iterator[httpx.Client]:
    """The cluster, the extender, and pod p bound to node-1 but for its Binding (a 503: the
    outcome unknown, its claim kept allocated and reserved)."""
    for obj in OBJECTS:
        fake.create(obj)
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path)) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        fake.faults.inject[("POST", "pods/p/binding")] = [503]
        first = http.post("/scheduler/bind", content=binding("p", "uid-p", "node-1")).json()["Error"]
        assert "outcome unknown" in first
        yield http


def test_a_claim_on_a_deleted_node_is_freed_at_once_and_the_pod_binds_elsewhere(tmp_path: Path) -> None:
    with FakeApiServer() as fake:
        with bound_with_its_binding_unanswered(fake, tmp_path) as http:
            status = fake.get("ResourceClaim", "c", "default")["status"]
            assert status["allocation"]["devices"]["results"][0]["pool"] == "node-1"  # kept
            fake.delete_direct("ResourceSlice", "s1")
            fake.delete_direct("Node", "node-1")
            deleted = time.monotonic()
            bound_on = ""
            while time.monotonic() - deleted < 5.0 and not bound_on:
                passed = http.post("/scheduler/filter", content=args_names(POD, ["node-2"])).json()
                if passed["NodeNames"] == ["node-2"]:
                    answer = http.post("/scheduler/bind", content=binding("p", "uid-p", "node-2")).json()
                    if answer["Error"] == "":
                        bound_on = "node-2"
                        break
                time.sleep(0.2)
            took = time.monotonic() - deleted
        assert bound_on == "node-2", f"not bound within 5 s of the node's deletion ({took:.1f} s)"
        status = fake.get("ResourceClaim", "c", "default")["status"]
        assert status["allocation"]["devices"]["results"][0]["pool"] == "node-2"
        assert fake.get("Pod", "p", "default")["spec"]["nodeName"] == "node-2"
        assert violations(fake) == []


def test_while_the_node_exists_the_claims_wait_for_the_binding_that_may_land(tmp_path: Path) -> None:
    """The 90 s window still holds where the node is there: the claim stays as written."""
    with FakeApiServer() as fake:
        with bound_with_its_binding_unanswered(fake, tmp_path) as http:
            fake.delete_direct("ResourceSlice", "s1")  # the devices' slice is gone, the node is not
            for _ in range(5):
                assert (
                    http.post("/scheduler/filter", content=args_names(POD, ["node-2"])).json()["NodeNames"]
                    == []
                )
                time.sleep(0.2)
        status = fake.get("ResourceClaim", "c", "default")["status"]
        assert status["allocation"]["devices"]["results"][0]["pool"] == "node-1"
        assert [e["uid"] for e in status["reservedFor"]] == ["uid-p"]
