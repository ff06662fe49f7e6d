"""Feature gates: Kubernetes 1.37 names, defaults, locks, and the gates the extender refuses to turn on."""

from __future__ import annotations

import pytest

from extender.allocator.features import GATES, FeatureGateError, Features, parse_feature_gates
from extender.allocator.releases import release_of
from tests.allocator.harness import allocate
from tests.builders import claim, device, device_class, resource_slice

#: (gate, 1.37 default) for the gates 1.37 added or changed (upstream-1.37.md gate table).
DEFAULTS_1_37 = [
    ("DRAOptionalNodeOperations", False),
    ("DRAFractionalCapacityRange", False),
    ("DRADerivedAttributes", False),
    ("DRADeviceCompatibilityGroups", False),
    ("DRANodeAllocatableResources", False),
    ("DRAWorkloadResourceClaims", False),
    ("DRAResourcePoolStatus", False),
    ("DRAPartitionableDevicesType", False),
    ("DRAExtendedResource", True),
    ("DRADeviceTaints", True),
    ("DRAConsumableCapacity", True),
    ("DRADeviceBindingConditions", True),
]


@pytest.mark.parametrize(("gate", "default"), DEFAULTS_1_37, ids=[g for g, _ in DEFAULTS_1_37])
def test_1_37_gates_are_recognized_with_their_defaults(gate: str, default: bool) -> None:
    assert GATES[gate].default is default
    # Setting a gate to its default is always accepted.
    assert parse_feature_gates(f"{gate}={str(default).lower()}") == {gate: default}


def test_every_1_37_gate_may_be_turned_on() -> None:
    """Each gate of 1.37 is built (1.38's planned DRASharedConsumableCapacity is refused below)."""
    for gate, spec in GATES.items():
        if not spec.locked:
            extra = ",GenericWorkload=true" if gate == "DRAWorkloadResourceClaims" else ""
            assert parse_feature_gates(f"{gate}=true{extra}")[gate] is True


def test_fractional_capacity_ranges_may_be_turned_on() -> None:
    gates = parse_feature_gates("DRAFractionalCapacityRange=true")
    assert Features.from_gates(gates).fractional_capacity_range


def test_derived_attributes_may_be_turned_on_and_select_the_experimental_allocator() -> None:
    """v1.37.0: only the experimental allocator supports DerivedAttributes (its SupportedFeatures)."""
    features = Features.from_gates(parse_feature_gates("DRADerivedAttributes=true"))
    assert features.derived_attributes and features.variant == "experimental"
    assert Features.from_gates({}).variant == "incubating"


def test_shared_consumable_capacity_is_not_a_1_37_gate() -> None:
    """kubernetes#140084 was not merged for 1.37 (KEP-5941 targets 1.38): a 1.37 kube-scheduler
    does not know the name; 1.38's (planned alpha) is refused, as the extender does not build it."""
    with pytest.raises(FeatureGateError, match="unrecognized feature gate: DRASharedConsumableCapacity"):
        parse_feature_gates("DRASharedConsumableCapacity=true")
    with pytest.raises(FeatureGateError, match="is not supported by dra-extender"):
        parse_feature_gates("DRASharedConsumableCapacity=true", release=release_of(38))


def test_node_allocatable_resources_select_the_release_s_api() -> None:
    """1.36 reads nodeAllocatableResourceMappings; 1.37 its second alpha API (kubernetes#140009)."""
    old = Features.parse("DRANodeAllocatableResources=true", release=release_of(36))
    new = Features.parse("DRANodeAllocatableResources=true")
    assert old.node_allocatable_resources and not old.node_allocatable_second_api
    assert new.node_allocatable_second_api
    with pytest.raises(FeatureGateError, match=r"1\.38's beta API"):
        parse_feature_gates("DRANodeAllocatableResources=true", release=release_of(38))


