"""Admin access under the real kube-scheduler: a claim with adminAccess (in a namespace labelled
for it) gets a device another pod's claim already holds; the real API server accepts the
allocation, and no other claim gets that device twice."""

from __future__ import annotations

from tests.realcluster.components import extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import (
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
    store_violations,
    wait_bound,
    wait_unschedulable,
)


def test_admin_access_shares_a_device_in_use(cluster: ControlPlane) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=1))
    with (
        extender(cluster) as ext,
        scheduler(cluster, scheduler_config(cluster.extender_kubeconfig(), extender_url=ext.url)),
    ):
        api.create(one_gpu_claim("worker"))
        api.create(pod_with_claims("worker", ["worker"]))
        assert wait_bound(api, 1) == {"worker": "node-a"}
        api.create(one_gpu_claim("monitor", "team-a", adminAccess=True))
        api.create(pod_with_claims("monitor", ["monitor"], namespace="team-a"))
        assert wait_bound(api, 1, namespace="team-a") == {"monitor": "node-a"}
        # A third, ordinary claim finds the only GPU taken.
        api.create(one_gpu_claim("late"))
        api.create(pod_with_claims("late", ["late"]))
        wait_unschedulable(api, "late")
    monitor = api.get("ResourceClaim", "monitor", "team-a")
    assert monitor is not None
    (result,) = monitor["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "gpu-0" and result["adminAccess"] is True
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []
