"""``kubectl dra`` against the real kube-apiserver, as a person holding only the shipped
``dra-extender-viewer`` ClusterRole (manifests/common/viewer-role.yaml), with no access to the
pod network: ``snapshot`` writes what those credentials list, ``explain`` and ``simulate`` decide
on it, and what ``simulate`` answers for a pod on that snapshot is what the running extender's
filter answers for the same pod (issue 41)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from extender.commands.kubectl_dra import COMPUTED
from tests.builders import allocated
from tests.realcluster.components import extender
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import GPU_DRIVER, gpu_class, gpu_slice, one_gpu_claim, pod_with_claims


@pytest.fixture
def viewer(cluster: ControlPlane) -> Iterator[Path]:
    """A kubeconfig of someone bound to the shipped viewer role, and nothing else."""
    with cluster.person("dra-viewer", "dra-extender-viewer") as kubeconfig:
        yield kubeconfig


def kubectl_dra(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Installed beside this interpreter by the package's entry point (pyproject.toml
    # [project.scripts]), where kubectl finds it once that directory is on the PATH.
    executable = Path(sys.executable).parent / "kubectl-dra"
    assert executable.exists(), f"{executable}: the package's kubectl-dra entry point is not installed"
    return subprocess.run(
        [executable, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def two_nodes_one_free_gpu(cluster: ControlPlane) -> dict[str, Any]:
    """node-a: two GPUs, one held by another claim; node-b: one GPU, held. Pod p asks for one."""
    api = cluster.api
    cluster.add_node("node-a")
    cluster.add_node("node-b")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=2))
    api.create(gpu_slice("node-b", gpus=1))
    for name, node in (("held-a", "node-a"), ("held-b", "node-b")):
        held = api.create(one_gpu_claim(name))
        allocation = allocated((GPU_DRIVER, node, "gpu-0"))
        allocation["devices"]["results"][0]["request"] = "gpu"  # one_gpu_claim's request
        held["status"] = {"allocation": allocation}
        api.request(
            "PUT", f"/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/{name}/status", json=held
        )
    api.create(one_gpu_claim("p-gpu"))
    return api.create(pod_with_claims("p", ["p-gpu"]))


def test_snapshot_lists_what_the_viewer_may_read_and_says_where_the_answer_came_from(
    cluster: ControlPlane, viewer: Path, tmp_path: Path
) -> None:
    two_nodes_one_free_gpu(cluster)
    answer = kubectl_dra(viewer, "snapshot", "-o", str(tmp_path / "snapshot.json"))
    assert answer.returncode == 0, answer.stderr
    assert COMPUTED in answer.stderr
    assert "not listed" not in answer.stderr  # the viewer role reads every kind the extender reads
    listed = json.loads((tmp_path / "snapshot.json").read_text())
    assert listed["kind"] == "List"
    names = {(o["kind"], o["metadata"]["name"]) for o in listed["items"]}
    assert {
        ("Node", "node-a"),
        ("Pod", "p"),
        ("ResourceClaim", "p-gpu"),
        ("ResourceClaim", "held-a"),
    } <= names
    assert all(o["apiVersion"] for o in listed["items"])


def test_explain_answers_per_node_as_the_viewer(cluster: ControlPlane, viewer: Path) -> None:
    two_nodes_one_free_gpu(cluster)
    answer = kubectl_dra(viewer, "explain", "default/p", "-o", "json")
    assert answer.returncode == 0, answer.stderr
    nodes = json.loads(answer.stdout)["nodes"]
    assert nodes["node-a"]["fits"] is True
    assert nodes["node-b"]["fits"] is False


def test_simulate_on_a_snapshot_answers_what_the_live_filter_answers(
    cluster: ControlPlane, viewer: Path
) -> None:
    pod = two_nodes_one_free_gpu(cluster)
    answer = kubectl_dra(viewer, "simulate", "--pod", "default/p", "-o", "json")
    assert answer.returncode == 0, answer.stderr
    (simulated,) = json.loads(answer.stdout)["pods"]
    with extender(cluster) as ext:
        live = httpx.post(
            f"{ext.url}/scheduler/filter",
            content=orjson.dumps(
                {"Pod": cluster.api.get("Pod", "p", "default") or pod, "NodeNames": ["node-a", "node-b"]}
            ),
            timeout=30,
        ).json()
    assert live["NodeNames"] == [n for n, v in simulated["nodes"].items() if v["fits"]] == ["node-a"]
    refused = {**live["FailedNodes"], **live["FailedAndUnresolvableNodes"]}
    assert refused == {n: v["reason"] for n, v in simulated["nodes"].items() if not v["fits"]}


def test_without_rights_to_a_kind_it_warns_and_goes_on(cluster: ControlPlane, tmp_path: Path) -> None:
    """Someone who may read nothing: every kind is reported as not listed; the snapshot is empty."""
    with cluster.person("nobody", None) as kubeconfig:
        answer = kubectl_dra(kubeconfig, "snapshot", "-o", str(tmp_path / "s.yaml"))
    assert answer.returncode == 0, answer.stderr
    assert "warning: Pod objects not listed" in answer.stderr and "forbidden" in answer.stderr.lower()
    assert (tmp_path / "s.yaml").read_text().startswith("apiVersion: v1\nkind: List\nitems: []")


def test_capacity_counts_what_is_free_per_node_and_class(cluster: ControlPlane, viewer: Path) -> None:
    two_nodes_one_free_gpu(cluster)
    answer = kubectl_dra(viewer, "capacity", "--class", "gpu.example.com", "-o", "json")
    assert answer.returncode == 0, answer.stderr
    view = json.loads(answer.stdout)
    free = {n["node"]: (n["total"], n["allocated"], n["free"]) for n in view["nodes"]}
    assert free == {"node-a": (2, 1, 1), "node-b": (1, 1, 0)}
    assert view["shape"]["deviceClass"] == "gpu.example.com" and view["shape"]["count"] == 1
    text = kubectl_dra(viewer, "capacity")
    assert text.returncode == 0 and "node-a" in text.stdout, text.stderr


def test_pending_says_where_each_waiting_pod_fits_or_why_nowhere(cluster: ControlPlane, viewer: Path) -> None:
    two_nodes_one_free_gpu(cluster)
    api = cluster.api
    api.create(one_gpu_claim("q-gpus", count=2))
    api.create(pod_with_claims("q", ["q-gpus"]))
    api.create(pod_with_claims("cpu-only"))  # waits, but not for devices: not listed
    answer = kubectl_dra(viewer, "pending", "-o", "json")
    assert answer.returncode == 1, answer.stderr  # q fits nowhere
    pods = {p["pod"]: p for p in json.loads(answer.stdout)["pods"]}
    assert set(pods) == {"default/p", "default/q"}
    assert pods["default/p"]["fitsOn"] == ["node-a"]
    assert pods["default/q"]["fitsOn"] == []
    assert sum(pods["default/q"]["reasons"].values()) == 2  # both nodes say why
    text = kubectl_dra(viewer, "pending")
    assert "default/p  fits on 1 node(s): node-a" in text.stdout
    assert "default/q  fits nowhere (" in text.stdout
