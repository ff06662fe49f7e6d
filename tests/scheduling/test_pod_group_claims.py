"""DRAWorkloadResourceClaims at PreFilter/Filter: claims a PodGroup's pods share.

Translated from v1.36.3 (pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go
TestPlugin's podgroup-* cases, their PreFilter and Filter parts, and resourceclaim.IsForPod /
BindTo / IsReservedForPod). The gate is still refused on the command line (the write path does
not reserve for groups yet), so these cases set it on the features directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.scheduling.assembly import assemble
from extender.scheduling.config import EngineConfig
from extender.scheduling.engine import Engine
from tests.builders import allocated, claim, device, device_class, node, pod, resource_slice

ON = Features.from_gates({"DRAWorkloadResourceClaims": True})
OFF = Features()
GROUP = "my-podgroup"
GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": GROUP, "uid": "uid-pg"}


def pod_group(*claims: dict[str, str], statuses: dict[str, str] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": GROUP, "namespace": "default", "uid": "uid-pg"},
        "spec": {"resourceClaims": list(claims)},
    }
    if statuses:
        obj["status"] = {
            "resourceClaimStatuses": [{"name": k, "resourceClaimName": v} for k, v in statuses.items()]
        }
    return obj


def member(claims: list[str] | None = None, templates: dict[str, str | None] | None = None) -> dict[str, Any]:
    p = pod("my-pod", claims, templates=templates)
    p["spec"]["schedulingGroup"] = {"podGroupName": GROUP}
    return p


def owned_by(
    obj: dict[str, Any], kind: str, name: str, api_version: str = "scheduling.k8s.io/v1beta1"
) -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = [
        {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}
    ]
    return obj


def reserved(obj: dict[str, Any], *entries: dict[str, str]) -> dict[str, Any]:
    obj["status"]["reservedFor"] = list(entries)
    return obj


BY_NAME = {"name": "group-claim", "resourceClaimName": "group-claim"}  # as the pod names it
BY_TEMPLATE = {"name": "gpu", "resourceClaimTemplateName": "template"}
ALLOCATED = allocated(("driver-a", "pool-1", "d0"))
BASE = [device_class(), node(), resource_slice("s", [device("d0"), device("d1")])]


def group_claim(**kw: Any) -> dict[str, Any]:
    return claim("group-claim", **kw)


@dataclass
class Case:
    name: str
    upstream: str
    objects: list[dict[str, Any]]
    features: Features = field(default_factory=lambda: ON)
    #: "fits" or the start of the unschedulable reason.
    outcome: str = "fits"
    #: The reservedFor entry each claim would get (claim name -> entry); None: the pod's.
    consumers: dict[str, dict[str, str]] = field(default_factory=dict)


def pod_ref_for(claim_name: str) -> list[dict[str, Any]]:
    return [member([claim_name])]


CASES = [
    Case(
        "podgroup-claim-reference",
        "TestPlugin/podgroup-claim-reference: an allocated claim the group names, by name",
        [
            *BASE,
            pod_group(BY_NAME),
            owned_by(group_claim(allocation=ALLOCATED), "PodGroup", GROUP),
            *pod_ref_for("group-claim"),
        ],
        consumers={"group-claim": GROUP_REF},
    ),
    Case(
        "podgroup-claim-reference-feature-disabled-reserves-for-pod",
        "TestPlugin/podgroup-claim-reference-feature-disabled-reserves-for-pod",
        [
            *BASE,
            pod_group(BY_NAME),
            owned_by(group_claim(allocation=ALLOCATED), "PodGroup", GROUP),
            *pod_ref_for("group-claim"),
        ],
        features=OFF,
    ),
    Case(
        "podgroup-with-resources",
        "TestPlugin/podgroup-with-resources: an unallocated group claim is allocated on the node",
        [*BASE, pod_group(BY_NAME), group_claim(), *pod_ref_for("group-claim")],
        consumers={"group-claim": GROUP_REF},
    ),
    Case(
        "podgroup-claim-template",
        "TestPlugin/podgroup-claim-template: the generated claim is owned by the PodGroup",
        [
            *BASE,
            pod_group(BY_TEMPLATE, statuses={"gpu": "pg-gpu-1"}),
            owned_by(claim("pg-gpu-1", allocation=ALLOCATED), "PodGroup", GROUP),
            member(templates={"gpu": "pg-gpu-1"}),
        ],
        consumers={"pg-gpu-1": GROUP_REF},
    ),
    Case(
        "podgroup-claim-template-feature-disabled",
        "IsForPod with acceptPodGroupOwner false: a PodGroup's claim is not the pod's",
        [
            *BASE,
            pod_group(BY_TEMPLATE),
            owned_by(claim("pg-gpu-1", allocation=ALLOCATED), "PodGroup", GROUP),
            member(templates={"gpu": "pg-gpu-1"}),
        ],
        features=OFF,
        outcome="ResourceClaim default/pg-gpu-1 was not created for Pod default/my-pod (Pod is not owner)",
    ),
    Case(
        "podgroup-claim-template-other-group",
        "IsForPod: owned by another PodGroup",
        [
            *BASE,
            pod_group(BY_TEMPLATE),
            owned_by(claim("pg-gpu-1", allocation=ALLOCATED), "PodGroup", "other"),
            member(templates={"gpu": "pg-gpu-1"}),
        ],
        outcome="ResourceClaim default/pg-gpu-1 was not created for Pod default/my-pod "
        "(neither Pod nor PodGroup my-podgroup is the owner)",
    ),
    Case(
        "podgroup-claim-template-owner-of-another-api-group",
        "isForPodGroupByPod compares the owner's API group (any version of scheduling.k8s.io)",
        [
            *BASE,
            pod_group(BY_TEMPLATE),
            owned_by(claim("pg-gpu-1", allocation=ALLOCATED), "PodGroup", GROUP, "example.com/v1"),
            member(templates={"gpu": "pg-gpu-1"}),
        ],
        outcome="ResourceClaim default/pg-gpu-1 was not created for Pod default/my-pod (neither",
    ),
    Case(
        "podgroup-missing",
        "podResourceClaimBindings -> getPodGroup: the lister's NotFound",
        [*BASE, group_claim(), *pod_ref_for("group-claim")],
        outcome='podgroup.scheduling.k8s.io "my-podgroup" not found',
    ),
    Case(
        "podgroup-claim-without-names",
        "BindTo: a PodGroup entry with neither name set",
        [*BASE, pod_group({"name": "broken"}, BY_NAME), group_claim(), *pod_ref_for("group-claim")],
        outcome="PodGroup default/my-podgroup claim broken: none of the supported fields are set",
    ),
    Case(
        "pod-claim-the-group-does-not-name",
        "BindTo: a pod claim that matches no PodGroup entry is reserved for the pod",
        [*BASE, pod_group(BY_TEMPLATE), claim("own"), *pod_ref_for("own")],
    ),
    Case(
        "reserved-okay-podgroup",
        "TestPlugin/reserved-okay-podgroup: already reserved for the group (by name: pods do not know its UID)",
        [
            *BASE,
            pod_group(BY_NAME),
            reserved(
                owned_by(group_claim(allocation=ALLOCATED), "PodGroup", GROUP), {**GROUP_REF, "uid": "other"}
            ),
            *pod_ref_for("group-claim"),
        ],
        consumers={"group-claim": GROUP_REF},
    ),
]


def engine_for(case: Case) -> tuple[Engine, ClusterState]:
    state = ClusterState.from_objects(case.objects)
    assert not state.problems, state.problems
    return assemble(
        state, MemoryAPI(MemoryStore()), CelEnvironment(), EngineConfig(features=case.features)
    ), state


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_prefilter_and_filter(case: Case) -> None:
    engine, state = engine_for(case)
    p = state.pods[("default", "my-pod")]
    result = engine.filter(p, ["node-1"])
    claims = engine.snapshot().claims_of(p)
    if case.outcome == "fits":
        assert result.passed == ["node-1"], result
        assert {k[1]: v for k, v in claims.consumers.items()} == case.consumers
    else:
        assert result.passed == [] and not result.error, result
        assert (result.unresolvable.get("node-1") or "").startswith(case.outcome), result


def test_a_group_reservation_counts_as_the_pods_when_the_claim_is_full() -> None:
    """IsReservedForPod with the gate: a claim at ReservedForMaxSize (256) that lists the pod's
    PodGroup is not "in use" for that pod; without the gate it is."""
    full = [{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(255)]
    objects = [
        *BASE,
        pod_group(BY_NAME),
        reserved(owned_by(group_claim(allocation=ALLOCATED), "PodGroup", GROUP), *full, GROUP_REF),
        *pod_ref_for("group-claim"),
    ]
    for features, fits in ((ON, True), (OFF, False)):
        engine, state = engine_for(Case("full", "", objects, features))
        result = engine.filter(state.pods[("default", "my-pod")], ["node-1"])
        assert (result.passed == ["node-1"]) == fits, (features, result)
        if not fits:
            assert "resourceclaim in use" in (result.unresolvable.get("node-1") or "")
