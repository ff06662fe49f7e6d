"""PostFilter's write: the release :mod:`extender.scheduling.decide.post_filter` decided, carried
out in the background (the filter's answer does not wait for it).

Each write is sent only while the API server (not the cache) shows the pod, and for a group
every member, unbound (:mod:`extender.scheduling.write.stale_claims`).
"""

from __future__ import annotations

from collections.abc import Callable

from extender.cluster.api import ClusterAPI
from extender.model.core import Pod
from extender.scheduling.decide.post_filter import Kind, Release
from extender.scheduling.write import stale_claims


async def carry_out(api: ClusterAPI, pod: Pod, release: Release, group_busy: Callable[[], bool]) -> None:
    """Make ``release``'s write for ``pod``. ``group_busy``: whether a member of the pod's group
    may be scheduled, asked again once the API server has answered."""
    first, group = release.claims[0], release.group  # a group's release names it (Release checks)
    if release.kind is Kind.DELETE_EXTENDED:
        await stale_claims.delete_if_unbound(api, pod, first)
    elif release.kind is Kind.DEALLOCATE:
        await stale_claims.deallocate_if_unbound(api, pod, first)
    elif release.kind is Kind.DEALLOCATE_LEFT_BEHIND:
        await stale_claims.deallocate_if_unbound(api, pod, first, stale_claims.LEFT_BEHIND)
    elif release.kind is Kind.DEALLOCATE_FOR_GROUP and group is not None:
        await stale_claims.deallocate_for_group(api, pod, group, first, group_busy)
    elif group is not None:
        await stale_claims.unreserve_group(api, pod, group, release.claims, group_busy)
