"""A claim a failed bind left behind is released at the pod's next attempt (issue 50, item 4),
against the fake API server with ``dra-extender serve`` over real HTTP.

Seen on the real control plane: a deposed leader stored claim ``a`` of a two-claim pod (allocated,
reserved for the pod), its write of claim ``b`` was refused by the store fence, and ``a`` stayed
allocated and reserved for the unbound pod while the pod could not be scheduled: the other GPU
had gone to another pod meanwhile. The store here starts in exactly that state. The successor's
first filter of the pod finds no node and releases ``a`` (decide/post_filter.py rule 2): the
store shows it deallocated within one background write of that filter (bounded below at
:data:`WITHIN` seconds, a loaded machine's margin; the write itself is one request). Once the other
GPU is free, the pod gets both GPUs and nothing is given twice.
tests/realcluster/test_store_fence.py shows the same with the real kube-scheduler driving the
filter and the real store fence refusing the write.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.builders import allocated, claim, device, device_class, exact, node, pod, reserve, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.servers import cli_server
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import args_names, binding

DRIVER = "gpu.example.com"
NODE = "gpu-node"
PROTECTION = "resource.kubernetes.io/delete-protection"
#: How long the release may take after the filter that decides it (one write in the background).
WITHIN = 5.0


def gpu_claim(name: str, device_name: str | None = None, *reserved_for: str) -> dict[str, Any]:
    """A one-GPU claim; allocated to ``device_name`` and reserved for ``reserved_for`` if given,
    with delete protection as a bind leaves it."""
    out = claim(name, [exact(cls="gpu")])
    if device_name is not None:
        out["status"] = {"allocation": allocated((DRIVER, NODE, device_name))}
        out["metadata"]["finalizers"] = [PROTECTION]
        reserve(out, *reserved_for)
    return out


def store_after_a_refused_partial_bind() -> list[dict[str, Any]]:
    """One node with two GPUs; pod ``q`` bound with gpu-1; pod ``p``'s claim ``a`` on gpu-0,
    reserved for ``p``, its claim ``b`` never written."""
    return [
        device_class("gpu", f'device.driver == "{DRIVER}"'),
        node(NODE),
        resource_slice("gpus", [device("gpu-0"), device("gpu-1")], driver=DRIVER, pool=NODE, node=NODE),
        gpu_claim("q", "gpu-1", "q"),
        pod("q", ["q"], node_name=NODE),
        gpu_claim("a", "gpu-0", "p"),
        gpu_claim("b"),
        pod("p", ["a", "b"]),
    ]


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        for obj in store_after_a_refused_partial_bind():
            server.create(obj)
        yield server


def status(fake: FakeApiServer, name: str) -> dict[str, Any]:
    return dict(fake.get("ResourceClaim", name, "default").get("status") or {})


def devices(fake: FakeApiServer, name: str) -> list[str]:
    allocation = status(fake, name).get("allocation") or {}
    return [r["device"] for r in (allocation.get("devices") or {}).get("results") or []]


def test_the_successor_releases_the_claim_a_refused_bind_left_and_gives_nothing_twice(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path)) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        wait_until(lambda: len(http.get("/debug/claims").json()["claims"]) == 3)
        answer = http.post("/scheduler/filter", content=args_names(fake.get("Pod", "p", "default"), [NODE]))
        assert answer.status_code == 200
        assert not answer.json()["NodeNames"], answer.json()  # gpu-1 is q's: b fits nowhere
        filtered = time.monotonic()
        wait_until(lambda: not status(fake, "a").get("allocation"), timeout=WITHIN)
        released_after = time.monotonic() - filtered
        assert not status(fake, "a").get("reservedFor")
        assert devices(fake, "b") == [] and devices(fake, "q") == ["gpu-1"]  # nothing else touched
        assert not fake.get("Pod", "p", "default")["spec"].get("nodeName")

        # q goes away (as kubelet and the resourceclaim controller would leave it): p fits now.
        fake.delete_direct("Pod", "q", "default")
        fake.update_direct("ResourceClaim", "q", "default", lambda c: c.update(status={}))
        wait_until(lambda: all(not c["allocated"] for c in http.get("/debug/claims").json()["claims"]))
        p = fake.get("Pod", "p", "default")
        assert http.post("/scheduler/filter", content=args_names(p, [NODE])).json()["NodeNames"] == [NODE]
        assert http.post("/scheduler/bind", content=binding("p", "uid-p", NODE)).json() == {"Error": ""}
    assert sorted(devices(fake, "a") + devices(fake, "b")) == ["gpu-0", "gpu-1"]
    for name in ("a", "b"):
        assert [e["uid"] for e in status(fake, name)["reservedFor"]] == ["uid-p"]
    assert fake.get("Pod", "p", "default")["spec"]["nodeName"] == NODE
    assert released_after < WITHIN
