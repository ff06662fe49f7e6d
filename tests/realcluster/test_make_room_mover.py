"""The make-room mover on the real control plane (issue 52): kube-apiserver, kube-scheduler,
kube-controller-manager with its ReplicaSet, Job and disruption controllers beside the DRA ones,
and the test kubelet that runs pods and finishes their deletions.

The cluster is tests/realcluster/fragmented.py's ``SMALL``: 4 nodes x 8 GPUs, 15 one-GPU pods
(ReplicaSets' pods, two under a PodDisruptionBudget allowing none, a bare pod, a high-priority
pod), then ``big`` (8 GPUs) and ``pcie`` (4 under one PCIe root), which fit nowhere until pods move.
"""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realcluster.components import Extender, extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane, more_controllers
from tests.realcluster.fragmented import (
    NAMESPACE,
    TARGETS,
    ClaimWatch,
    Fragmented,
    budget,
    evict,
    evictions,
    pod_deletes,
    wait_budgets,
)
from tests.realcluster.kubelet import playing_kubelet
from tests.realcluster.test_kubectl_dra import kubectl_dra
from tests.realcluster.workload import PAUSE, failed_scheduling, store_violations
from tests.shared import REPO

#: The planner's rules as the runs set them: every pod is old enough at once.
RULES = ("--make-room-min-age", "0", "--make-room-hint-interval", "1")
#: The mover, acting after 1 s of waiting, up to an eviction a second.
MOVER = ("--make-room", "--make-room-after", "1", "--make-room-rate", "60")
NEVER_MOVED = ("guarded", "high", "bare")


def mover_landed() -> bool:
    """Whether this checkout's extender has --make-room (the mover is landing as these are written)."""
    return (REPO / "extender" / "scheduling" / "make_room_mover.py").exists()


needs_mover = pytest.mark.skipif(
    not mover_landed(), reason="the make-room mover (--make-room) is not in this checkout yet"
)


@pytest.fixture
def workloads(cluster: ControlPlane) -> Iterator[ControlPlane]:
    """The session's plane with the ReplicaSet, Job and disruption controllers running beside its
    own; its ReplicaSets removed afterwards (before the pods: nothing recreates them then)."""
    if cluster.controller_manager is None:
        pytest.skip("needs kube-controller-manager (ReplicaSets recreate the moved pods; budgets)")
    with more_controllers(cluster):
        try:
            yield cluster
        finally:
            for kind in ("ReplicaSet", "PodDisruptionBudget"):
                for obj in cluster.api.list(kind, NAMESPACE):
                    cluster.api.delete(kind, obj["metadata"]["name"], NAMESPACE)


def with_component(component: str) -> dict[str, Any]:
    """The extender's ClusterRole as `kubectl apply -k` applies it with ``component`` added to the
    sidecar deployment (manifests/components/<component>)."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "kustomization.yaml").write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "kustomize.config.k8s.io/v1beta1",
                    "kind": "Kustomization",
                    "resources": [str(REPO / "manifests")],
                    "components": [str(REPO / "manifests" / "components" / component)],
                }
            )
        )
        out = subprocess.run(
            ["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", folder],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    (role,) = [
        d
        for d in yaml.safe_load_all(out)
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dra-extender"
    ]
    return dict(role)


@contextlib.contextmanager
def eviction_rights(plane: ControlPlane) -> Iterator[None]:
    """The extender's ClusterRole with manifests/components/make-room's rule (create on
    pods/eviction) for the block; as shipped without it afterwards."""
    api = plane.api
    before = api.get("ClusterRole", "dra-extender")
    assert before is not None
    granted = copy.deepcopy(before)
    granted["rules"] = with_component("make-room")["rules"]
    api.update(granted)
    try:
        yield
    finally:
        current = api.get("ClusterRole", "dra-extender")
        assert current is not None
        current["rules"] = before["rules"]
        api.update(current)


def unschedulable(api: Any, names: tuple[str, ...]) -> bool:
    said = {e["involvedObject"]["name"] for e in failed_scheduling(api, NAMESPACE)}
    return all(n in said for n in names)


def make_room(plane: ControlPlane, pod: str) -> dict[str, Any]:
    """``kubectl dra make-room default/POD -o json`` as someone holding the shipped viewer role."""
    with plane.person("dra-viewer", "dra-extender-viewer") as kubeconfig:
        answer = kubectl_dra(
            kubeconfig, "make-room", f"{NAMESPACE}/{pod}", "--make-room-min-age", "0", "-o", "json"
        )
    assert answer.returncode == 0, answer.stderr
    return dict(json.loads(answer.stdout))


def metric(ext: Extender, name: str, **labels: str) -> float:
    """A sample of the extender's /metrics (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    sample = f"{name}{{{want}}} " if want else f"{name} "
    found = [line for line in ext.metrics().splitlines() if line.startswith(sample)]
    return float(found[0].split()[-1]) if found else 0.0


# --- the harness ---------------------------------------------------------------------------------


