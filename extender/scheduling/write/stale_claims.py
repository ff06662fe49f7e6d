"""Claims a pod cannot use any more, freed so it can be allocated afresh (upstream PostFilter,
and a binding that failed or timed out): each write only while the API server, not the cache,
shows the pod unbound and the claim reserved for nobody else."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from extender.cluster.api import ApiConflict, ClusterAPI, ClusterAPIError
from extender.cluster.memstore import clone
from extender.cluster.state import Key, protects_nothing
from extender.model.core import Pod
from extender.model.dra import DELETE_PROTECTION_FINALIZER, ResourceClaim, parse_resource_claim
from extender.model.errors import ObjectError
from extender.model.scheduling import PodGroup
from extender.scheduling.write import extended_writes
from extender.scheduling.write.claim_writes import deallocated

log = logging.getLogger("dra_extender.engine")


async def deallocate_failed(api: ClusterAPI, pod: Pod, key: Key) -> None:
    """Free a claim whose binding failed or timed out before answering kube-scheduler, so
    its retry (a failed bind goes to back-off) allocates afresh instead of spending a
    scheduling cycle on finding the claim unavailable first: upstream's next PostFilter does
    the same write one cycle later. Read fresh (the driver's status write moved the claim on),
    and only while the claim is reserved for nobody but this pod."""
    namespace, name = key
    for _ in range(3):
        try:
            claim = parse_resource_claim(await api.get_claim(namespace, name))
        except (ClusterAPIError, ObjectError):
            return
        users = [e.get("uid") for e in claim.reserved_for]
        if claim.allocation is None or users not in ([], [pod.uid]):
            return
        try:
            await api.update_claim_status(deallocated(claim.raw))
        except ApiConflict:
            continue
        except ClusterAPIError as exc:
            log.info("not deallocating resourceclaim %s/%s: %s", namespace, name, exc)
            return
        log.info(
            "deallocated resourceclaim %s/%s: its binding conditions failed or timed out for pod %s/%s",
            namespace,
            name,
            pod.namespace,
            pod.name,
        )
        return


async def drop_finalizer(api: ClusterAPI, claim: ResourceClaim) -> bool:
    """Remove the delete protection of a claim that is not allocated and reserved for nobody
    (:mod:`extender.scheduling.decide.stale_finalizers`), read fresh and under its
    resourceVersion: a bind that allocates it meanwhile wins. Whether it was removed."""
    namespace, name = claim.key
    try:
        current = parse_resource_claim(await api.get_claim(namespace, name))
    except (ClusterAPIError, ObjectError):
        return False
    if current.uid != claim.uid or not protects_nothing(current):
        return False
    updated = clone(current.raw)
    meta = updated.setdefault("metadata", {})
    meta["finalizers"] = [f for f in current.finalizers if f != DELETE_PROTECTION_FINALIZER]
    try:
        await api.update_claim(updated)
    except ClusterAPIError as exc:
        log.info("not removing the finalizer of resourceclaim %s/%s: %s", namespace, name, exc)
        return False
    log.info(
        "removed the delete-protection finalizer of resourceclaim %s/%s: not allocated, reserved for "
        "nobody (a bind left it behind)",
        namespace,
        name,
    )
    return True


async def still_unbound(api: ClusterAPI, pod: Pod) -> bool:
    """The API server (not the cache, which may be behind) shows this pod, not bound."""
    try:
        current = await api.get_pod(pod.namespace, pod.name)
    except ClusterAPIError:
        return False
    meta, spec = current.get("metadata") or {}, current.get("spec") or {}
    return meta.get("uid") == pod.uid and not spec.get("nodeName")


async def delete_if_unbound(api: ClusterAPI, pod: Pod, claim: ResourceClaim) -> None:
    where = f"resourceclaim {claim.namespace}/{claim.name}"
    if not await still_unbound(api, pod):
        return  # bound (or gone): its claim stays
    try:
        await extended_writes.delete_claim(api, claim.raw)
    except ClusterAPIError as exc:
        log.info("not deleting %s for pod %s/%s: %s", where, pod.namespace, pod.name, exc)
        return
    log.info(
        "deleted %s: the extended-resource claim of an earlier attempt for pod %s/%s",
        where,
        pod.namespace,
        pod.name,
    )


#: Why PostFilter deallocates a pod's claim, as the log says it.
UNAVAILABLE = "allocated to devices no candidate node of the pod can use, and reserved for no other pod"
LEFT_BEHIND = (
    "reserved for the pod alone by a bind that did not finish (the pod still has a claim to "
    "allocate), and the pod fits no node"
)


async def deallocate_if_unbound(
    api: ClusterAPI, pod: Pod, claim: ResourceClaim, why: str = UNAVAILABLE
) -> None:
    """Deallocate ``claim`` under the resourceVersion the cache read (a write since wins), while
    the API server shows ``pod`` unbound."""
    where = f"resourceclaim {claim.namespace}/{claim.name}"
    if not await still_unbound(api, pod):
        return  # the cache is behind: the pod is bound (or gone), its claims stay
    try:
        await api.update_claim_status(deallocated(claim.raw))
    except ClusterAPIError as exc:
        log.info("not deallocating %s for pod %s/%s: %s", where, pod.namespace, pod.name, exc)
        return
    log.info("deallocated %s for pod %s/%s: %s", where, pod.namespace, pod.name, why)


async def _group_idle(api: ClusterAPI, pod: Pod, group: str, busy: Callable[[], bool]) -> bool:
    """Upstream's ``ScheduledPodsCount() == 0``, read from the API server, not the cache: the pod
    (this UID) is unbound and in the group there, and no pod of the group, whatever its name or
    UID, is bound and not finished. ``busy``: this extender is binding a member, or a member
    passed a filter recently (kube-scheduler may have assumed it): asked again after the read."""
    try:
        pods = await api.list_pods(pod.namespace)
    except ClusterAPIError as exc:
        log.info("not releasing pod group %s/%s's claims: listing its pods: %s", pod.namespace, group, exc)
        return False
    itself = False
    for current in pods:
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        if (spec.get("schedulingGroup") or {}).get("podGroupName") != group:
            continue
        if meta.get("uid") == pod.uid:
            itself = not spec.get("nodeName")
            continue
        phase = (current.get("status") or {}).get("phase")
        if spec.get("nodeName") and phase not in ("Succeeded", "Failed"):
            return False
    return itself and not busy()


async def deallocate_for_group(
    api: ClusterAPI, pod: Pod, group: PodGroup, claim: ResourceClaim, busy: Callable[[], bool]
) -> None:
    """1.37 PodGroupPostFilter: an unavailable claim reserved only for the pod's group, with no
    member scheduled, is deallocated (under the cached resourceVersion)."""
    where = f"resourceclaim {claim.namespace}/{claim.name}"
    if not await _group_idle(api, pod, group.name, busy):
        return
    try:
        await api.update_claim_status(deallocated(claim.raw))
    except ClusterAPIError as exc:
        log.info("not deallocating %s for pod group %s: %s", where, group.name, exc)
        return
    log.info(
        "deallocated %s: reserved only for pod group %s/%s, no pod of which is scheduled, and "
        "unavailable to pod %s",
        where,
        group.namespace,
        group.name,
        pod.name,
    )


async def unreserve_group(
    api: ClusterAPI, pod: Pod, group: PodGroup, claims: Sequence[ResourceClaim], busy: Callable[[], bool]
) -> None:
    """unreservePodGroupClaims (v1.36.3): the group's reservation is removed from the first of
    ``claims`` that takes the patch (upstream's strategic merge patch, the claim's UID as
    precondition; a failure moves on to the next); the allocation stays for a later attempt."""
    if not await _group_idle(api, pod, group.name, busy):
        return
    for claim in claims:
        where = f"resourceclaim {claim.namespace}/{claim.name}"
        try:
            await api.unreserve_claim(claim.namespace, claim.name, claim.uid, group.uid)
        except ClusterAPIError as exc:
            log.info("not unreserving %s for pod group %s: %s", where, group.name, exc)
            continue
        log.info(
            "unreserved %s for pod group %s/%s: no pod of the group is scheduled",
            where,
            group.namespace,
            group.name,
        )
        return
