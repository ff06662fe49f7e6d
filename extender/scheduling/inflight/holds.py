"""Devices kept after prioritize for the bind kube-scheduler has probably decided (issue 30 item 5).

The extender protocol has no Reserve: kube-scheduler tells the extender the node it chose only
when the bind arrives, and the next pod's filter may come first. The filter already waits
(briefly) for binds kube-scheduler is expected to send (:mod:`expected_binds`). Beyond that,
with ``--hold-after-prioritize``, prioritize keeps the devices the pod would get on its best
node, when one node scores best alone, as a ``HELD`` record of the assume cache: no write, gone
at the pod's bind (whatever node it names) or next filter, or after the hold's seconds. Off by
default: kube-scheduler adds its own scores to ours, so the guess can be wrong, and a wrong
guess keeps devices from other pods for that long (docs/performance.md).

Pure: a decision in, records in the assume cache out.
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.model.core import Node, Pod
from extender.scheduling.decide.decision import NodeDecision
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.scores import NodeScores
from extender.scheduling.inflight.assumed import AssumedClaims


def best_alone(answer: NodeScores, nodes: Mapping[str, Node]) -> Node | None:
    """The node that scores best alone, above the lowest score; None on a tie."""
    if not answer.scores:
        return None
    best = max(answer.scores)
    if best <= 0 or answer.scores.count(best) != 1:
        return None
    return nodes.get(answer.names[answer.scores.index(best)])


def may_hold(claims: PodClaims) -> bool:
    """Holds are for claims to allocate, not for a pod with extended resources (its claim does
    not exist before the bind)."""
    return claims.extended is None and bool(claims.to_allocate)


def hold(
    assumed: AssumedClaims, pod: Pod, claims: PodClaims, node: str, decision: NodeDecision, now: float
) -> bool:
    """Hold the devices ``decision`` gives the pod's claims on ``node``; whether it did."""
    if not may_hold(claims) or not decision.fits:
        return False
    for claim in claims.to_allocate:
        allocation = decision.allocations.get(claim.name)
        if allocation is not None:
            assumed.hold(claim, pod.uid, pod.key, node, allocation, now)
    return True
