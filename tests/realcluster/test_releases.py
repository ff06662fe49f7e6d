"""What the harness starts each release with (tests/realcluster/releases.py): unit tests that
need no binaries, so a fresh clone checks the per-release choices the real runs depend on."""

from __future__ import annotations

import pytest

from tests.realcluster.releases import SUPPORTED_MINORS, HarnessRelease, gates_text

#: Features on by default in 1.36, the suite's reference, that are alpha and off before.
ALPHA_BEFORE_36 = {
    "DRADeviceTaints",
    "DRAPartitionableDevices",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRAExtendedResource",
}

#: minor -> the gates the suite turns on in every component there.
SUITE_GATES: dict[int, set[str]] = {
    34: ALPHA_BEFORE_36,
    35: ALPHA_BEFORE_36,
    36: set(),
    37: set(),
    38: set(),
}

#: minor -> (DeviceTaintRule apiVersion, gate, kube-apiserver runtime-config)
TAINT_RULES: dict[int, tuple[str, str, str]] = {
    34: ("resource.k8s.io/v1alpha3", "", "resource.k8s.io/v1alpha3=true"),
    35: ("resource.k8s.io/v1alpha3", "DRADeviceTaintRules=true", "resource.k8s.io/v1alpha3=true"),
    36: (
        "resource.k8s.io/v1beta2",
        "DRADeviceTaintRules=true",
        "resource.k8s.io/v1beta2/devicetaintrules=true",
    ),
    37: ("resource.k8s.io/v1", "", ""),
}


def test_every_release_the_extender_knows_is_supported() -> None:
    assert tuple(sorted(SUITE_GATES)) == SUPPORTED_MINORS


@pytest.mark.parametrize("minor", list(SUITE_GATES), ids=lambda m: f"1.{m}")
def test_the_suite_turns_on_what_1_36_has_on(minor: int) -> None:
    gates = HarnessRelease(minor).suite_gates
    assert set(gates) == SUITE_GATES[minor]
    assert all(gates.values())


@pytest.mark.parametrize("minor", list(TAINT_RULES), ids=lambda m: f"1.{m}")
def test_device_taint_rules_are_served_and_gated_as_each_release_does(minor: int) -> None:
    release = HarnessRelease(minor)
    assert (
        release.device_taint_rules_version,
        release.device_taint_rules_gate,
        release.device_taint_rules_runtime_config,
    ) == TAINT_RULES[minor]


@pytest.mark.parametrize(("minor", "testable"), [(34, False), (35, False), (36, True), (37, True)])
def test_pod_group_claims_and_node_allocatable_start_in_1_36(minor: int, testable: bool) -> None:
    release = HarnessRelease(minor)
    assert (release.pod_group_claims is None) is testable
    assert (release.node_allocatable is None) is testable
    if not testable:
        assert "start in 1.36" in str(release.pod_group_claims)


#: name -> (parts, merged)
MERGES: dict[str, tuple[tuple[str | dict[str, bool], ...], str]] = {
    "nothing": (("", {}), ""),
    "a dict then a string": (({"A": True}, "B=false"), "A=true,B=false"),
    "a later part wins": (("A=true,B=true", {"A": False}), "B=true,A=false"),
    "spaces and empty entries": ((" A=true , ,B=false",), "A=true,B=false"),
}


@pytest.mark.parametrize("case", list(MERGES))
def test_gates_merge_later_parts_winning(case: str) -> None:
    parts, merged = MERGES[case]
    assert gates_text(*parts) == merged
