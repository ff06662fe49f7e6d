"""``serve --kubeconfig`` with DRAWorkloadResourceClaims: PodGroups are read where the API server
serves them (v1beta1 from 1.37, kubernetes#140184; v1alpha2 in 1.36) and a claim a group's pods
share is reserved for the group, in the API server's store. The same behaviour against the real
1.36 binaries: tests/realcluster/test_pod_groups.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.builders import claim, device, device_class, exact, node, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.servers import server_process
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import args_names, binding

GATES = "GenericWorkload=true,DRAWorkloadResourceClaims=true"
ENTRY = {"name": "shared", "resourceClaimName": "shared-gpu"}


def member(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": "dra-extender-scheduler",
            "containers": [{"name": "c", "image": "x"}],
            "resourceClaims": [ENTRY],
            "schedulingGroup": {"podGroupName": "training"},
        },
    }


@pytest.mark.parametrize(("minor", "version"), [("36", "v1alpha2"), ("37", "v1beta1")])
def test_the_group_s_claim_is_reserved_for_the_group(minor: str, version: str, tmp_path: Path) -> None:
    with FakeApiServer(minor=minor, served_at={"podgroups": version}) as fake:
        for obj in [
            device_class("gpu", 'device.driver == "gpu.example.com"'),
            node("gpu-node"),
            resource_slice(
                "s", [device("gpu-0")], driver="gpu.example.com", pool="gpu-node", node="gpu-node"
            ),
            claim("shared-gpu", requests=[exact(cls="gpu")]),
            {
                "apiVersion": f"scheduling.k8s.io/{version}",
                "kind": "PodGroup",
                "metadata": {"name": "training", "namespace": "default", "uid": "uid-pg"},
                "spec": {"resourceClaims": [ENTRY]},
            },
            member("worker-0"),
            member("worker-1"),
        ]:
            fake.create(obj)
        command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
        command += ["--kubeconfig", kubeconfig(fake, tmp_path), "--feature-gates", GATES]
        with server_process(command) as (url, process), httpx.Client(base_url=url, timeout=10) as http:
            wait_until(lambda: ready(http))
            for name in ("worker-0", "worker-1"):
                passed = http.post(
                    "/scheduler/filter", content=args_names(fake.get("Pod", name, "default"), ["gpu-node"])
                ).json()["NodeNames"]
                assert passed == ["gpu-node"], name
                answer = http.post("/scheduler/bind", content=binding(name, f"uid-{name}", "gpu-node"))
                assert answer.json().get("Error", "") == "", answer.json()
            logged: list[str] = process.output_lines  # type: ignore[attr-defined]
        stored = fake.get("ResourceClaim", "shared-gpu", "default")
        group = {
            "apiGroup": "scheduling.k8s.io",
            "resource": "podgroups",
            "name": "training",
            "uid": "uid-pg",
        }
        assert stored["status"]["reservedFor"] == [group]
        assert fake.calls("GET", f"/apis/scheduling.k8s.io/{version}/podgroups")
        assert not any("serves no scheduling.k8s.io podgroups" in line for line in logged)
        # Both members bound; the claim was written once (one status write for the group).
        assert all(
            fake.get("Pod", n, "default")["spec"].get("nodeName") == "gpu-node"
            for n in ("worker-0", "worker-1")
        )
        assert len(fake.calls("PUT", "/resourceclaims/shared-gpu/status")) == 1, fake.calls("PUT")


def test_without_the_gate_podgroups_are_not_read(tmp_path: Path) -> None:
    with FakeApiServer() as fake:
        fake.create(node("n"))
        command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
        command += ["--kubeconfig", kubeconfig(fake, tmp_path)]
        with server_process(command) as (url, _process), httpx.Client(base_url=url, timeout=10) as http:
            wait_until(lambda: ready(http))
        assert not fake.calls("GET", "/apis/scheduling.k8s.io/v1beta1/podgroups")
