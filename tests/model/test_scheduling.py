"""scheduling.k8s.io PodGroups and the pod's schedulingGroup, as the cache reads them."""

from __future__ import annotations

import pytest

from extender.cluster.state import ClusterState
from extender.model.core import parse_pod
from extender.model.errors import ObjectError
from extender.model.scheduling import parse_pod_group
from tests.builders import pod


def test_a_pod_group_and_its_claims() -> None:
    group = parse_pod_group(
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ns", "uid": "u"},
            "spec": {
                "resourceClaims": [
                    {"name": "a", "resourceClaimName": "c"},
                    {"name": "b", "resourceClaimTemplateName": "t"},
                ]
            },
            "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "g-b-1"}, {"name": "x"}]},
        }
    )
    assert group.key == ("ns", "g")
    assert [(c.name, c.resource_claim_name, c.resource_claim_template_name) for c in group.claims] == [
        ("a", "c", None),
        ("b", None, "t"),
    ]
    assert group.claim_statuses == {"b": "g-b-1", "x": None}
    assert group.consumer() == {
        "apiGroup": "scheduling.k8s.io",
        "resource": "podgroups",
        "name": "g",
        "uid": "u",
    }


def test_a_pod_group_needs_a_name_and_well_formed_claims() -> None:
    with pytest.raises(ObjectError, match=r"metadata\.name is required"):
        parse_pod_group({"kind": "PodGroup", "metadata": {}})
    with pytest.raises(ObjectError, match="expected"):
        parse_pod_group({"kind": "PodGroup", "metadata": {"name": "g"}, "spec": {"resourceClaims": "nope"}})


def test_the_pods_group_and_the_cache() -> None:
    raw = pod("p")
    assert parse_pod(raw).pod_group is None
    raw["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    assert parse_pod(raw).pod_group == "g"
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
    }
    state = ClusterState.from_objects([group])
    assert list(state.pod_groups) == [("default", "g")] and not state.problems
    state.remove(group)
    assert state.pod_groups == {}


def test_another_projects_pod_group_is_not_read() -> None:
    volcano = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
    }
    state = ClusterState.from_objects([volcano])
    assert state.pod_groups == {}
    assert state.problems == ["PodGroup default/g: kind not used for DRA scheduling, ignored"]
