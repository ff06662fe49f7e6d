"""How the real-control-plane harness starts each Kubernetes release it supports (issue 50).

The suite's expectations were written against 1.36's defaults (:data:`REFERENCE_MINOR`): the
DRA features on by default there (partitionable devices, device taints, consumable capacity,
binding conditions, extended resources) are what the tests exercise. On a release where such a
feature is still alpha and off, the harness turns its gate on in every component (kube-apiserver,
which otherwise drops the fields, kube-scheduler, kube-controller-manager and the extender), so
the same tests ask the same questions of every release. What a release cannot do at all (a gate
it does not have) is a skip that names the release the feature starts in.

Gates and their stages come from the extender's own table (extender/allocator/releases.py, read
from each release's pkg/features/versioned_kube_features.go), so the harness and the extender
never disagree about what a release has. The API versions that differ are below, each with the
release it was read from; objects the tests create ask :class:`HarnessRelease` for them.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.allocator.releases import RELEASES, release_of

#: The releases the harness runs: every release the extender decides like.
SUPPORTED_MINORS: tuple[int, ...] = tuple(sorted(RELEASES))
#: The release whose defaults the tests were written against.
REFERENCE_MINOR = 36


def supported_range() -> str:
    return f"1.{SUPPORTED_MINORS[0]} to 1.{SUPPORTED_MINORS[-1]}"


@dataclass(frozen=True)
class HarnessRelease:
    minor: int

    @property
    def name(self) -> str:
        return f"1.{self.minor}"

    def has_gate(self, gate: str) -> bool:
        return gate in release_of(self.minor).gates

    @property
    def suite_gates(self) -> dict[str, bool]:
        """DRA gates on by default in the reference release but off here: on in every component.
        Empty from the reference release on."""
        reference = release_of(REFERENCE_MINOR).gates
        here = release_of(self.minor).gates
        return {
            name: True
            for name, spec in here.items()
            if not spec.default
            and not spec.locked
            and spec.unsupported_on is None
            and name in reference
            and reference[name].default
        }

    # --- DeviceTaintRules ------------------------------------------------------------------------

    @property
    def device_taint_rules_version(self) -> str:
        """Where kube-apiserver serves DeviceTaintRules: v1alpha3 in 1.34 and 1.35 (alpha),
        v1beta2 only in 1.36 (beta, v1.36.3 pkg/registry/resource/rest/storage_resource.go),
        v1 once GA (1.37)."""
        if self.minor <= 35:
            return "resource.k8s.io/v1alpha3"
        if self.minor == 36:
            return "resource.k8s.io/v1beta2"
        return "resource.k8s.io/v1"

    @property
    def device_taint_rules_gate(self) -> str:
        """The gate that turns DeviceTaintRules on in kube-scheduler and the extender: 1.34 has
        none of its own (they come with DRADeviceTaints, which the suite turns on there); 1.35
        (alpha) and 1.36 (beta, off) have DRADeviceTaintRules; GA from 1.37."""
        if not self.has_gate("DRADeviceTaintRules") or self.minor >= 37:
            return ""
        return "DRADeviceTaintRules=true"

    @property
    def device_taint_rules_runtime_config(self) -> str:
        """What kube-apiserver needs to serve them, from where it serves them: an alpha
        group-version whole (1.34, 1.35), the beta resource alone (1.36), nothing once GA."""
        version = self.device_taint_rules_version
        if version.endswith("/v1"):
            return ""
        return f"{version}=true" if "alpha" in version else f"{version}/devicetaintrules=true"

    # --- PodGroups ---------------------------------------------------------------------------------

    @property
    def pod_group_claims(self) -> str | None:
        """Why PodGroup claims cannot be tested here (None: they can): DRAWorkloadResourceClaims
        starts in 1.36."""
        if self.has_gate("DRAWorkloadResourceClaims"):
            return None
        return f"PodGroup claims (DRAWorkloadResourceClaims) start in 1.36; these binaries are {self.name}"

    @property
    def pod_group_version(self) -> str:
        """scheduling.k8s.io's PodGroup: v1alpha2 in 1.36 (GenericWorkload alpha), v1beta1 from
        1.37 (GenericWorkload beta, off: served only behind runtime-config either way)."""
        return "scheduling.k8s.io/v1alpha2" if self.minor <= 36 else "scheduling.k8s.io/v1beta1"

    @property
    def api_versions(self) -> dict[str, str]:
        """kind -> the apiVersion the tests' client uses for the kinds whose version differs."""
        return {"DeviceTaintRule": self.device_taint_rules_version, "PodGroup": self.pod_group_version}

    # --- node-allocatable devices ------------------------------------------------------------------

    @property
    def node_allocatable(self) -> str | None:
        """Why DRANodeAllocatableResources cannot be tested here (None: it can)."""
        if self.has_gate("DRANodeAllocatableResources") and self.minor <= 37:
            return None
        return (
            f"DRANodeAllocatableResources is alpha in 1.36 and 1.37 only (the harness's API for it); "
            f"these binaries are {self.name}"
        )


def gates_text(*parts: str | dict[str, bool]) -> str:
    """``A=true,B=false`` from gate strings and dicts, later parts winning, empty parts ignored."""
    merged: dict[str, str] = {}
    for part in parts:
        items = (
            [(k, str(v).lower()) for k, v in part.items()]
            if isinstance(part, dict)
            else [tuple(p.strip().split("=", 1)) for p in part.split(",") if p.strip()]
        )
        for name, value in items:
            merged.pop(name, None)
            merged[name] = value
    return ",".join(f"{k}={v}" for k, v in merged.items())
