"""kube-apiserver restarted under a running extender and kube-scheduler: the extender's watches
come back (nothing missed: what changed while it was down is in its cache), and pods created
afterwards are scheduled with no device given twice."""

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
)


def test_watches_resume_after_an_api_server_restart(cluster: ControlPlane) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    for node, gpus in (("node-a", 8), ("node-b", 4)):
        cluster.add_node(node)
        api.create(gpu_slice(node, gpus=gpus))
    api.create(gpu_class())
    with (
        extender(cluster) as ext,
        scheduler(cluster, scheduler_config(cluster.extender_kubeconfig(), extender_url=ext.url)) as sched,
    ):
        for i in range(3):
            api.create(one_gpu_claim(f"before-{i}"))
            api.create(pod_with_claims(f"before-{i}", [f"before-{i}"]))
        assert len(wait_bound(api, 3)) == 3
        cluster.restart_apiserver(down_for=2.0)
        if not sched.process.alive():
            # kube-scheduler exits when it cannot renew its Lease within its renew deadline
            # (10 s: the restart took about that long here); kubelet would start it again.
            assert "Leaderelection lost" in sched.log()
            sched.start()
        # Changed while the extender could not watch: a node's devices are gone.
        api.delete("ResourceSlice", "node-b-gpus")
        api.wait_for(
            lambda: (
                "node-b" not in ext.get("/debug/inventory")["nodes"]
                or ext.get("/debug/inventory")["nodes"]["node-b"].get("total", 0) == 0
            ),
            what="the extender's cache without node-b's devices",
        )
        for i in range(3):
            api.create(one_gpu_claim(f"after-{i}"))
            api.create(pod_with_claims(f"after-{i}", [f"after-{i}"]))
        placed = wait_bound(api, 6)
        assert len(placed) == 6, placed
        assert all(placed[f"after-{i}"] == "node-a" for i in range(3)), placed
        allocated = {c["claim"] for c in ext.get("/debug/claims")["claims"] if c["allocated"]}
        assert allocated == {
            f"default/{c['metadata']['name']}"
            for c in api.list("ResourceClaim", "default")
            if (c.get("status") or {}).get("allocation")
        }
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []
