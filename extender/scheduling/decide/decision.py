"""What filter answers per pod and node: a decision (does the pod fit, with which devices, or why
not), its summary as an assessment, and the DynamicResources plugin's own score.

The same logic serves ``filter``, ``bind`` (recomputed on the chosen node), the debug endpoints
and ``simulate``. It mirrors the in-tree DynamicResources plugin: claims are found through the
pod (templates via ``status.resourceClaimStatuses``), allocated claims only need a matching
``allocation.nodeSelector``, and all unallocated claims are allocated together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from extender.allocator import (
    NodeInfo,
)
from extender.defaults import DEFAULT_BINDING_TIMEOUT as DEFAULT_BINDING_TIMEOUT
from extender.model.core import Node
from extender.model.node_allocatable import ClaimResources
from extender.scheduling.decide import extended as er
from extender.scheduling.decide.prefilter import PodClaims

#: Default budget for one node's allocation; an unsatisfiable claim can never stall a request.
DEFAULT_NODE_TIMEOUT = 1.0


def node_info(node: Node) -> NodeInfo:
    """What the allocator reads of a Node: name, labels, and its declared DRAOptionalNodeOperations."""
    return NodeInfo(node.name, node.labels, node.optional_node_operations)


@dataclass(slots=True)
class NodeDecision:
    node: str
    fits: bool
    reason: str | None = None
    error: str | None = None
    #: claim name -> the ``status.allocation`` this decision would write.
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The allocation budget ran out: the answer may differ next time, so it is never memoized.
    timed_out: bool = False
    #: The pod's extended-resource claim on this node (its allocation is under ``<extended-resources>``).
    extended: er.NodeExtendedClaim | None = None
    #: Unschedulable rather than Unresolvable: evicting pods could make room (node resources).
    resolvable: bool = False
    #: DRANodeAllocatableResources: the pod status entries PreBind records.
    node_allocatable: tuple[ClaimResources, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fits": self.fits, "reason": self.reason, "error": self.error}
        if self.fits:
            out["allocations"] = self.allocations
            if self.node_allocatable:
                out["nodeAllocatableResourceClaimStatuses"] = [s.to_dict() for s in self.node_allocatable]
            if self.extended is not None:
                out["extendedResources"] = {
                    "resources": sorted(self.extended.resources),
                    "requests": list(self.extended.requests),
                    "requestMappings": list(self.extended.mappings),
                }
        return out


def fit_summary(decision: Mapping[str, Any]) -> str:
    """One line for a fitting node (a :meth:`NodeDecision.to_dict`): the devices per claim."""
    extended = decision.get("extendedResources")
    parts = []
    for claim, allocation in decision.get("allocations", {}).items():
        devices = ", ".join(
            f"{r['request']}={r['driver']}/{r['pool']}/{r['device']}"
            for r in allocation["devices"]["results"]
        )
        label = claim
        if claim == er.IN_MEMORY_NAME and extended:
            containers = sorted({m["containerName"] for m in extended["requestMappings"]})
            label = f"{claim} ({', '.join(extended['resources'])} for {', '.join(containers)})"
        parts.append(f"{label}: {devices}")
    return "; ".join(parts) or "no claims to allocate"


@dataclass(frozen=True, slots=True)
class Assessment:
    """A node's answer without device names: what filter and prioritize need (memoizable)."""

    fits: bool
    reason: str | None = None
    error: str | None = None
    #: Devices this pod would take, and free matching devices left on the node afterwards.
    allocated: int = 0
    free_after: int = 0
    #: The DynamicResources plugin's own Score (prioritized lists; see :func:`prioritized_list_score`).
    dra_score: int = 0
    #: The allocation budget ran out (never memoized with the others).
    timed_out: bool = False
    #: See NodeDecision.resolvable.
    resolvable: bool = False


#: How an explanation names a claim to allocate (allocator/explanations.py: "claim ns/name,
#: request r: ..."); names are DNS subdomains, without commas or spaces.
_CLAIM_NAMED = re.compile(r"claim ([^,\s]+), request ")


def renamed(assessment: Assessment, before: Sequence[str], after: Sequence[str]) -> Assessment | None:
    """A node's "does not fit" for claims named ``before`` (``namespace/name``, in the pod's
    order), said for claims of the same specs named ``after``: the same answer, the claims'
    names changed. None when that cannot be said for sure (an error, or a name used otherwise
    than as an explanation names a claim): then the node is judged again."""
    if assessment.fits or assessment.error is not None or assessment.reason is None:
        return None
    if len(set(before)) != len(before) or len(set(after)) != len(after):
        return None  # a claim named twice: which name goes where is not said by the name
    names = dict(zip(before, after, strict=True))
    if not set(_CLAIM_NAMED.findall(assessment.reason)) <= names.keys():
        return None  # a claim the other pod does not have
    said_otherwise = _CLAIM_NAMED.sub("", assessment.reason)
    if any(old in said_otherwise for old in before):
        return None  # a name said otherwise than as the claim being allocated
    reason = _CLAIM_NAMED.sub(lambda m: f"claim {names[m.group(1)]}, request ", assessment.reason)
    return replace(assessment, reason=reason)


#: A node not judged: the filter budget ran out first (Unschedulable, not Unresolvable).
NOT_EVALUATED = Assessment(
    False, "not evaluated: the DRA extender's filter time budget ran out", timed_out=True
)


#: resourceapi.FirstAvailableDeviceRequestMaxSize.
FIRST_AVAILABLE_MAX = 8


def prioritized_list_score(pod_claims: PodClaims, allocations: Mapping[str, dict[str, Any]]) -> int:
    """The DynamicResources plugin's Score (``computeScore``, 1.35+): prefer earlier subrequests.

    Per claim of the pod (allocated ones by their status, new ones by this node's allocation),
    per firstAvailable request, 8 minus the index of the subrequest that was allocated.
    """
    score = 0
    for claim in pod_claims.ordered:
        if claim.allocation is not None:
            chosen = {d.request for d in claim.allocation.devices}
        else:
            allocation = allocations.get(claim.name)
            chosen = {r["request"] for r in allocation["devices"]["results"]} if allocation else set()
        for request in claim.spec.requests:
            if request.exactly is not None:
                continue
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in chosen:
                    score += FIRST_AVAILABLE_MAX - i
    return score
