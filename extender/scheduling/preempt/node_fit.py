"""Whether a node's own constraints admit a pod, as kube-scheduler's node filters judge it:
NodeUnschedulable, NodeAffinity (``spec.nodeSelector`` and required node affinity) and
TaintToleration (v1.37.0, pkg/scheduler/framework/plugins/{nodeunschedulable,nodeaffinity,
tainttoleration}). Make room asks it before it gives a moved pod a new node: a destination the
pod's replacement could never be scheduled to is no home (CPU, memory, pod affinity and spread are
left to kube-scheduler; docs/make-room.md says so).

A pod's and a node's sides are read once each (:func:`pod_side`, :func:`node_side`) and then
met as often as needed (:func:`meet`): a plan meets a moved pod with many nodes.

Pure: a pod and a node in; a reason or None out.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.allocator.tolerations import taints_tolerated
from extender.model.core import Node, Pod
from extender.model.dra import Taint, Toleration
from extender.model.errors import ObjectError
from extender.model.nodeselector import NodeSelector, parse_node_selector
from extender.model.reader import Reader

#: The taint a cordoned node is treated as having (upstream ``v1.TaintNodeUnschedulable``).
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


@dataclass(frozen=True, slots=True)
class PodSide:
    """What a pod asks of a node (``error``: a field that cannot be read)."""

    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    affinity: NodeSelector | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class NodeSide:
    """What a node holds against pods (``error``: a field that cannot be read)."""

    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    error: str | None = None


def pod_side(pod: Pod) -> PodSide:
    try:
        spec = Reader(pod.raw.get("spec"), "spec")
        tolerations = tuple(
            Toleration(
                t.string("key"), t.string("operator"), t.string("value"), t.string("effect"), dict(t.data)
            )
            for t in spec.readers("tolerations")
        )
        wanted = tuple((str(k), str(v)) for k, v in spec.mapping("nodeSelector").items())
        required = (
            spec.sub("affinity").sub("nodeAffinity").sub("requiredDuringSchedulingIgnoredDuringExecution")
        )
        affinity = parse_node_selector(required) if required.has("nodeSelectorTerms") else None
        return PodSide(tolerations, wanted, affinity)
    except ObjectError as exc:
        return PodSide(error=f"cannot read the pod's scheduling constraints: {exc}")


def node_side(node: Node) -> NodeSide:
    try:
        spec = Reader(node.raw.get("spec"), "spec")
        taints = tuple(
            Taint(t.string("key"), t.string("value"), t.string("effect")) for t in spec.readers("taints")
        )
        return NodeSide(spec.boolean("unschedulable"), taints)
    except ObjectError as exc:
        return NodeSide(error=f"cannot read the node's taints: {exc}")


def meet(pod: PodSide, node_side: NodeSide, node: Node) -> str | None:
    """Why the node refuses the pod (None: it admits it); an unreadable field refuses."""
    if pod.error is not None or node_side.error is not None:
        return pod.error or node_side.error
    if node_side.unschedulable and not taints_tolerated((UNSCHEDULABLE_TAINT,), pod.tolerations):
        return "node is cordoned"
    if any(node.labels.get(k) != v for k, v in pod.node_selector):
        return "node does not match the pod's nodeSelector"
    if pod.affinity is not None and (
        pod.affinity.error is not None or not pod.affinity.matches(node.name, node.labels)
    ):
        return "node does not match the pod's required node affinity"
    if not taints_tolerated(node_side.taints, pod.tolerations):
        return "node has a taint the pod does not tolerate"
    return None


def refuses(pod: Pod, node: Node) -> str | None:
    """Why ``node`` refuses ``pod`` before any device is looked at (None: it admits it); a field
    that cannot be read refuses, with the reason (never an exception out of a plan)."""
    return meet(pod_side(pod), node_side(node), node)
