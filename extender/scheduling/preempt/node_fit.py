"""Whether a node's own constraints admit a pod, as kube-scheduler's node filters judge it:
NodeUnschedulable, NodeAffinity (``spec.nodeSelector`` and required node affinity) and
TaintToleration (v1.37.0, pkg/scheduler/framework/plugins/{nodeunschedulable,nodeaffinity,
tainttoleration}). Make room asks it before it gives a moved pod a new node: a destination the
pod's replacement could never be scheduled to is no home (CPU, memory, pod affinity and spread are
left to kube-scheduler; docs/make-room.md says so).

Pure: a pod and a node in; a reason or None out.
"""

from __future__ import annotations

from extender.allocator.tolerations import taints_tolerated
from extender.model.core import Node, Pod
from extender.model.dra import Taint, Toleration
from extender.model.errors import ObjectError
from extender.model.nodeselector import parse_node_selector
from extender.model.reader import Reader

#: The taint a cordoned node is treated as having (upstream ``v1.TaintNodeUnschedulable``).
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


def refuses(pod: Pod, node: Node) -> str | None:
    """Why ``node`` refuses ``pod`` before any device is looked at (None: it admits it); a field
    that cannot be read refuses, with the reason (never an exception out of a plan)."""
    try:
        return _refuses(pod, node)
    except ObjectError as exc:
        return f"cannot read the pod's or the node's scheduling constraints: {exc}"


def _refuses(pod: Pod, node: Node) -> str | None:
    spec = Reader(pod.raw.get("spec"), "spec")
    tolerations = tuple(
        Toleration(t.string("key"), t.string("operator"), t.string("value"), t.string("effect"), dict(t.data))
        for t in spec.readers("tolerations")
    )
    node_spec = Reader(node.raw.get("spec"), "spec")
    if node_spec.boolean("unschedulable") and not taints_tolerated((UNSCHEDULABLE_TAINT,), tolerations):
        return "node is cordoned"
    wanted = spec.mapping("nodeSelector")
    if any(node.labels.get(str(k)) != str(v) for k, v in wanted.items()):
        return "node does not match the pod's nodeSelector"
    required = spec.sub("affinity").sub("nodeAffinity").sub("requiredDuringSchedulingIgnoredDuringExecution")
    if required.has("nodeSelectorTerms"):
        selector = parse_node_selector(required)
        if selector.error is not None or not selector.matches(node.name, node.labels):
            return "node does not match the pod's required node affinity"
    taints = tuple(
        Taint(t.string("key"), t.string("value"), t.string("effect")) for t in node_spec.readers("taints")
    )
    if not taints_tolerated(taints, tolerations):
        return "node has a taint the pod does not tolerate"
    return None
