"""The README's tour as a real deployment: the shipped second-scheduler configuration, the
project's RBAC, the example cluster; kube-scheduler calls the extender and the pods land."""

from __future__ import annotations

from tests.realcluster.components import extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.example import create_example
from tests.realcluster.workload import bound, failed_scheduling, store_violations, wait_bound


def test_example_cluster_scheduled_by_the_real_scheduler(cluster: ControlPlane) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    with (
        extender(cluster) as ext,
        scheduler(cluster, scheduler_config(cluster.extender_kubeconfig(), extender_url=ext.url)),
    ):
        # The trainer first: four >= 80Gi GPUs exist only on gpu-node-3, and binpack gives them
        # to smaller pods that come first (as the real scheduler did when the pods were there
        # before it started: its queue then takes them in the informer's order, by name).
        create_example(cluster, first=("trainer",))
        # batch-job was already running; five pods are pending and fit, oversized does not.
        placed = wait_bound(api, 6)
        assert placed["batch-job"] == "gpu-node-1"
        assert placed["trainer"] == "gpu-node-3"  # the only node with four >= 80Gi GPUs
        assert {"inference-0", "rdma-worker", "web", "legacy-gpu"} <= set(placed)
        assert placed["rdma-worker"] != "cpu-node-1"
        api.wait_for(lambda: failed_scheduling(api), what="a FailedScheduling event for oversized")
        events = {e["involvedObject"]["name"]: e["message"] for e in failed_scheduling(api)}
        assert "needs 9 devices" in events.pop("oversized")
        # A template's pod tried before its claim exists waits for it (the in-tree plugin too).
        assert all("ResourceClaim not created yet" in m for m in events.values()), events
        assert "oversized" not in bound(api)
    assert store_violations(api) == []
    # The extender's cache keeps no managedFields, so its writes send none: an update without
    # them leaves the API server's entries as they are, the creator's beside the extender's.
    trainer_gpus = api.get("ResourceClaim", "trainer-gpus", "default")
    assert trainer_gpus is not None and trainer_gpus["status"]["reservedFor"]
    managers = {entry["manager"] for entry in trainer_gpus["metadata"]["managedFields"]}
    assert "dra-extender" in managers and len(managers) >= 2, managers
    legacy = api.get("Pod", "legacy-gpu", "default")
    assert legacy is not None
    extended = legacy["status"]["extendedResourceClaimStatus"]
    assert extended["resourceClaimName"].startswith("legacy-gpu-extended-resources-")
    assert cluster.refused_writes(audit_from) == []
    # No --kubernetes-version: the extender follows the real API server's release (its gates:
    # DRADeviceTaintRules is beta and off in 1.36, GA and on in the extender's 1.37 default).
    said = [line for line in ext.process.log.read_text().splitlines() if "deciding as Kubernetes" in line]
    minor = cluster.api.request("GET", "/version")["minor"]
    assert len(said) == 1 and f"deciding as Kubernetes 1.{minor} (API server 1.{minor})" in said[0], said
