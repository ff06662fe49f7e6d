"""Kubernetes feature gates that change DRA allocation, with Kubernetes' names and syntax.

Defaults are a release's (:mod:`extender.allocator.releases`; 1.37 unless told).
``--feature-gates DRAPrioritizedList=true,DRADeviceTaints=false``
parses with :func:`parse_feature_gates`; a locked gate cannot be set to the other value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from extender.allocator.releases import DEFAULT_MINOR, DEPENDENCIES, RELEASES, GateSpec, Release, release_of


class FeatureGateError(ValueError):
    """An unknown gate, a malformed value, or an attempt to change a locked gate."""


#: The default release's gates (1.37), by name.
GATES: dict[str, GateSpec] = release_of(DEFAULT_MINOR).gates


def parse_feature_gates(
    text: str, *, allow_locked: bool = False, release: Release | None = None, any_release: bool = False
) -> dict[str, bool]:
    """``A=true,B=false`` -> {A: True, B: False}; rejects unknown gates and locked changes.

    Gates are ``release``'s (default 1.37): a gate that release does not have is unknown, as
    kube-scheduler of that release would say. ``allow_locked`` lets tests reproduce older
    releases' behaviour (upstream's own tests do the same through their emulation version).
    ``any_release``: the release is not known yet (it will be the API server's): any release's
    gate names are accepted, and what depends on the release is checked by :func:`check_gates`
    once it is known.
    """
    if any_release:
        table = {name: spec for r in RELEASES.values() for name, spec in r.gates.items()}
        return _parse(text, table, "any release", allow_locked=True, checked=False)
    table = GATES if release is None else release.gates
    version = f"1.{DEFAULT_MINOR}" if release is None else release.name
    return _parse(text, table, version, allow_locked=allow_locked, checked=True)


def check_gates(gates: Mapping[str, bool], release: Release) -> None:
    """What ``release`` says of these gates (they exist there): a gate the extender does not
    implement there, or one whose dependencies are off, is a :class:`FeatureGateError`."""
    text = ",".join(f"{name}={str(value).lower()}" for name, value in gates.items())
    parse_feature_gates(text, allow_locked=True, release=release)


def _parse(
    text: str, table: Mapping[str, GateSpec], version: str, *, allow_locked: bool, checked: bool
) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or value not in ("true", "false"):
            raise FeatureGateError(f"invalid feature gate {part!r}: expected NAME=true|false")
        spec = table.get(name)
        if spec is None:
            raise FeatureGateError(f"unrecognized feature gate: {name} (Kubernetes {version})")
        enabled = value == "true"
        if spec.locked and enabled != spec.default and not allow_locked:
            raise FeatureGateError(
                f"cannot set feature gate {name} to {str(enabled).lower()}, feature is locked to "
                f"{str(spec.default).lower()}"
            )
        if checked and enabled and spec.unsupported_on is not None:
            raise FeatureGateError(
                f"feature gate {name}=true is not supported by dra-extender: it would need "
                f"{spec.unsupported_on}, which the extender does not implement; leave it off "
                f"(its {version} default) or let the in-tree DynamicResources plugin schedule such pods"
            )
        out[name] = enabled
    for name, needs in DEPENDENCIES.items() if checked else ():
        if out.get(name, name in table and table[name].default):
            off = [n for n in needs if not out.get(n, n in table and table[n].default)]
            if off:
                # kube-scheduler's own words (component-base featuregate dependencies).
                raise FeatureGateError(
                    f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]"
                )
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
    #: DRAWorkloadResourceClaims: claims shared by a PodGroup's pods are reserved for the group.
    workload_resource_claims: bool = False
    #: DRANodeAllocatableResources (1.36's API): devices that stand for node cpu, memory, ...
    node_allocatable_resources: bool = False
    #: DRAFractionalCapacityRange: fractional validRange bounds work in milli-units.
    fractional_capacity_range: bool = False
    #: DRADeviceCompatibilityGroups: devices on one counter set must share a compatibility group.
    device_compatibility_groups: bool = False
    #: DRADerivedAttributes: requests' CEL-derived attributes stand in for device attributes in
    #: constraints.
    derived_attributes: bool = False
    #: 1.37+: the allocator knows compatibility groups (with the gate off it ignores slices that
    #: name them), and writes a validRange's rounded-up consumption in the step's format (1.36:
    #: BinarySI).
    since_1_37: bool = True

    @classmethod
    def from_gates(
        cls, overrides: Mapping[str, bool] | None = None, release: Release | None = None
    ) -> Features:
        """``release``'s defaults (1.37 when None) with ``overrides``; a gate the release does not
        have is off."""
        table = GATES if release is None else release.gates
        gates = {name: spec.default for name, spec in table.items()}
        gates.update(overrides or {})

        def on(name: str) -> bool:
            return gates.get(name, False)

        return cls(
            admin_access=on("DRAAdminAccess"),
            prioritized_list=on("DRAPrioritizedList"),
            partitionable_devices=on("DRAPartitionableDevices"),
            device_taints=on("DRADeviceTaints"),
            # 1.34 has no DRADeviceTaintRules: DeviceTaintRules came with DRADeviceTaints.
            device_taint_rules=on("DRADeviceTaints")
            and gates.get("DRADeviceTaintRules", on("DRADeviceTaints")),
            consumable_capacity=on("DRAConsumableCapacity"),
            device_binding=on("DRADeviceBindingConditions") and on("DRAResourceClaimDeviceStatus"),
            list_type_attributes=on("DRAListTypeAttributes"),
            extended_resource=on("DRAExtendedResource"),
            filter_timeout=on("DRASchedulerFilterTimeout"),
            optional_node_operations=on("DRAOptionalNodeOperations"),
            workload_resource_claims=on("DRAWorkloadResourceClaims"),
            node_allocatable_resources=on("DRANodeAllocatableResources"),
            fractional_capacity_range=on("DRAFractionalCapacityRange"),
            device_compatibility_groups=on("DRADeviceCompatibilityGroups"),
            derived_attributes=on("DRADerivedAttributes"),
            since_1_37=(release.minor if release is not None else DEFAULT_MINOR) >= 37,
        )

    @classmethod
    def parse(cls, text: str, *, allow_locked: bool = False, release: Release | None = None) -> Features:
        return cls.from_gates(parse_feature_gates(text, allow_locked=allow_locked, release=release), release)

    @property
    def node_allocatable_second_api(self) -> bool:
        """DRANodeAllocatableResources with 1.37's API (kubernetes#140009): mapping and overhead."""
        return self.node_allocatable_resources and self.since_1_37

    @property
    def variant(self) -> str:
        """Which upstream implementation these features select (stable -> incubating -> experimental)."""
        if self.list_type_attributes or self.derived_attributes:
            return "experimental"
        if self.consumable_capacity or self.device_binding:
            return "incubating"
        return "stable"
