"""scheduling.k8s.io PodGroups, as far as DRA scheduling reads them (DRAWorkloadResourceClaims).

A PodGroup's ``spec.resourceClaims`` name claims its member pods share; a member pod whose own
``spec.resourceClaims`` entry matches one exactly (name, claim name, template name) uses the
claim on the group's behalf, and kube-scheduler reserves it for the PodGroup instead of the pod
(``resourceclaim.BindTo``, v1.36.3 staging/src/k8s.io/dynamic-resource-allocation/resourceclaim).
Served as v1alpha2 in 1.36 and v1beta1 in 1.37 (kubernetes#140184) with the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extender.model.core import PodClaimRef, claim_refs, claim_statuses
from extender.model.errors import ObjectError
from extender.model.reader import Reader

#: The API group of PodGroups: reservations and owner references name it, whatever the version.
SCHEDULING_GROUP = "scheduling.k8s.io"


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    uid: str
    #: ``spec.resourceClaims``: the same fields as a pod's entries (exactly one name is set).
    claims: tuple[PodClaimRef, ...]
    #: ``status.resourceClaimStatuses``: entry name -> generated claim name (None: none needed).
    claim_statuses: dict[str, str | None]
    raw: dict[str, Any]

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def consumer(self) -> dict[str, str]:
        """The ``reservedFor`` entry a claim gets when reserved for this group."""
        return {"apiGroup": SCHEDULING_GROUP, "resource": "podgroups", "name": self.name, "uid": self.uid}


def parse_pod_group(obj: dict[str, Any]) -> PodGroup:
    meta = Reader(obj.get("metadata"), "metadata")
    spec = Reader(obj.get("spec"), "spec")
    name = meta.string("name")
    if not name:
        raise ObjectError("metadata.name is required")
    return PodGroup(
        namespace=meta.string("namespace", "default"),
        name=name,
        uid=meta.string("uid"),
        claims=claim_refs(spec),
        claim_statuses=claim_statuses(Reader(obj.get("status"), "status")),
        raw=obj,
    )
