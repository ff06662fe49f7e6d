"""Which release serve follows: the API server's /version, --kubernetes-version, the gates given."""

from __future__ import annotations

from typing import Any

from extender.allocator import Features
from extender.allocator.releases import release_of
from extender.cluster.api import ClusterAPIError
from extender.service.versions import ServerVersion, device_preemption_fallback, features_for, release_for


class FlakyVersion:
    """A RawKube whose /version fails ``failures`` times, then says 1.``minor``."""

    def __init__(self, failures: int, minor: int = 36) -> None:
        self.failures = failures
        self.minor = minor
        self.calls = 0

    def server_version(self) -> tuple[int, int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ClusterAPIError("GET /version: connection reset")
        return 1, self.minor


def read(raw: Any, attempts: int = 3) -> ServerVersion:
    return ServerVersion.read(raw, attempts=attempts, pause=lambda _: None)


def test_version_is_read_again_after_a_failure() -> None:
    assert read(FlakyVersion(2)).version == (1, 36)
    gave_up = read(FlakyVersion(3))
    assert gave_up.version is None and gave_up.error == "GET /version: connection reset"


def test_release_for_a_server() -> None:
    assert release_for(ServerVersion((1, 36)))[0].minor == 36
    newest, warning = release_for(ServerVersion((1, 41)))
    assert newest.minor == 38 and warning is not None and "1.41" in warning
    oldest, warning = release_for(ServerVersion((1, 30)))
    assert oldest.minor == 34 and warning is not None
    default, warning = release_for(ServerVersion(None, "refused"))
    assert default.minor == 37 and warning is not None and "refused" in warning


def test_gates_the_servers_release_lacks_or_locks_are_ignored_with_a_warning() -> None:
    features, warnings = features_for(
        release_of(36),
        {"DRAOptionalNodeOperations": True, "DRAAdminAccess": False, "DRADeviceTaintRules": True},
    )
    assert features == Features.from_gates({"DRADeviceTaintRules": True}, release_of(36))
    assert warnings == [
        "feature gate DRAOptionalNodeOperations does not exist in Kubernetes 1.36; ignored",
        "feature gate DRAAdminAccess is locked to true in Kubernetes 1.36; ignored",
    ]
    # What 1.36 locks, 1.35 lets an operator change.
    assert features_for(release_of(35), {"DRAAdminAccess": False}) == (
        Features.from_gates({"DRAAdminAccess": False}, release_of(35)),
        [],
    )


def test_device_preemption_needs_a_1_38_scheduler() -> None:
    assert device_preemption_fallback(ServerVersion((1, 38))) is None
    assert "1.37" in (device_preemption_fallback(ServerVersion((1, 37))) or "")
    assert "could not be read" in (device_preemption_fallback(ServerVersion(None, "timeout")) or "")
    # --kubernetes-version says which kube-scheduler runs, whatever the API server is.
    said = device_preemption_fallback(ServerVersion((1, 38)), release_of(37))
    assert said is not None and "--kubernetes-version 1.37" in said
    assert device_preemption_fallback(ServerVersion((1, 38)), release_of(38)) is None


def test_1_34_device_taint_rules_come_with_device_taints() -> None:
    """1.34 has no DRADeviceTaintRules gate: DeviceTaintRules were part of DRADeviceTaints."""
    assert not Features.from_gates(None, release_of(34)).device_taint_rules
    assert Features.from_gates({"DRADeviceTaints": True}, release_of(34)).device_taint_rules
