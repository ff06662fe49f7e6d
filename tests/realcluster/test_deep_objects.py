"""Objects nested deeper than a JSON library takes, which kube-apiserver accepts (a claim's opaque
parameters may hold any JSON up to 10 KiB): one namespace's claim must not stop the extender's
claims informer for everyone. The claim is unreadable (its pod gets the reason), every other pod
is scheduled, and the extender stays ready."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import httpx
import pytest

from extender.model import nesting
from tests.realcluster.api import Api, path
from tests.realcluster.components import extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import (
    GPU_DRIVER,
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
    store_violations,
    wait_bound,
    wait_unschedulable,
)


def create_deep_claim(api: Api, name: str, depth: int) -> None:
    """A one-GPU claim whose opaque parameters nest ``depth`` objects (written as text: Python's
    own json module cannot encode that deep)."""
    claim = one_gpu_claim(name)
    claim["apiVersion"] = "resource.k8s.io/v1"
    claim["spec"]["devices"]["config"] = [{"opaque": {"driver": GPU_DRIVER, "parameters": "DEEP"}}]
    deep = '{"a":' * (depth - 1) + '{"leaf":1}' + "}" * (depth - 1)
    body = json.dumps(claim).replace('"DEEP"', deep)
    answer = api.http.post(
        path("ResourceClaim", None, "default"), content=body, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == 201, (
        f"kube-apiserver refused a claim nested {depth} deep: {answer.text[:300]}"
    )


@contextlib.contextmanager
def deleted_at_the_end(api: Api, name: str) -> Iterator[None]:
    """The test client reads lists with Python's json, which the deep claim would stop."""
    try:
        yield
    finally:
        api.http.delete(path("ResourceClaim", name, "default"))


@pytest.mark.parametrize(
    "depth",
    [
        300,  # orjson decodes it, but cannot encode it again
        1100,  # orjson cannot decode it (its limit is 1024)
    ],
)
def test_a_deeply_nested_claim_is_unreadable_and_nothing_else_stops(
    cluster: ControlPlane, depth: int
) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=2))
    with (
        deleted_at_the_end(api, "deep"),
        extender(cluster) as ext,
        scheduler(cluster, scheduler_config(cluster.extender_kubeconfig(), extender_url=ext.url)),
    ):
        create_deep_claim(api, "deep", depth)
        api.create(pod_with_claims("deep-user", ["deep"]))
        wait_unschedulable(api, "deep-user")
        # Claims created after it are still seen: the informer goes on past the deep one.
        api.create(one_gpu_claim("plain"))
        api.create(pod_with_claims("plain-user", ["plain"]))
        assert wait_bound(api, 1) == {"plain-user": "node-a"}
        assert httpx.get(ext.ops_url + "/readyz", timeout=10).status_code == 200
        explained = ext.get("/debug/pods/default/deep-user")
        text = str(explained)
        assert "deep" in text and nesting.REASON in text, text[:2000]
        assert "Traceback" not in ext.log()
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []
