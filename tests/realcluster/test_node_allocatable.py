"""Devices that back node cpu and memory (DRANodeAllocatableResources, 1.36 alpha) under the real
kube-scheduler, side by side with the in-tree plugin.

kube-apiserver, kube-scheduler and the extender run with the gate on (this module's own control
plane). node-a has 7 CPUs; its driver publishes two "cpu pools" whose allocation stands for
3 CPUs each (``allocationMultiplier``). A pod whose container uses such a claim and itself
requests 1 CPU takes 4 CPUs of the node: the first pod fits, its status records the claim's
3 CPUs (v1.36.3 PreBind patchNodeAllocatableResourceClaimStatus), and the second does not fit
("Insufficient cpu": 4 + 4 > 7), though a device is free. Whoever decides, the store ends the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import builders as b
from tests.realcluster.binaries import release_of_binaries
from tests.realcluster.components import deciding
from tests.realcluster.conftest import emptied, own_plane
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import (
    GPU_DRIVER,
    applied,
    failed_scheduling,
    gpu_class,
    one_gpu_claim,
    pod_with_claims,
    store_violations,
    wait_bound,
    wait_unschedulable,
)

GATES = "DRANodeAllocatableResources=true"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    reason = release_of_binaries().node_allocatable
    if reason is not None:
        pytest.skip(reason)
    yield from own_plane(tmp_path_factory, "nodealloc", feature_gates=GATES)


@pytest.fixture
def cluster(plane: ControlPlane) -> Iterator[ControlPlane]:
    yield from emptied(plane)


def cpu_slice(node: str) -> dict[str, Any]:
    devices = [
        b.device(f"cpus-{i}", nodeAllocatableResourceMappings={"cpu": {"allocationMultiplier": "3"}})
        for i in range(2)
    ]
    return applied(b.resource_slice(f"{node}-cpus", devices, driver=GPU_DRIVER, pool=node, node=node))


def user(name: str) -> dict[str, Any]:
    """A pod whose container uses the claim ``name`` and requests 1 CPU itself."""
    p = pod_with_claims(name, [name])
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "claims": [{"name": name}]}
    return p


@pytest.mark.parametrize("mode", ["in-tree", "extender"])
def test_devices_count_as_node_cpu(cluster: ControlPlane, mode: str) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a", cpu="7")
    api.create(gpu_class())
    api.create(cpu_slice("node-a"))
    with deciding(cluster, mode, GATES):
        api.create(one_gpu_claim("first"))
        api.create(user("first"))
        assert wait_bound(api, 1) == {"first": "node-a"}
        api.create(one_gpu_claim("second"))
        api.create(user("second"))
        wait_unschedulable(api, "second")
        said = [
            e.get("message") or "" for e in failed_scheduling(api) if e["involvedObject"]["name"] == "second"
        ]
        assert any("Insufficient cpu" in m for m in said), said
    first = api.get("Pod", "first", "default")
    assert first is not None
    assert first["status"]["nodeAllocatableResourceClaimStatuses"] == [
        {
            "resourceClaimName": "first",
            "containers": [first["spec"]["containers"][0]["name"]],
            "resources": {"cpu": "3"},
        }
    ]
    second = api.get("ResourceClaim", "second", "default")
    assert second is not None and not (second.get("status") or {}).get("allocation")
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []
