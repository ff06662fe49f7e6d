"""PodGroup claims (DRAWorkloadResourceClaims) under the real kube-scheduler, side by side with
the in-tree plugin.

kube-apiserver 1.36 serves PodGroups as scheduling.k8s.io/v1alpha2 with GenericWorkload on and
that version in runtime-config (1.37: v1beta1; releases.py); before 1.36 there are no PodGroup
claims, and the module is skipped saying so; DRAWorkloadResourceClaims (which kube-scheduler refuses without
GenericWorkload) adds their ``spec.resourceClaims``. This module runs its own control plane with
both gates on in kube-apiserver, kube-controller-manager, kube-scheduler and the extender.

Two pods of one PodGroup share a claim the group names: whichever decides, the claim ends up
allocated once and reserved for the PodGroup (never for a pod), both pods bound to the node its
device is on (v1.36.3 pkg/scheduler/framework/plugins/dynamicresources PreBind,
podResourceClaimBindings -> resourceclaim.BindTo). With a template, kube-controller-manager
creates the claim for the group and names it in each member's status.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.realcluster.api import Api
from tests.realcluster.binaries import release_of_binaries
from tests.realcluster.components import deciding
from tests.realcluster.conftest import emptied, own_plane
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import (
    GPU_DRIVER,
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
    store_violations,
    wait_bound,
)

GATES = "GenericWorkload=true,DRAWorkloadResourceClaims=true"
GROUP = "training"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    release = release_of_binaries()
    if release.pod_group_claims is not None:
        pytest.skip(release.pod_group_claims)
    yield from own_plane(
        tmp_path_factory, "podgroups", feature_gates=GATES, runtime_config=f"{release.pod_group_version}=true"
    )


@pytest.fixture
def cluster(plane: ControlPlane) -> Iterator[ControlPlane]:
    # PodGroups first: kube-controller-manager makes a group's template claims again while it exists.
    yield from emptied(plane, first=("PodGroup",))


def pod_group(entry: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": release_of_binaries().pod_group_version,
        "kind": "PodGroup",
        "metadata": {"name": GROUP, "namespace": "default"},
        "spec": {"schedulingPolicy": {"basic": {}}, "resourceClaims": [entry]},
    }


def member(name: str, entry: dict[str, str]) -> dict[str, Any]:
    p = pod_with_claims(name)
    p["spec"]["resourceClaims"] = [entry]
    p["spec"]["schedulingGroup"] = {"podGroupName": GROUP}
    return p


def stored(api: Api, kind: str, name: str) -> dict[str, Any]:
    found = api.get(kind, name, "default")
    assert found is not None, f"{kind} {name}"
    return found


def group_reservation(api: Api) -> dict[str, str]:
    uid = stored(api, "PodGroup", GROUP)["metadata"]["uid"]
    return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": GROUP, "uid": uid}


@pytest.mark.parametrize("mode", ["in-tree", "extender"])
def test_a_claim_the_group_names_is_reserved_for_the_group(cluster: ControlPlane, mode: str) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a")
    cluster.add_node("node-b")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=1))
    entry = {"name": "shared", "resourceClaimName": "shared-gpu"}
    api.create(one_gpu_claim("shared-gpu"))
    api.create(pod_group(entry))
    with deciding(cluster, mode, GATES) as sched:
        api.create(member("worker-0", entry))
        if mode == "in-tree":
            # kube-scheduler v1.36.2 races here (alpha DRAWorkloadResourceClaims), seen twice
            # under full-suite load: both members reach PreBind at once, worker-0's fails with
            # "claim default/shared-gpu got allocated elsewhere in the meantime", and worker-1
            # is bound to node-b, off the node of the claim it was given ("Successfully bound
            # pod to node" node="node-b" feasibleNodes=2, its own log). So the reference leg
            # sends the second member once the first is bound; the extender takes both at once.
            wait_bound(api, 1)
        api.create(member("worker-1", entry))
        bound = wait_bound(api, 2)
        assert bound == {"worker-0": "node-a", "worker-1": "node-a"}, sched.lines_about(
            "worker-1", "shared-gpu"
        )
    status = stored(api, "ResourceClaim", "shared-gpu")["status"]
    assert status["reservedFor"] == [group_reservation(api)]
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == ["gpu-0"]
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []


@pytest.mark.parametrize("mode", ["in-tree", "extender"])
def test_a_template_claim_made_for_the_group_is_shared(cluster: ControlPlane, mode: str) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=2))
    api.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {"spec": one_gpu_claim("unused")["spec"]},
        }
    )
    entry = {"name": "shared", "resourceClaimTemplateName": "one-gpu"}
    api.create(pod_group(entry))
    with deciding(cluster, mode, GATES):
        api.create(member("worker-0", entry))
        api.create(member("worker-1", entry))
        assert wait_bound(api, 2) == {"worker-0": "node-a", "worker-1": "node-a"}
    claims = api.list("ResourceClaim", "default")
    assert len(claims) == 1, [c["metadata"]["name"] for c in claims]  # one claim, made for the group
    (made,) = claims
    assert made["metadata"]["ownerReferences"][0]["kind"] == "PodGroup"
    assert made["status"]["reservedFor"] == [group_reservation(api)]
    assert len(made["status"]["allocation"]["devices"]["results"]) == 1
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []


def test_a_pod_whose_group_is_missing_waits_with_upstream_s_words(cluster: ControlPlane) -> None:
    """No PodGroup object: the extender answers what kube-scheduler's lister says, on every
    node; the pod stays pending (GangScheduling off, so nothing parks it before filter)."""
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=1))
    entry = {"name": "shared", "resourceClaimName": "shared-gpu"}
    api.create(one_gpu_claim("shared-gpu"))
    with deciding(cluster, "extender", GATES):
        api.create(member("lonely", entry))

        def said() -> list[str]:
            return [
                e.get("message") or e.get("note") or ""
                for e in api.list("Event", "default")
                if e.get("reason") == "FailedScheduling"
            ]

        api.wait_for(
            lambda: any(f'podgroup.scheduling.k8s.io "{GROUP}" not found' in m for m in said()),
            what="FailedScheduling naming the missing PodGroup",
        )
    assert not stored(api, "Pod", "lonely")["spec"].get("nodeName")
    assert cluster.refused_writes(audit_from) == []


def test_the_real_scheduler_refuses_the_gate_alone_as_we_do(plane: ControlPlane) -> None:
    """kube-scheduler (v1.36.3, and every release with the gate) with DRAWorkloadResourceClaims
    but not GenericWorkload does not start; ``--feature-gates`` parsing gives the same words."""
    import subprocess

    from extender.allocator.features import FeatureGateError, parse_feature_gates
    from extender.allocator.releases import release_of

    out = subprocess.run(
        [str(plane.binaries.kube_scheduler), "--feature-gates=DRAWorkloadResourceClaims=true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    with pytest.raises(FeatureGateError) as ours:
        parse_feature_gates("DRAWorkloadResourceClaims=true", release=release_of(plane.release.minor))
    assert str(ours.value) in out.stderr


@pytest.mark.parametrize("mode", ["in-tree", "extender"])
def test_an_idle_group_s_stranded_claim_is_released_and_allocated_afresh(
    cluster: ControlPlane, mode: str
) -> None:
    """The group's claim is allocated to a node that is gone and reserved for the group; no
    member runs. 1.36's PostFilter removes the group's reservation (kube-controller-manager does
    not deallocate after another client's patch), a later attempt deallocates the claim, and the
    next one allocates it on node-a and reserves it for the group again."""
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=1))
    entry = {"name": "shared", "resourceClaimName": "shared-gpu"}
    api.create(pod_group(entry))
    claim = api.create(one_gpu_claim("shared-gpu"))
    claim["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    claim = api.update(claim)
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": GPU_DRIVER, "pool": "gone", "device": "gpu-0"}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gone"]}]}
                ]
            },
        },
        "reservedFor": [group_reservation(api)],
    }
    api.update(claim, subresource="status")
    with deciding(cluster, mode, GATES):
        api.create(member("worker-0", entry))
        assert wait_bound(api, 1, timeout=90) == {"worker-0": "node-a"}
    status = stored(api, "ResourceClaim", "shared-gpu")["status"]
    assert status["reservedFor"] == [group_reservation(api)]
    assert [(r["pool"], r["device"]) for r in status["allocation"]["devices"]["results"]] == [
        ("node-a", "gpu-0")
    ]
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []
