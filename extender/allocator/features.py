"""Kubernetes feature gates that change DRA allocation, with Kubernetes' names and syntax.

Defaults are the newest release's (1.37). ``--feature-gates DRAPrioritizedList=true,DRADeviceTaints=false``
parses with :func:`parse_feature_gates`; a locked gate cannot be set to the other value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class FeatureGateError(ValueError):
    """An unknown gate, a malformed value, or an attempt to change a locked gate."""


@dataclass(frozen=True, slots=True)
class GateSpec:
    default: bool
    locked: bool
    maturity: str
    #: Why the extender refuses to turn this gate on (None: supported either way). These gates
    #: change what kube-scheduler 1.37 decides in ways the extender does not implement yet, so
    #: accepting them would make filter answer differently from the scheduler it claims to mirror.
    unsupported_on: str | None = None


#: Kubernetes 1.37 defaults (source: the versioned gate table of the 1.37 line).
GATES: dict[str, GateSpec] = {
    "DynamicResourceAllocation": GateSpec(True, True, "GA"),
    "DRAAdminAccess": GateSpec(True, True, "GA"),
    "DRAPrioritizedList": GateSpec(True, True, "GA"),
    "DRAPartitionableDevices": GateSpec(True, False, "beta"),
    "DRADeviceTaints": GateSpec(True, False, "GA"),
    "DRADeviceTaintRules": GateSpec(True, False, "GA"),
    "DRAConsumableCapacity": GateSpec(True, False, "beta"),
    "DRADeviceBindingConditions": GateSpec(True, False, "beta"),
    "DRAResourceClaimDeviceStatus": GateSpec(True, True, "GA"),
    "DRAExtendedResource": GateSpec(True, True, "GA"),
    "DRAListTypeAttributes": GateSpec(False, False, "alpha"),
    "DRASchedulerFilterTimeout": GateSpec(True, False, "beta"),
    # New in 1.37 (all off by default): one is implemented, the others are refused when turned on.
    "DRAOptionalNodeOperations": GateSpec(False, False, "alpha"),
    "DRAFractionalCapacityRange": GateSpec(
        False, False, "beta", "fractional validRange min/step values for consumable capacity"
    ),
    "DRADerivedAttributes": GateSpec(False, False, "alpha", "attributes derived from other attributes"),
    "DRADeviceCompatibilityGroups": GateSpec(
        False, False, "alpha", "device compatibility groups in the allocator"
    ),
    "DRANodeAllocatableResources": GateSpec(
        False, False, "alpha", "node-allocatable resources backed by devices (NodeResourcesFit accounting)"
    ),
    "DRAWorkloadResourceClaims": GateSpec(
        False, False, "beta", "PodGroup (workload) resource claims, which need the gang-scheduling cycle"
    ),
    "DRASharedConsumableCapacity": GateSpec(
        False, False, "alpha", "consumable capacity shared across devices"
    ),
    # Gates that do not change scheduling decisions (API server, controller manager, kubelet).
    "DRAResourcePoolStatus": GateSpec(False, False, "alpha"),
    "DRAPartitionableDevicesType": GateSpec(False, False, "alpha"),
}


def parse_feature_gates(text: str, *, allow_locked: bool = False) -> dict[str, bool]:
    """``A=true,B=false`` -> {A: True, B: False}; rejects unknown gates and locked changes.

    ``allow_locked`` lets tests reproduce older releases' behaviour (upstream's own tests do the
    same through their emulation version).
    """
    out: dict[str, bool] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or value not in ("true", "false"):
            raise FeatureGateError(f"invalid feature gate {part!r}: expected NAME=true|false")
        spec = GATES.get(name)
        if spec is None:
            raise FeatureGateError(f"unrecognized feature gate: {name}")
        enabled = value == "true"
        if spec.locked and enabled != spec.default and not allow_locked:
            raise FeatureGateError(
                f"cannot set feature gate {name} to {str(enabled).lower()}, feature is locked to "
                f"{str(spec.default).lower()}"
            )
        if enabled and spec.unsupported_on is not None:
            raise FeatureGateError(
                f"feature gate {name}=true is not supported by dra-extender: it would need "
                f"{spec.unsupported_on}, which the extender does not implement; leave it off "
                "(its 1.37 default) or let the in-tree DynamicResources plugin schedule such pods"
            )
        out[name] = enabled
    return out


@dataclass(frozen=True, slots=True)
class Features:
    """The allocator's view of the gates (upstream's ``structured.Features``)."""

    admin_access: bool = True
    prioritized_list: bool = True
    partitionable_devices: bool = True
    device_taints: bool = True
    device_taint_rules: bool = True
    consumable_capacity: bool = True
    #: DRADeviceBindingConditions and DRAResourceClaimDeviceStatus.
    device_binding: bool = True
    list_type_attributes: bool = False
    extended_resource: bool = True
    filter_timeout: bool = True
    #: DRAOptionalNodeOperations: results copy the slice's ``skipNodeOperations``.
    optional_node_operations: bool = False

    @classmethod
    def from_gates(cls, overrides: Mapping[str, bool] | None = None) -> Features:
        gates = {name: spec.default for name, spec in GATES.items()}
        gates.update(overrides or {})
        return cls(
            admin_access=gates["DRAAdminAccess"],
            prioritized_list=gates["DRAPrioritizedList"],
            partitionable_devices=gates["DRAPartitionableDevices"],
            device_taints=gates["DRADeviceTaints"],
            device_taint_rules=gates["DRADeviceTaints"] and gates["DRADeviceTaintRules"],
            consumable_capacity=gates["DRAConsumableCapacity"],
            device_binding=gates["DRADeviceBindingConditions"] and gates["DRAResourceClaimDeviceStatus"],
            list_type_attributes=gates["DRAListTypeAttributes"],
            extended_resource=gates["DRAExtendedResource"],
            filter_timeout=gates["DRASchedulerFilterTimeout"],
            optional_node_operations=gates["DRAOptionalNodeOperations"],
        )

    @classmethod
    def parse(cls, text: str, *, allow_locked: bool = False) -> Features:
        return cls.from_gates(parse_feature_gates(text, allow_locked=allow_locked))

    @property
    def variant(self) -> str:
        """Which upstream implementation these features select (stable -> incubating -> experimental)."""
        if self.list_type_attributes:
            return "experimental"
        if self.consumable_capacity or self.device_binding:
            return "incubating"
        return "stable"
