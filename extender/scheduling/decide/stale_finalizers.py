"""Claims whose delete protection protects nothing: the ``resource.kubernetes.io/delete-protection``
finalizer on a claim that is not allocated and reserved for nobody.

A bind adds the finalizer with one write and the allocation with the next. A replica deposed
between the two (frozen, cut off, refused by the store fence) leaves the finalizer behind: with
kube-controller-manager that is only untidy, without it the claim can never be deleted. The
leader removes it once the claim has stood so for ``grace`` seconds (longer than any write of a
deposed replica can still land) and no write of its own is settling it.

Pure: the cache in, the claims to free out; the caller keeps ``first_seen``. The cache indexes
the candidates as claims change, so a sweep costs the candidates, not every claim.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping

from extender.cluster.state import ClusterState, Key
from extender.model.dra import ResourceClaim


def stale_finalizers(
    state: ClusterState,
    settling: Callable[[Key], bool],
    now: float,
    first_seen: MutableMapping[Key, float],
    grace: float,
) -> list[ResourceClaim]:
    """The cached claims whose finalizer protects nothing (:func:`~extender.cluster.state.protects_nothing`,
    indexed by the cache as ``state.unprotecting``), and has for ``grace`` seconds, that no
    write of this replica is settling. ``first_seen``: when each such claim was first found so
    (claims no longer so are dropped from it); ``now``: the same clock's seconds."""
    found = {
        key: state.claims[key] for key in state.unprotecting if key in state.claims and not settling(key)
    }
    for key in [k for k in first_seen if k not in found]:
        del first_seen[key]
    out = []
    for key, claim in found.items():
        since = first_seen.setdefault(key, now)
        if now - since >= grace:
            out.append(claim)
    return out
