"""What the extender reads and where (extender/cluster/discovery.py): the kinds watched against
what a server serves, and a one-shot listing that tells a refusal (RBAC) from a failure."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster.api import ClusterAPIError
from extender.cluster.discovery import discover_once, list_all, watched
from extender.cluster.kube import PREFERRED_VERSIONS, Paths
from extender.cluster.state import ClusterState


class FakeRaw:
    """Answers by path; an int answer is the status code of a failed request."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def request(self, method: str, path: str, **_: Any) -> Any:
        answer = self.answers[path]
        if isinstance(answer, int):
            error = ClusterAPIError(f"{method} {path}: {answer}")
            error.code = answer
            raise error
        return answer


PATHS = Paths("v1", {"devicetaintrules": "v1beta2"})
KINDS = [("Node", "nodes", "v1"), ("ResourceClaim", "resourceclaims", "resource.k8s.io/v1")]


def test_items_get_their_kind_and_version_and_lose_managed_fields() -> None:
    raw = FakeRaw(
        {
            "/api/v1/nodes": {"items": [{"metadata": {"name": "n", "managedFields": [{"manager": "x"}]}}]},
            "/apis/resource.k8s.io/v1/resourceclaims": {"items": []},
        }
    )
    listing = list_all(raw, KINDS, PATHS)  # type: ignore[arg-type]
    assert listing.objects == [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}]
    assert listing.refused == {}


@pytest.mark.parametrize("code", [403, 404])
def test_a_kind_refused_is_noted_and_the_rest_listed(code: int) -> None:
    raw = FakeRaw(
        {"/api/v1/nodes": code, "/apis/resource.k8s.io/v1/resourceclaims": {"items": [{"metadata": {}}]}}
    )
    listing = list_all(raw, KINDS, PATHS)  # type: ignore[arg-type]
    assert list(listing.refused) == ["Node"] and str(code) in listing.refused["Node"]
    assert [o["kind"] for o in listing.objects] == ["ResourceClaim"]


@pytest.mark.parametrize("answer", [500, 0, ["not", "a", "list"], {"items": "nope"}])
def test_any_other_failure_raises(answer: Any) -> None:
    raw = FakeRaw({"/api/v1/nodes": answer})
    with pytest.raises(ClusterAPIError):
        list_all(raw, KINDS[:1], PATHS)  # type: ignore[arg-type]


# (case, served resource.k8s.io resources, device taint rules gate, PodGroups' version, kinds read)
WATCHED_CASES: list[tuple[str, set[str], bool, str | None, set[str]]] = [
    ("no gate, no PodGroups", {"resourceclaims", "devicetaintrules"}, False, None, {"ResourceClaim"}),
    ("the gate on and served", {"devicetaintrules"}, True, None, {"DeviceTaintRule"}),
    ("the gate on, not served", set(), True, None, set()),
    ("PodGroups found", set(), False, "v1alpha2", {"PodGroup"}),
]


@pytest.mark.parametrize(
    ("case", "served", "gate", "pod_groups", "dra_kinds"), WATCHED_CASES, ids=[c[0] for c in WATCHED_CASES]
)
def test_what_is_read_from_a_server(
    case: str, served: set[str], gate: bool, pod_groups: str | None, dra_kinds: set[str]
) -> None:
    paths = Paths("v1", {"devicetaintrules": "v1beta2"} if "devicetaintrules" in served else {}, pod_groups)
    read = {kind: version for kind, _, version in watched(paths, served, device_taint_rules=gate)}
    assert {"Node", "Pod", "PodDisruptionBudget"} <= set(read)
    assert set(read) - {"Node", "Pod", "PodDisruptionBudget"} == dra_kinds
    if "DeviceTaintRule" in read:
        assert read["DeviceTaintRule"] == "resource.k8s.io/v1beta2"  # served only at an older version
    if "PodGroup" in read:
        assert read["PodGroup"] == f"scheduling.k8s.io/{pod_groups}"


class ServedVersions:
    """Discovery of resource.k8s.io: version -> the resources served there (absent: 404)."""

    def __init__(self, served: dict[str, set[str]]) -> None:
        self.served = served

    def served_dra_versions(self) -> list[str]:
        return [v for v in PREFERRED_VERSIONS if v in self.served]

    def served_resources(self, version: str) -> set[str]:
        if version not in self.served:
            error = ClusterAPIError(f"GET /apis/resource.k8s.io/{version}: 404")
            error.code = 404
            raise error
        return self.served[version]


DRA = {"resourceslices", "resourceclaims", "deviceclasses", "resourceclaimtemplates"}

#: name -> (served: version -> resources, where DeviceTaintRules are read (None: nowhere))
TAINT_RULES_SERVED: dict[str, tuple[dict[str, set[str]], str | None]] = {
    "1.34 and 1.35: alpha, v1alpha3 only": (
        {"v1": DRA, "v1beta2": DRA, "v1alpha3": {"devicetaintrules"}},
        "v1alpha3",
    ),
    "1.36: beta, v1beta2 only": ({"v1": DRA, "v1beta2": DRA | {"devicetaintrules"}}, "v1beta2"),
    "1.37: GA, at v1": ({"v1": DRA | {"devicetaintrules"}, "v1beta2": DRA}, "v1"),
    "not served anywhere": ({"v1": DRA, "v1beta2": DRA}, None),
}


@pytest.mark.parametrize("case", list(TAINT_RULES_SERVED))
def test_device_taint_rules_are_read_where_the_release_serves_them(case: str) -> None:
    served, where = TAINT_RULES_SERVED[case]
    paths, resources = discover_once(ServedVersions(served))  # type: ignore[arg-type]
    assert paths.dra_version == "v1"
    if where is None:
        assert "devicetaintrules" not in resources
    else:
        assert "devicetaintrules" in resources
        assert paths.version_of("devicetaintrules") == where


def test_a_v1alpha3_device_taint_rule_is_kept_and_another_kind_at_it_is_not() -> None:
    state = ClusterState()
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "maintenance"},
        "spec": {
            "deviceSelector": {"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"},
            "taint": {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"},
        },
    }
    state.apply(rule)
    state.apply(
        {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceClass", "metadata": {"name": "gpu"}}
    )
    assert [r.name for r in state.taint_rules.values()] == ["maintenance"]
    assert not state.classes
    assert any("DeviceClass gpu: unsupported apiVersion" in p for p in state.problems), state.problems