def test_the_disruption_controller_counts_the_test_kubelets_pods_healthy(workloads: ControlPlane) -> None:
    """As on a real cluster: a ReplicaSet's two running pods under maxUnavailable 1 allow one
    disruption; one evicted, the budget allows none (a second eviction is refused, 429) until its
    replacement runs, then one again."""
    api = workloads.api
    workloads.add_node("node-a")
    labels = {"app": "pair"}
    api.create(budget("pair", labels, max_unavailable=1))
    api.create(
        {
            "kind": "ReplicaSet",
            "metadata": {"name": "pair", "namespace": NAMESPACE},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeName": "node-a",  # no scheduler in this one
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "main", "image": PAUSE}],
                    },
                },
            },
        }
    )
    with playing_kubelet(api):
        pdb = wait_budgets(api, "pair", allowed=1)
        assert (pdb["status"]["currentHealthy"], pdb["status"]["expectedPods"]) == (2, 2), pdb["status"]
        first, second = (p["metadata"] for p in api.list("Pod", NAMESPACE))
        assert evict(api, first["name"], first["uid"]) == 201
        wait_budgets(api, "pair", allowed=0)
        assert evict(api, second["name"], second["uid"]) == 429
        wait_budgets(api, "pair", allowed=1)  # the replacement runs and is Ready
        api.wait_for(lambda: api.get("Pod", first["name"], NAMESPACE) is None, what="the evicted pod gone")
        names = {p["metadata"]["name"] for p in api.list("Pod", NAMESPACE)}
        assert first["name"] not in names and second["name"] in names and len(names) == 2, names


# --- the mover off -------------------------------------------------------------------------------


def test_with_the_mover_off_nothing_moves_and_kubectl_dra_shows_the_plans(workloads: ControlPlane) -> None:
    api = workloads.api
    audit_from = len(workloads.audit_events())
    cluster = Fragmented(workloads)
    with (
        playing_kubelet(api),
        extender(workloads, *RULES) as ext,
        scheduler(workloads, scheduler_config(workloads.extender_kubeconfig(), extender_url=ext.url)),
    ):
        cluster.build()
        before = cluster.pods_by_role()
        cluster.add_targets()
        api.wait_for(lambda: unschedulable(api, TARGETS), timeout=30, what="both targets unschedulable")
        time.sleep(4)  # several retries, each with a plan at hand
        now = cluster.pods_by_role()
        assert {r: now[r] for r in before} == before  # no pod replaced
        placed = cluster.placement()
        assert not set(TARGETS) & set(placed), placed
        assert evictions(workloads, audit_from) == []
        assert pod_deletes(workloads, audit_from) == []
        plans = {name: make_room(workloads, name) for name in TARGETS}
    movable = set(before["movable"].values())
    for name, moves in (("big", 3), ("pcie", 1)):
        planned = plans[name]
        assert (planned["found"], planned["needsMoves"]) == (True, True), planned
        assert planned["plan"]["node"] in ("node-00", "node-01"), planned["plan"]
        moved = {m["pod"].removeprefix(f"{NAMESPACE}/") for m in planned["plan"]["moves"]}
        assert len(moved) == moves and moved <= movable, planned["plan"]
        assert all(placed[p] == planned["plan"]["node"] for p in moved)
        assert all(m["toNode"] != planned["plan"]["node"] for m in planned["plan"]["moves"])
    assert store_violations(api) == []


# --- the mover on --------------------------------------------------------------------------------


@needs_mover
def test_the_mover_makes_room_for_both_targets(workloads: ControlPlane) -> None:
    """Under ``spread`` (a replacement prefers the emptiest node: the freed one, unless held): both
    targets bind, every moved pod's replacement runs, no device is ever allocated twice, nothing
    the budget, its priority or its lack of an owner protects moves, and every move is an
    eviction (never a plain DELETE)."""
    api = workloads.api
    audit_from = len(workloads.audit_events())
    cluster = Fragmented(workloads)
    with (
        eviction_rights(workloads),
        playing_kubelet(api),
        extender(workloads, *RULES, *MOVER, "--score-policy", "spread") as ext,
        scheduler(workloads, scheduler_config(workloads.extender_kubeconfig(), extender_url=ext.url)),
    ):
        cluster.build()
        before = cluster.pods_by_role()
        watch = ClaimWatch(workloads)
        try:
            cluster.add_targets()
            api.wait_for(
                lambda: set(TARGETS) <= set(cluster.placement()), timeout=60, what="both targets bound"
            )
            api.wait_for(cluster.all_running, timeout=30, what="every replacement running")
        finally:
            watch.close()
        after = cluster.pods_by_role()
        carried = metric(ext, "dra_extender_make_room_plans_total", outcome="carried_out")
    assert watch.violations == [], watch.violations[:5]
    for role in NEVER_MOVED:
        assert set(before[role]) <= set(after[role]), role
    evicted = evictions(workloads, audit_from)
    assert evicted and {code for _, code in evicted} == {201}, evicted
    moved = {name for name, _ in evicted}
    assert moved <= set(before["movable"].values()), moved
    assert len(evicted) == len(moved) == 4, evicted  # 3 for big, 1 for pcie: each pod once
    assert set(before["movable"].values()) - moved <= set(after["movable"].values())
    assert pod_deletes(workloads, audit_from) == []
    assert carried == 2
    assert store_violations(api) == []
