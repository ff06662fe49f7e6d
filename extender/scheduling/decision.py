"""Per pod and node: do the pod's claims fit, and with which devices (what filter answers).

The same logic serves ``filter``, ``bind`` (recomputed on the chosen node), the debug endpoints
and ``simulate``. It mirrors the in-tree DynamicResources plugin: claims are found through the
pod (templates via ``status.resourceClaimStatuses``), allocated claims only need a matching
``allocation.nodeSelector``, and all unallocated claims are allocated together.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.allocator import (
    AllocatedState,
    AllocationError,
    AllocationTimeout,
    Allocator,
    Features,
    Inventory,
    NodeAllocationError,
    NodeInfo,
    Unsatisfiable,
)
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState, Key
from extender.model.core import Node, Pod
from extender.model.dra import Allocation, ResourceClaim

#: Default budget for one node's allocation; an unsatisfiable claim can never stall a request.
DEFAULT_NODE_TIMEOUT = 1.0


@dataclass(slots=True)
class NodeDecision:
    node: str
    fits: bool
    reason: str | None = None
    error: str | None = None
    #: claim name -> the ``status.allocation`` this decision would write.
    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fits": self.fits, "reason": self.reason, "error": self.error}
        if self.fits:
            out["allocations"] = self.allocations
        return out


@dataclass(slots=True)
class PodClaims:
    """The pod's claims, resolved: or why they cannot be (``reason``: unschedulable, ``error``)."""

    allocated: list[ResourceClaim] = field(default_factory=list)
    to_allocate: list[ResourceClaim] = field(default_factory=list)
    reason: str | None = None
    error: str | None = None

    @property
    def empty(self) -> bool:
        return not self.allocated and not self.to_allocate and self.reason is None and self.error is None


def resolve_claims(pod: Pod, claims: Mapping[Key, ResourceClaim], broken: Mapping[Key, str]) -> PodClaims:
    out = PodClaims()
    seen: set[Key] = set()
    for ref in pod.claims:
        if ref.resource_claim_name:
            name = ref.resource_claim_name
            owned = False
        elif ref.resource_claim_template_name:
            if ref.name not in pod.claim_statuses:
                out.reason = f"pod claim {ref.name}: ResourceClaim not created yet"
                return out
            generated = pod.claim_statuses[ref.name]
            if generated is None:
                continue  # the controller decided no claim is needed
            name, owned = generated, True
        else:
            out.error = (
                f"pod claim {ref.name}: neither resourceClaimName nor resourceClaimTemplateName is set"
            )
            return out
        key = (pod.namespace, name)
        if key in seen:
            continue
        seen.add(key)
        if key in broken:
            out.error = f"resourceclaim {pod.namespace}/{name} cannot be read: {broken[key]}"
            return out
        claim = claims.get(key)
        if claim is None:
            out.reason = f'resourceclaim "{name}" not found'
            return out
        if owned and claim.controller_uid != pod.uid:
            out.reason = (
                f"resourceclaim {pod.namespace}/{name} was not created for pod {pod.namespace}/{pod.name}"
            )
            return out
        if claim.deleting:
            out.reason = f"resourceclaim {pod.namespace}/{name} is being deleted"
            return out
        (out.allocated if claim.allocation is not None else out.to_allocate).append(claim)
    return out


class Snapshot:
    """One consistent view for decisions: indexed inventory, devices in use, the allocator."""

    def __init__(
        self,
        state: ClusterState,
        features: Features,
        cel: CelEnvironment,
        *,
        in_flight: Iterable[Allocation] = (),
        clock: Callable[[], float] = time.monotonic,
        new_share_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.state = state
        self.features = features
        self.inventory = Inventory(state.slices.values(), state.classes, features, state.taint_rules.values())
        allocations = [c.allocation for c in state.claims.values() if c.allocation is not None]
        self.allocated = AllocatedState.from_allocations([*allocations, *in_flight], features)
        self.allocator = Allocator(
            self.inventory, self.allocated, cel, clock=clock, new_share_id=new_share_id
        )

    def claims_of(self, pod: Pod) -> PodClaims:
        return resolve_claims(pod, self.state.claims, self.state.broken_claims)

    def decide(
        self, pod_claims: PodClaims, node: Node, *, timeout: float | None = DEFAULT_NODE_TIMEOUT
    ) -> NodeDecision:
        if pod_claims.error is not None:
            return NodeDecision(node.name, False, error=pod_claims.error)
        if pod_claims.reason is not None:
            return NodeDecision(node.name, False, reason=pod_claims.reason)
        for claim in pod_claims.allocated:
            assert claim.allocation is not None
            selector = claim.allocation.node_selector
            if selector is not None and not selector.matches(node.name, node.labels):
                return NodeDecision(
                    node.name,
                    False,
                    reason=f"resourceclaim {claim.namespace}/{claim.name} is allocated to devices that are "
                    f"not available on node {node.name}",
                )
        if not pod_claims.to_allocate:
            return NodeDecision(node.name, True)
        try:
            outcome = self.allocator.allocate(
                NodeInfo(node.name, node.labels), pod_claims.to_allocate, timeout=timeout
            )
        except AllocationTimeout as exc:
            return NodeDecision(node.name, False, reason=str(exc))
        except (AllocationError, NodeAllocationError) as exc:
            return NodeDecision(node.name, False, error=str(exc))
        if isinstance(outcome, Unsatisfiable):
            return NodeDecision(node.name, False, reason=outcome.reason)
        return NodeDecision(
            node.name,
            True,
            allocations={
                claim.name: allocation
                for claim, allocation in zip(pod_claims.to_allocate, outcome, strict=True)
            },
        )
