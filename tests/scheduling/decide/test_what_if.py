"""What evicting pods frees (decide/what_if.py); the judging with nominations is tested through
the preempt room (tests/scheduling/preempt/test_nominated.py) and the filter's tables."""

from __future__ import annotations

from extender.cluster.state import ClusterState
from extender.scheduling.decide import what_if
from tests.builders import allocated, claim, pod, reserve


def test_held_claims_include_the_extended_resource_claim_recorded_in_status() -> None:
    ext = claim("p-extended-resources-abcde", allocation=allocated(("driver-a", "node-1", "gpu-0")))
    reserve(ext, "p")
    other = claim("unreserved", allocation=allocated(("driver-a", "node-1", "gpu-1")))
    p = pod("p", ["unreserved"], node_name="node-1")
    p["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-abcde"}}
    state = ClusterState.from_objects([ext, other, p])
    held = what_if.held_claims(state.claims, state.pods[("default", "p")])
    assert [c.name for c in held] == ["p-extended-resources-abcde"]  # "unreserved" is not reserved for it
