"""PreBind's write of ``status.nodeAllocatableResourceClaimStatuses`` (DRANodeAllocatableResources)
and Unreserve's clearing of it, as v1.36.3's patchNodeAllocatableResourceClaimStatus and
clearNodeAllocatableResourceClaimStatus send them (a strategic merge patch of the pod's status;
the list is atomic, so it is replaced whole)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from extender.cluster.api import ClusterAPI, ClusterAPIError
from extender.model.core import Pod
from extender.model.node_allocatable import ClaimResources
from extender.scheduling.decide.extended import IN_MEMORY_NAME
from extender.scheduling.decide.node_allocatable import status_patch

log = logging.getLogger("dra_extender.engine")


async def record_node_allocatable(
    api: ClusterAPI, pod: Pod, statuses: Sequence[ClaimResources], extended: str | None = None
) -> str:
    """'' or why the pod's status could not be written. ``extended``: the name the pod's
    extended-resource claim was created under, recorded instead of the in-memory name (what
    kubernetes#141556 does after v1.37.0, which sent ``<extended-resources>``, kubernetes#141467)."""
    if extended is not None:
        statuses = [replace(s, claim=extended) if s.claim == IN_MEMORY_NAME else s for s in statuses]
    try:
        await api.patch_pod_status(pod.namespace, pod.name, pod.uid, status_patch(statuses))
    except ClusterAPIError as exc:
        return f"updating pod {pod.namespace}/{pod.name} NodeAllocatableResourceClaimStatuses: {exc}"
    return ""


async def clear_node_allocatable(api: ClusterAPI, pod: Pod) -> None:
    """Best effort, as upstream: a failure is logged (the pod's next bind writes them anew)."""
    try:
        await api.patch_pod_status(pod.namespace, pod.name, pod.uid, status_patch(None))
    except ClusterAPIError as exc:
        log.warning("clearing pod %s/%s's node-allocatable claim statuses: %s", pod.namespace, pod.name, exc)
