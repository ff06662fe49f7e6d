"""Which Kubernetes release to decide like, from ``--kubernetes-version`` or the API server.

kube-scheduler is never newer than kube-apiserver and normally matches it (the version skew
policy), so in cluster mode without ``--kubernetes-version`` the API server's ``/version``
says which release's gates and rules filter follows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from extender.allocator import Features
from extender.allocator.features import check_gates
from extender.allocator.releases import DEFAULT_MINOR, RELEASES, Release, release_of
from extender.cluster.api import ClusterAPIError

if TYPE_CHECKING:  # the Kubernetes client is imported only where a cluster is used
    from extender.cluster.kube import RawKube


@dataclass(frozen=True, slots=True)
class ServerVersion:
    """What ``/version`` said: (major, minor), or why it could not be read (``error``)."""

    version: tuple[int, int] | None
    error: str | None = None

    @classmethod
    def read(
        cls, raw: RawKube, *, attempts: int = 3, pause: Callable[[float], object] = time.sleep
    ) -> ServerVersion:
        """``/version``, tried ``attempts`` times (a second apart) before giving up."""
        error = ""
        for attempt in range(attempts):
            if attempt:
                pause(1.0)
            try:
                return cls(raw.server_version())
            except ClusterAPIError as exc:
                error = str(exc)
        return cls(None, error)

    @property
    def shown(self) -> str:
        return "unknown" if self.version is None else f"{self.version[0]}.{self.version[1]}"


def release_for(server: ServerVersion) -> tuple[Release, str | None]:
    """The release to follow beside this API server, and a warning when it is not one we know."""
    if server.version is None:
        why = server.error or "it does not say"
        return release_of(DEFAULT_MINOR), (
            f"the API server's version could not be read ({why}); deciding as Kubernetes 1.{DEFAULT_MINOR}"
        )
    minor = server.version[1]
    if minor in RELEASES:
        return RELEASES[minor], None
    nearest = max(RELEASES) if minor > max(RELEASES) else min(RELEASES)
    return RELEASES[nearest], (
        f"the API server is {server.shown}, which dra-extender does not know; deciding as "
        f"Kubernetes 1.{nearest} (give --kubernetes-version to choose)"
    )


def features_for(release: Release, gates: Mapping[str, bool]) -> tuple[Features, list[str]]:
    """``release``'s gate defaults with the operator's ``--feature-gates``; a gate that release
    does not have, or has locked to the other value, is left out with a warning (kube-scheduler
    of that release would refuse to start with it). One the extender does not implement in that
    release, or whose dependencies are off, is a :class:`FeatureGateError`."""
    known = release.gates
    kept: dict[str, bool] = {}
    warnings = []
    for name, value in gates.items():
        spec = known.get(name)
        if spec is None:
            warnings.append(f"feature gate {name} does not exist in Kubernetes {release.name}; ignored")
        elif spec.locked and value != spec.default:
            warnings.append(
                f"feature gate {name} is locked to {str(spec.default).lower()} in Kubernetes "
                f"{release.name}; ignored"
            )
        else:
            kept[name] = value
    check_gates(kept, release)  # a gate the extender does not implement in this release: refused
    return Features.from_gates(kept, release), warnings


def device_preemption_fallback(server: ServerVersion, release: Release | None = None) -> str | None:
    """Why --device-preemption must fall back to the in-tree answers here, or None.

    kube-scheduler is never newer than kube-apiserver, so an API server older than 1.38 means a
    kube-scheduler that cannot use it: there, nodes answered Unschedulable for devices make its
    in-tree preemption fail with "expected at least one victim pod on node" and retry the pod
    about a hundred times a second (measured with 1.36). ``release``: the one the operator gave
    with ``--kubernetes-version``, which says the same of kube-scheduler.
    """
    if release is not None and not release.preempts_for_extenders:
        return (
            f"--device-preemption is off: --kubernetes-version {release.name} says kube-scheduler cannot "
            "use it (only 1.38 and newer hand the preempt verb nodes without in-tree victims)"
        )
    if server.version is None and server.error is not None:
        return (
            f"--device-preemption is off: the API server's version could not be read ({server.error}), and "
            "kube-scheduler older than 1.38 turns it into a retry loop"
        )
    if server.version is None or release_for(server)[0].preempts_for_extenders:
        return None
    return (
        f"--device-preemption is off: the API server is {server.shown}, so kube-scheduler "
        "is 1.37 or older and cannot use it (its preemption would retry every pod short of devices "
        "in a loop); filter answers as the in-tree plugin does"
    )