def test_workload_claims_need_generic_workload_as_kube_scheduler_says() -> None:
    """kube-scheduler v1.36.3 refuses ``--feature-gates DRAWorkloadResourceClaims=true`` alone with
    exactly this message (the real binary, run once by hand; kube_features.go dependencies)."""
    with pytest.raises(
        FeatureGateError,
        match=r"^DRAWorkloadResourceClaims is enabled, but depends on features that are disabled: \[GenericWorkload\]$",
    ):
        parse_feature_gates("DRAWorkloadResourceClaims=true")
    both = parse_feature_gates("DRAWorkloadResourceClaims=true,GenericWorkload=true")
    assert Features.from_gates(both).workload_resource_claims


def test_gates_without_scheduling_effect_may_be_turned_on() -> None:
    assert parse_feature_gates("DRAResourcePoolStatus=true,DRAPartitionableDevicesType=true") == {
        "DRAResourcePoolStatus": True,
        "DRAPartitionableDevicesType": True,
    }


def test_locked_gate_cannot_change() -> None:
    with pytest.raises(FeatureGateError, match="DRAExtendedResource to false, feature is locked to true"):
        parse_feature_gates("DRAExtendedResource=false")


@pytest.mark.parametrize("text", ["DRAPrioritizedList", "DRAPrioritizedList=yes", "NoSuchGate=true"])
def test_malformed_or_unknown_gates_are_refused(text: str) -> None:
    with pytest.raises(FeatureGateError):
        parse_feature_gates(text)


def test_optional_node_operations_is_implemented() -> None:
    assert Features.parse("DRAOptionalNodeOperations=true").optional_node_operations
    assert not Features.parse("").optional_node_operations


def skipping_slice() -> dict[str, object]:
    return resource_slice("s", [device("d")], skipNodeOperations=["NodePrepareResources"])


def test_results_copy_skip_node_operations_when_the_gate_is_on() -> None:
    # DeviceRequestAllocationResult.skipNodeOperations: "a copy of the ResourceSlice.spec.skipNodeOperations
    # value at the time when the device was allocated" (KEP-5945, gate DRAOptionalNodeOperations).
    # v1.37.0 allocateDevice refuses such a device unless the gate is on and the node declares
    # DRAOptionalNodeOperations in status.declaredFeatures (kubernetes#139933).
    objects = [device_class(), skipping_slice(), claim()]
    on = allocate(objects, gates="DRAOptionalNodeOperations=true", declares_optional_node_operations=True)
    assert on.results()[0]["skipNodeOperations"] == ["NodePrepareResources"]
    undeclared = allocate(objects, gates="DRAOptionalNodeOperations=true")
    assert undeclared.unsatisfiable and "1 skipping node operations, which this node does not declare" in (
        undeclared.unsatisfiable
    )
    off = allocate(objects, declares_optional_node_operations=True)
    assert off.unsatisfiable and "1 skipping node operations while DRAOptionalNodeOperations is off" in (
        off.unsatisfiable
    )


def test_devices_refused_for_skipping_node_operations_are_never_counted() -> None:
    """Prioritize's free-device count, the capacity gauges and the debug views read
    ``matching``: a device the allocator would refuse on this node is not one of its devices
    for these claims (neither free nor held by anyone)."""
    from extender.allocator import AllocatedState, Allocator, Inventory, NodeInfo
    from extender.cluster.state import ClusterState
    from tests.allocator.harness import cel_env

    state = ClusterState.from_objects([device_class(), skipping_slice(), claim()])
    claim_0 = state.claims[("default", "claim-0")]
    for gates, declares, free in [
        ("", True, False),
        ("DRAOptionalNodeOperations=true", False, False),
        ("DRAOptionalNodeOperations=true", True, True),
    ]:
        features = Features.parse(gates)
        inventory = Inventory(state.slices.values(), state.classes, features, ())
        allocator = Allocator(inventory, AllocatedState(features), cel_env())
        node = NodeInfo("node-1", {}, declares)
        expected = [("d", True)] if free else []
        assert [(d.id.device, f) for d, f in allocator.matching(node, [claim_0])] == expected, gates
        assert allocator.free_matching(node, [claim_0]) == int(free)
