"""``kubectl dra`` against the real kube-apiserver, as a person holding only the shipped
``dra-extender-viewer`` ClusterRole (manifests/common/viewer-role.yaml), with no access to the
pod network: ``snapshot`` writes what those credentials list, ``explain`` and ``simulate`` decide
on it, and what ``simulate`` answers for a pod on that snapshot is what the running extender's
filter answers for the same pod (issue 41)."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from extender.commands.kubectl_dra import COMPUTED, FROM_EXTENDER
from tests import zygote
from tests.builders import allocated
from tests.realcluster.api import ApiError
from tests.realcluster.components import Extender, extender
from tests.realcluster.controlplane import EXTENDER_ACCOUNT, EXTENDER_NAMESPACE, ControlPlane
from tests.realcluster.workload import GPU_DRIVER, gpu_class, gpu_slice, one_gpu_claim, pod_with_claims
from tests.shared import REPO


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
    return zygote.run(  # forked from the zygote (tests/zygote.py): the entry point's main
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
        assert_simulated_as_filtered(simulated, live_filter(cluster, ext, pod))


def live_filter(cluster: ControlPlane, ext: Extender, pod: dict[str, Any]) -> dict[str, Any]:
    """The running extender's filter answer for pod p on both nodes (as kube-scheduler asks)."""
    sent = {"Pod": cluster.api.get("Pod", "p", "default") or pod, "NodeNames": ["node-a", "node-b"]}
    answer: dict[str, Any] = httpx.post(
        f"{ext.url}/scheduler/filter", content=orjson.dumps(sent), timeout=30
    ).json()
    return answer


def assert_simulated_as_filtered(simulated: dict[str, Any], live: dict[str, Any]) -> None:
    """simulate's answer for a pod is the live filter's: the nodes passed, and each reason."""
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


def running_replica(cluster: ControlPlane, name: str, node: str, owner: dict[str, Any]) -> None:
    """A pod of ``owner`` (a ReplicaSet) on ``node``, running since long before the default
    --make-room-min-age (its status as a kubelet writes it), with a claim holding its gpu-0 there,
    reserved for it (as the scheduler leaves it)."""
    api = cluster.api
    api.create(one_gpu_claim(f"{name}-gpu"))
    pod = pod_with_claims(name, [f"{name}-gpu"], labels={"app": "movable"})
    pod["spec"]["nodeName"] = node
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    created = api.create(pod)
    created["status"] = {"phase": "Running", "startTime": "2026-01-05T08:00:00Z"}
    api.update(created, subresource="status")
    claim = api.get("ResourceClaim", f"{name}-gpu", "default")
    assert claim is not None
    claim["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    claim = api.update(claim)
    allocation = allocated((GPU_DRIVER, node, "gpu-0"))
    allocation["devices"]["results"][0]["request"] = "gpu"  # one_gpu_claim's request
    claim["status"] = {
        "allocation": allocation,
        "reservedFor": [{"resource": "pods", "name": name, "uid": created["metadata"]["uid"]}],
    }
    api.update(claim, subresource="status")


def test_make_room_plans_the_move_that_frees_a_node(cluster: ControlPlane, viewer: Path) -> None:
    """node-a and node-b have two GPUs each, one held by an old pod of a ReplicaSet: t, asking for
    two, fits nowhere; moving m-a onto node-b's free GPU frees node-a for it. Computed from what
    the viewer lists (status.startTime, ownerReferences, the claims' reservations as the real API
    server keeps them), with serve's default rules."""
    api = cluster.api
    cluster.add_node("node-a")
    cluster.add_node("node-b")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=2))
    api.create(gpu_slice("node-b", gpus=2))
    labels = {"app": "movable"}
    replicasets = "/apis/apps/v1/namespaces/default/replicasets"  # by path: api.py's kinds need not know it
    owner: dict[str, Any] = api.request(
        "POST",
        replicasets,
        json={
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "movable", "namespace": "default"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        },
    )
    try:
        running_replica(cluster, "m-a", "node-a", owner)
        running_replica(cluster, "m-b", "node-b", owner)
        api.create(one_gpu_claim("t-gpus", count=2))
        api.create(pod_with_claims("t", ["t-gpus"]))
        answer = kubectl_dra(viewer, "make-room", "default/t", "-o", "json")
        assert answer.returncode == 0, answer.stderr
        assert COMPUTED in answer.stderr
        planned = json.loads(answer.stdout)
        assert (planned["found"], planned["needsMoves"], planned["plan"]["node"]) == (True, True, "node-a")
        (move,) = planned["plan"]["moves"]
        assert (move["pod"], move["toNode"], move["devices"]) == (
            "default/m-a",
            "node-b",
            [f"{GPU_DRIVER}/node-b/gpu-1"],
        )
        assert move["uid"] == api.get("Pod", "m-a", "default")["metadata"]["uid"]  # type: ignore[index]
        assert planned["rules"]["minAgeSeconds"] == 300.0
        too_young = kubectl_dra(viewer, "make-room", "default/t", "--make-room-min-age", "1e12")
        assert too_young.returncode == 1, too_young.stderr
        assert "  node-a: 1 of 2 devices held by pods younger than the minimum age" in too_young.stdout
    finally:
        api.request("DELETE", f"{replicasets}/movable")


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


