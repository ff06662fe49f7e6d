"""The releases table: each Kubernetes minor's DRA gates, the rules that changed, the flag's syntax."""

from __future__ import annotations

import pytest

from extender.allocator import FeatureGateError, Features, parse_feature_gates
from extender.allocator.features import GATES
from extender.allocator.releases import RELEASES, ReleaseError, parse_release, release_of

#: name: (release, gate, exists, default, locked) -- read off each release's gate table.
GATE_ROWS = {
    "1.34 has no DeviceTaintRules": (34, "DRADeviceTaintRules", False, False, False),
    "1.34 partitionable devices alpha off": (34, "DRAPartitionableDevices", True, False, False),
    "1.35 prioritized list beta on": (35, "DRAPrioritizedList", True, True, False),
    "1.35 admin access beta, changeable": (35, "DRAAdminAccess", True, True, False),
    "1.36 admin access GA locked": (36, "DRAAdminAccess", True, True, True),
    "1.36 taint rules beta off": (36, "DRADeviceTaintRules", True, False, False),
    "1.36 consumable capacity beta on": (36, "DRAConsumableCapacity", True, True, False),
    "1.36 has no optional node operations": (36, "DRAOptionalNodeOperations", False, False, False),
    "1.37 taint rules GA on": (37, "DRADeviceTaintRules", True, True, False),
    "1.37 extended resources GA locked": (37, "DRAExtendedResource", True, True, True),
    "1.37 workload claims beta off": (37, "DRAWorkloadResourceClaims", True, False, False),
    "1.38 consumable capacity GA": (38, "DRAConsumableCapacity", True, True, False),
    "1.38 device taints locked": (38, "DRADeviceTaints", True, True, True),
}


@pytest.mark.parametrize("row", GATE_ROWS.values(), ids=GATE_ROWS.keys())
def test_gate_tables(row: tuple[int, str, bool, bool, bool]) -> None:
    minor, gate, exists, default, locked = row
    gates = release_of(minor).gates
    assert (gate in gates) == exists
    if exists:
        assert (gates[gate].default, gates[gate].locked) == (default, locked)


def test_the_default_gate_table_is_1_37s() -> None:
    assert release_of(37).gates == GATES
    assert Features.from_gates(None) == Features.from_gates(None, release_of(37)) == Features()


def test_features_follow_the_release_defaults() -> None:
    old = Features.from_gates(None, release_of(34))
    assert not (old.partitionable_devices or old.device_taints or old.consumable_capacity)
    assert not (old.device_taint_rules or old.extended_resource or old.device_binding)
    assert old.admin_access and old.prioritized_list
    assert not Features.from_gates(None, release_of(36)).device_taint_rules
    assert Features.from_gates({"DRADeviceTaintRules": True}, release_of(36)).device_taint_rules


def test_a_gate_the_release_does_not_have_is_unknown() -> None:
    with pytest.raises(
        FeatureGateError, match=r"unrecognized feature gate: DRAOptionalNodeOperations \(Kubernetes 1.36\)"
    ):
        parse_feature_gates("DRAOptionalNodeOperations=true", release=release_of(36))
    with pytest.raises(FeatureGateError, match="locked to true"):
        parse_feature_gates("DRAAdminAccess=false", release=release_of(36))
    assert parse_feature_gates("DRAAdminAccess=false", release=release_of(35)) == {"DRAAdminAccess": False}


def test_unsupported_gates_are_refused_in_every_release_that_has_them() -> None:
    for release in RELEASES.values():
        for name, spec in release.gates.items():
            if spec.unsupported_on is not None:
                with pytest.raises(FeatureGateError, match="not supported by dra-extender"):
                    parse_feature_gates(f"{name}=true", release=release)


def test_rules_that_changed_in_1_38() -> None:
    for minor, since in ((36, False), (37, False), (38, True)):
        release = release_of(minor)
        assert release.pdb_selectors_as_policy_v1 is since
        assert release.preempts_for_extenders is since


VERSIONS = [("1.36", 36), ("v1.37.0", 37), (" 1.38 ", 38), ("1.34.2", 34)]


@pytest.mark.parametrize(("text", "minor"), VERSIONS, ids=[v[0] for v in VERSIONS])
def test_parse_release(text: str, minor: int) -> None:
    assert parse_release(text).minor == minor


@pytest.mark.parametrize(
    ("text", "message"), [("1.33", "not supported"), ("2.0", "expected 1.MINOR"), ("x", "expected")]
)
def test_parse_release_refuses(text: str, message: str) -> None:
    with pytest.raises(ReleaseError, match=message):
        parse_release(text)


def test_every_release_says_what_it_was_checked_against() -> None:
    for release in RELEASES.values():
        assert release.checked_against
    assert "f54c212e3a2f75d674b717a9b29052b20b60aefc" in release_of(37).checked_against
