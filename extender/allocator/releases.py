"""Kubernetes releases the extender decides like: their DRA gate tables and the rules that differ.

One row per minor release. ``--kubernetes-version`` selects one (default: the API server's
``/version`` in cluster mode, :data:`DEFAULT_MINOR` offline); the gate table gives the defaults
``--feature-gates`` starts from, and the rules say where kube-scheduler of that release decides
differently. Each row names the upstream source its behaviour was checked against: released
source where it exists here (a tag, or the released tree another repository vendors), else the
newest stored file plus the fixing pull requests (kubernetes/kubernetes).

The allocator follows the newest patch release of each minor. Fixes that reached only some
minors are listed in :data:`ALLOCATOR_FIXES`; the allocator has their fixed behaviour in every
release (an older patch release may still refuse a placement the newest one accepts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class ReleaseError(ValueError):
    """A Kubernetes version the extender does not know, or a malformed one."""


@dataclass(frozen=True, slots=True)
class GateSpec:
    default: bool
    locked: bool
    maturity: str
    #: Why the extender refuses to turn this gate on (None: supported either way). These gates
    #: change what kube-scheduler decides in ways the extender does not implement yet, so
    #: accepting them would make filter answer differently from the scheduler it mirrors.
    unsupported_on: str | None = None


#: Gates the extender refuses to turn on, and what turning them on would need.
UNSUPPORTED: dict[str, str] = {
    "DRASharedConsumableCapacity": "consumable capacity shared across devices",
}

_STAGES = {"A": "alpha", "B": "beta", "GA": "GA"}

#: Gate -> minor -> stage: A/B/GA, then ``+`` on or ``-`` off by default, ``!`` locked (on).
#: A minor missing from a row: the gate does not exist in that release. Sources: each
#: release's versioned gate table (pkg/features/versioned_kube_features.go); 1.38 is the plan
#: as of November 2026 (kubernetes#141946 removes DynamicResourceAllocation, read as locked).
_GATE_TABLE: dict[str, dict[int, str]] = {
    "DynamicResourceAllocation": {34: "GA+", 35: "GA!", 36: "GA!", 37: "GA!", 38: "GA!"},
    "DRAAdminAccess": {34: "B+", 35: "B+", 36: "GA!", 37: "GA!", 38: "GA!"},
    "DRAPrioritizedList": {34: "B+", 35: "B+", 36: "GA+", 37: "GA!", 38: "GA!"},
    "DRAPartitionableDevices": {34: "A-", 35: "A-", 36: "B+", 37: "B+", 38: "B+"},
    "DRADeviceTaints": {34: "A-", 35: "A-", 36: "B+", 37: "GA+", 38: "GA!"},
    "DRADeviceTaintRules": {35: "A-", 36: "B-", 37: "GA+", 38: "GA!"},
    "DRAConsumableCapacity": {34: "A-", 35: "A-", 36: "B+", 37: "B+", 38: "GA+"},
    "DRADeviceBindingConditions": {34: "A-", 35: "A-", 36: "B+", 37: "B+", 38: "B+"},
    "DRAResourceClaimDeviceStatus": {34: "B+", 35: "B+", 36: "B+", 37: "GA!", 38: "GA!"},
    "DRAExtendedResource": {34: "A-", 35: "A-", 36: "B+", 37: "GA!", 38: "GA!"},
    "DRASchedulerFilterTimeout": {34: "B+", 35: "B+", 36: "B+", 37: "B+", 38: "B+"},
    "DRAListTypeAttributes": {36: "A-", 37: "A-", 38: "A-"},
    "DRAOptionalNodeOperations": {37: "A-", 38: "B-"},
    "DRAFractionalCapacityRange": {37: "B-", 38: "B-"},
    "DRADerivedAttributes": {37: "A-", 38: "B-"},
    "DRADeviceCompatibilityGroups": {37: "A-", 38: "B-"},
    "DRANodeAllocatableResources": {36: "A-", 37: "A-", 38: "B-"},
    "DRAWorkloadResourceClaims": {36: "A-", 37: "B-", 38: "B-"},
    # Not in v1.37.0 (kubernetes#140084 was not merged; KEP-5941 targets 1.38).
    "DRASharedConsumableCapacity": {38: "A-"},
    # Gates that do not change scheduling decisions (API server, controller manager, kubelet).
    "DRAResourcePoolStatus": {36: "A-", 37: "A-", 38: "A-"},
    "DRAPartitionableDevicesType": {37: "A-", 38: "A-"},
    # Not DRA's, but DRAWorkloadResourceClaims needs it (PodGroups exist only with it).
    "GenericWorkload": {35: "A-", 36: "A-", 37: "B-", 38: "B-"},
}

#: Gate -> the gates it needs on (pkg/features/kube_features.go defaultKubernetesFeatureGateDependencies,
#: v1.36.3): kube-scheduler refuses to start with it on and one of them off, and so do we.
DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "DRAWorkloadResourceClaims": ("DynamicResourceAllocation", "GenericWorkload"),
}


#: Gates the extender refuses from a release on: gate -> (first minor refused, what it would need).
UNSUPPORTED_FROM: dict[str, tuple[int, str]] = {
    "DRANodeAllocatableResources": (
        38,
        "1.38's beta API for node-allocatable devices (the pod status field renamed to "
        "additionalNodeAllocatableResources, kubernetes/enhancements#6324); 1.36's and 1.37's "
        "alpha APIs work with --kubernetes-version 1.36 or 1.37",
    ),
}


def _spec(name: str, stage: str, minor: int) -> GateSpec:
    maturity, mark = stage[:-1], stage[-1]
    unsupported = UNSUPPORTED.get(name)
    since = UNSUPPORTED_FROM.get(name)
    if since is not None and minor >= since[0]:
        unsupported = since[1]
    return GateSpec(mark in "+!", mark == "!", _STAGES[maturity], unsupported)


@dataclass(frozen=True, slots=True)
class Release:
    minor: int
    #: Where this release's behaviour was checked (see the module docstring).
    checked_against: str
    released: bool = True

    @property
    def name(self) -> str:
        return f"1.{self.minor}"

    @property
    def gates(self) -> dict[str, GateSpec]:
        """The DRA gates this release has, with its defaults."""
        return {
            name: _spec(name, stages[self.minor], self.minor)
            for name, stages in _GATE_TABLE.items()
            if self.minor in stages
        }

    # --- kube-scheduler rules that changed between releases ------------------------------------

    @property
    def filter_timeout_is_error(self) -> bool:
        """An allocation that runs out of time fails Filter with an error, so the pod goes to
        back-off and is tried again, instead of being unschedulable on that node until a cluster
        event (kubernetes#137607, 1.36)."""
        return self.minor >= 36

    @property
    def deallocates_pod_group_claims(self) -> bool:
        """With DRAWorkloadResourceClaims, PostFilter deallocates an unavailable claim reserved
        for nothing but the pod's PodGroup at once (PodGroupPostFilter,
        deallocatePodGroupClaims, kubernetes#139864, 1.37); 1.36 only removes the group's
        reservation (unreservePodGroupClaims) and a later attempt deallocates."""
        return self.minor >= 37

    @property
    def pdb_selectors_as_policy_v1(self) -> bool:
        """Preemption reads PodDisruptionBudget selectors as policy/v1 defines them: ``{}`` is
        every pod of the namespace and unlabelled pods are matched (kubernetes#141785, 1.38);
        before, ``{}`` and unlabelled pods matched nothing."""
        return self.minor >= 38

    @property
    def preempts_for_extenders(self) -> bool:
        """kube-scheduler hands the preempt verb nodes that fit with no in-tree victims, as
        placeholders, and drops those still without victims after the last extender
        (kubernetes#135486, 1.38): what ``--device-preemption`` needs."""
        return self.minor >= 38


RELEASES: dict[int, Release] = {
    34: Release(
        34, "kubernetes/dynamic-resource-allocation tag v0.34.x (release-1.34) and the 1.34 gate table"
    ),
    35: Release(35, "kubernetes/dynamic-resource-allocation release-1.35 and the 1.35 gate table"),
    36: Release(
        36,
        "v1.36.3 as vendored by openshift/microshift release-5.0 (deps/github.com/openshift/kubernetes), "
        "the source of the real-control-plane binaries; kubernetes#140435 from its v1.36.4 cherry-pick",
    ),
    37: Release(
        37,
        "v1.37.0 (f54c212e3a2f75d674b717a9b29052b20b60aefc): allocator fixes #140431, #140435, #140437, "
        "#140325, #140600 from their pull requests (#140431 read at v1.36.3), DynamicResources plugin at "
        "4966917a139d6a29f8ef316ceb405b171bb362c2 (1.37 development); DRADerivedAttributes from the "
        "experimental allocator at 4426859 and its constraint.go at 121460de (kubernetes#140029); the "
        "second node-allocatable API from nodeallocatabledynamicresources.go at af7eeeb2 (the merge of "
        "kubernetes#140009) and kubernetes/api at 10b39a39",
    ),
    38: Release(38, "plan as of November 2026: kubernetes#135486, #141785, #141946 (merged for 1.38)", False),
}

DEFAULT_MINOR = 37

#: Allocator fixes that shipped in some releases only (all of them are in the allocator here).
ALLOCATOR_FIXES: Mapping[str, str] = {
    "kubernetes#140431": "a rejected candidate releases the counters it charged: v1.37.0, v1.36.3",
    "kubernetes#140435": "counter caches keyed by driver and pool: v1.37.0, v1.36.4",
    "kubernetes#140437": "a persisted share pays a shared device's counters: v1.37.0",
    "kubernetes#140325": "list-valued matchAttribute restores its intersection on backtrack: v1.37.0",
}


def parse_release(text: str) -> Release:
    """``1.36``, ``v1.37.0``, ``1.38`` -> the release; anything else is a :class:`ReleaseError`."""
    raw = text.strip().lstrip("v")
    parts = raw.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]) or parts[0] != "1":
        raise ReleaseError(f"invalid Kubernetes version {text!r}: expected 1.MINOR, e.g. 1.37")
    return release_of(int(parts[1]), text)


def release_of(minor: int, shown: str | None = None) -> Release:
    found = RELEASES.get(minor)
    if found is None:
        known = ", ".join(r.name for r in RELEASES.values())
        raise ReleaseError(f"Kubernetes {shown or f'1.{minor}'} is not supported (known: {known})")
    return found