# --- through the API server's service proxy to a running extender ----------------------------------

DEBUG_ROLE = REPO / "manifests" / "components" / "debug-views" / "debug-role.yaml"
SIDECAR_SERVICE = "dra-extender-scheduler"


def routable_address() -> str | None:
    """This machine's address on its network: the API server proxies to no loopback address
    (as to no pod on one), so the extender must listen where a pod's IP would be."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # a documentation address: nothing is sent
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") else address


@contextlib.contextmanager
def served_through_proxy(cluster: ControlPlane, *args: str) -> Iterator[Extender]:
    """The extender running here with ``args``, behind the sidecar deployment's Service as the
    API server sees one: the Service, its Endpoints naming a Pod, the Pod with this machine's
    address as its IP (no kubelet runs here to start it), and the shipped debug Role."""
    address = routable_address()
    if address is None:
        pytest.skip("no non-loopback address here: the API server proxies to no loopback address")
    api = cluster.api
    made: list[tuple[str, str]] = []
    with extender(cluster, "--ops-host", "0.0.0.0", *args) as ext:
        port = int(ext.ops_url.rsplit(":", 1)[1])
        try:
            role = yaml.safe_load(DEBUG_ROLE.read_text())
            for obj in (role, *sidecar_endpoint(address, port)):
                try:
                    created = api.create(obj)
                except ApiError as exc:
                    if exc.code != 409:
                        raise
                    created = obj
                made.append((obj["kind"], obj["metadata"]["name"]))
                if obj["kind"] == "Pod":
                    created["status"] = {
                        "phase": "Running",
                        "podIP": address,
                        "podIPs": [{"ip": address}],
                        "conditions": [{"type": "Ready", "status": "True"}],
                    }
                    api.request(
                        "PUT",
                        f"/api/v1/namespaces/{EXTENDER_NAMESPACE}/pods/{obj['metadata']['name']}/status",
                        json=created,
                    )
            yield ext
        finally:
            for kind, name in reversed(made):
                with contextlib.suppress(ApiError):
                    api.delete(kind, name, EXTENDER_NAMESPACE)


def sidecar_endpoint(address: str, port: int) -> list[dict[str, Any]]:
    meta = {"namespace": EXTENDER_NAMESPACE, "labels": {"app.kubernetes.io/name": "dra-extender"}}
    pod = "dra-extender-scheduler-proxy-test"
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod, **meta},
            "spec": {
                "nodeName": "node-a",
                "serviceAccountName": EXTENDER_ACCOUNT,  # no controller makes a "default" one here
                "containers": [{"name": "dra-extender", "image": "dra-extender"}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SIDECAR_SERVICE, **meta},
            "spec": {"ports": [{"name": "metrics", "port": 8889, "targetPort": port}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": SIDECAR_SERVICE, **meta},
            "subsets": [
                {
                    "addresses": [
                        {
                            "ip": address,
                            "targetRef": {"kind": "Pod", "name": pod, "namespace": EXTENDER_NAMESPACE},
                        }
                    ],
                    "ports": [{"name": "metrics", "port": port}],
                }
            ],
        },
    ]


@pytest.fixture
def debugger(cluster: ControlPlane) -> Iterator[Path]:
    """Someone holding the shipped dra-extender-debug Role only: no right to list anything."""
    with cluster.person(
        "dra-debugger", None, roles=[(EXTENDER_NAMESPACE, "dra-extender-debug")]
    ) as kubeconfig:
        yield kubeconfig


def test_through_the_service_proxy_every_command_is_the_extenders_answer(
    cluster: ControlPlane, debugger: Path, tmp_path: Path
) -> None:
    """Holding only the debug Role (it may list nothing): each command is answered by the running
    extender, and says so; simulate on the extender's snapshot answers what its filter answers;
    make-room is the extender's /debug/make-room (p fits on node-a's free GPU: no move)."""
    pod = two_nodes_one_free_gpu(cluster)
    with served_through_proxy(cluster, "--ops-debug") as ext:
        wait_until_cached(ext, "default", "p")
        said = FROM_EXTENDER.format(service=f"{EXTENDER_NAMESPACE}/{SIDECAR_SERVICE}:metrics")
        answer = kubectl_dra(debugger, "snapshot", "-o", str(tmp_path / "snapshot.json"))
        assert answer.returncode == 0 and said in answer.stderr, answer.stderr
        listed = json.loads((tmp_path / "snapshot.json").read_text())["items"]
        assert listed == ext.get("/debug/snapshot")["items"]  # the cache, as the extender holds it
        assert {("Pod", "p"), ("Node", "node-a"), ("ResourceClaim", "held-a")} <= {
            (o["kind"], o["metadata"]["name"]) for o in listed
        }
        explained = kubectl_dra(debugger, "explain", "default/p", "-o", "json")
        assert explained.returncode == 0 and said in explained.stderr, explained.stderr
        assert json.loads(explained.stdout) == ext.get("/debug/pods/default/p")
        capacity = kubectl_dra(debugger, "capacity", "--class", "gpu.example.com", "-o", "json")
        assert capacity.returncode == 0 and said in capacity.stderr, capacity.stderr
        assert json.loads(capacity.stdout)["shape"]["byNode"] == {"node-a": 1}
        simulated = kubectl_dra(debugger, "simulate", "--pod", "default/p", "-o", "json")
        assert simulated.returncode == 0 and said in simulated.stderr, simulated.stderr
        (decided,) = json.loads(simulated.stdout)["pods"]
        assert_simulated_as_filtered(decided, live_filter(cluster, ext, pod))
        pending = kubectl_dra(debugger, "pending", "-o", "json")
        assert pending.returncode == 0 and said in pending.stderr, pending.stderr
        assert [p["pod"] for p in json.loads(pending.stdout)["pods"]] == ["default/p"]
        planned = kubectl_dra(debugger, "make-room", "default/p", "-o", "json")
        assert planned.returncode == 0 and said in planned.stderr, planned.stderr
        assert json.loads(planned.stdout) == ext.get("/debug/make-room?pod=default/p")
        assert (json.loads(planned.stdout)["needsMoves"], json.loads(planned.stdout)["plan"]["node"]) == (
            False,
            "node-a",
        )
        page = httpx_through_proxy(cluster, debugger, "ui")
        assert page.status_code == 200 and "<title>dra-extender: device capacity</title>" in page.text
        # The API server passes the page's policy and the replica's name on to the browser.
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        assert page.headers["x-dra-extender-replica"] and "(replica " in explained.stderr
        unknown = kubectl_dra(debugger, "explain", "default/nobody")
        assert unknown.returncode == 2 and "pod default/nobody not found" in unknown.stderr


def httpx_through_proxy(cluster: ControlPlane, kubeconfig: Path, view: str) -> httpx.Response:
    """``GET .../services/dra-extender-scheduler:metrics/proxy/debug/VIEW`` as that person (what a
    browser behind ``kubectl proxy`` asks)."""
    config = yaml.safe_load(kubeconfig.read_text())
    user = config["users"][0]["user"]
    cluster_entry = config["clusters"][0]["cluster"]
    path = f"/api/v1/namespaces/{EXTENDER_NAMESPACE}/services/{SIDECAR_SERVICE}:metrics/proxy/debug/{view}"
    return httpx.get(
        cluster_entry["server"] + path,
        headers={"Authorization": f"Bearer {user['token']}"},
        verify=ssl.create_default_context(cafile=authority)
        if (authority := cluster_entry.get("certificate-authority"))
        else False,
        timeout=30,
    )


def wait_until_cached(ext: Extender, namespace: str, name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if httpx.get(f"{ext.url}/debug/pods/{namespace}/{name}", timeout=10).status_code == 200:
            return
        time.sleep(0.1)
    raise AssertionError(f"the extender never cached pod {namespace}/{name}")


def test_without_the_right_to_proxy_it_says_so_and_computes_from_the_objects(
    cluster: ControlPlane, viewer: Path
) -> None:
    two_nodes_one_free_gpu(cluster)
    with served_through_proxy(cluster, "--ops-debug"):
        answer = kubectl_dra(viewer, "explain", "default/p", "-o", "json")
    assert answer.returncode == 0, answer.stderr
    assert "the extender cannot be asked: not allowed to reach" in answer.stderr
    assert "forbidden" in answer.stderr.lower() and COMPUTED in answer.stderr
    assert json.loads(answer.stdout)["nodes"]["node-a"]["fits"] is True


def test_an_extender_without_ops_debug_is_named_as_such(cluster: ControlPlane, debugger: Path) -> None:
    two_nodes_one_free_gpu(cluster)
    with served_through_proxy(cluster):  # no --ops-debug: probes and metrics only
        answer = kubectl_dra(debugger, "--source", "extender", "capacity")
    assert answer.returncode == 2
    assert "its extender runs without --ops-debug" in answer.stderr
