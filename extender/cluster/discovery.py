"""What the extender reads from an API server, and where: the kinds, the resource.k8s.io version
served (with the one read-only resource that may be served only at an older version), and a
one-shot listing of them all. Cluster mode's informers watch these kinds
(:mod:`extender.service.cluster_mode`); ``kubectl dra`` lists them with the user's own
credentials when it computes from the objects (:mod:`extender.commands.kubectl_dra`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from extender.cluster.api import ClusterAPIError
from extender.cluster.kube import RESOURCE_GROUP, SCHEDULING_GROUP, Paths, RawKube, without_managed_fields

log = logging.getLogger("dra_extender")

#: kind -> collection resource; DeviceTaintRules only when the gate is on and the server serves them,
#: PodGroups likewise (DRAWorkloadResourceClaims: they decide whom a claim is reserved for).
#: PodDisruptionBudgets only inform preemption (cluster mode's OPTIONAL).
WATCHED = (
    ("Node", "nodes"),
    ("Pod", "pods"),
    ("ResourceSlice", "resourceslices"),
    ("DeviceClass", "deviceclasses"),
    ("ResourceClaim", "resourceclaims"),
    ("ResourceClaimTemplate", "resourceclaimtemplates"),
    ("DeviceTaintRule", "devicetaintrules"),
    ("PodDisruptionBudget", "poddisruptionbudgets"),
    ("PodGroup", "podgroups"),
)

#: The API group/version of the kinds outside resource.k8s.io.
OUTSIDE_DRA = {"Node": "v1", "Pod": "v1", "PodDisruptionBudget": "policy/v1"}

#: Read-only resources that may be read at an older version than the one claims are written at,
#: with the versions outside :data:`~extender.cluster.kube.PREFERRED_VERSIONS` they may be read
#: at: DeviceTaintRules are v1alpha3 in 1.34 and 1.35 (alpha), v1beta2 only in 1.36, and
#: kube-scheduler of those releases with the gate on reads them there.
READ_ELSEWHERE: dict[str, tuple[str, ...]] = {"devicetaintrules": ("v1alpha3",)}


def discover_once(raw: RawKube) -> tuple[Paths, set[str]]:
    """The paths of the served resource.k8s.io version (and of a read-only resource served only
    at an older one: 1.36's DeviceTaintRules are v1beta2, 1.35's v1alpha3) and the resources
    served there."""
    version, *older = raw.served_dra_versions()
    served = raw.served_resources(version)
    elsewhere: dict[str, str] = {}
    for resource, also in READ_ELSEWHERE.items():
        if resource in served:
            continue
        found = next((v for v in (*older, *also) if resource in _served_at(raw, v)), None)
        if found is not None:
            elsewhere[resource] = found
    return Paths(version, elsewhere), served | set(elsewhere)


def _served_at(raw: RawKube, version: str) -> set[str]:
    """The resources of resource.k8s.io/``version``; none where the version is not served."""
    try:
        return raw.served_resources(version)
    except ClusterAPIError as exc:
        if exc.code == 404:
            return set()
        raise


def watched(paths: Paths, served: set[str], *, device_taint_rules: bool) -> list[tuple[str, str, str]]:
    """(kind, resource, group/version) of every kind to read from this API server:
    DeviceTaintRules only with the gate on and served, PodGroups only where found, DRA kinds
    only where served (with a warning for each that is not)."""
    out = []
    for kind, resource in WATCHED:
        if resource == "devicetaintrules" and (not device_taint_rules or resource not in served):
            continue
        if resource == "podgroups":
            if paths.pod_groups is None:
                continue
            group_version = f"{SCHEDULING_GROUP}/{paths.pod_groups}"
        elif kind not in OUTSIDE_DRA and resource not in served:
            log.warning("%s/%s does not serve %s", RESOURCE_GROUP, paths.dra_version, resource)
            continue
        else:
            group_version = OUTSIDE_DRA.get(kind, f"{RESOURCE_GROUP}/{paths.version_of(resource)}")
        out.append((kind, resource, group_version))
    return out


#: What a list answers when the caller may not list a kind (RBAC) or the server has none.
REFUSED_CODES = (403, 404)


@dataclass
class Listing:
    """Every object listed, as the state files hold them (kind and apiVersion set on each, the
    server's ``managedFields`` left out: nothing decides on them), and the kinds the API server
    refused to list, with its reason (RBAC, most often)."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def list_all(raw: RawKube, kinds: Iterable[tuple[str, str, str]], paths: Paths) -> Listing:
    """One list of each of ``kinds`` (from :func:`watched`), cluster-wide. A kind refused (403,
    404) is noted in :attr:`Listing.refused`; any other failure (a timeout, a 5xx) raises:
    an answer computed without a kind it could not read would be wrong, not partial."""
    listing = Listing()
    for kind, resource, group_version in kinds:
        try:
            answer = raw.request("GET", paths.collection(resource))
        except ClusterAPIError as exc:
            if exc.code not in REFUSED_CODES:
                raise
            listing.refused[kind] = str(exc)
            continue
        items = answer.get("items") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            raise ClusterAPIError(f"GET {paths.collection(resource)}: malformed answer (no list of items)")
        for item in items:
            if isinstance(item, dict):
                obj = {"apiVersion": group_version, "kind": kind, **item}
                listing.objects.append(without_managed_fields(obj))
    return listing
