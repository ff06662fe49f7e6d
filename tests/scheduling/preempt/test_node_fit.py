"""Whether a node's own constraints admit a moved pod (cordon, nodeSelector, required node
affinity, taints), as kube-scheduler's node filters at v1.37.0 judge it: a row per filter, each
with the case that admits and the case that refuses."""

from __future__ import annotations

from typing import Any

import pytest

from extender.model.core import parse_node, parse_pod
from extender.scheduling.preempt.node_fit import refuses
from tests.builders import node, pod

GPU = {"gpu": "a100"}
AFFINITY_A100 = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
                {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
            ]
        }
    }
}
AFFINITY_BY_NAME = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["other"]}]}
            ]
        }
    }
}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATE_GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
TOLERATE_ALL = {"operator": "Exists"}
UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}

# (name, pod's spec fields, node's labels, node's spec, the reason: None when admitted)
CASES: list[tuple[str, dict[str, Any], dict[str, str], dict[str, Any], str | None]] = [
    ("no constraints", {}, {}, {}, None),
    ("cordoned", {}, {}, {"unschedulable": True}, "node is cordoned"),
    ("cordoned, tolerated", {"tolerations": [UNSCHEDULABLE]}, {}, {"unschedulable": True}, None),
    ("nodeSelector matches", {"nodeSelector": GPU}, GPU, {}, None),
    ("nodeSelector differs", {"nodeSelector": GPU}, {"gpu": "h100"}, {}, "nodeSelector"),
    ("nodeSelector label missing", {"nodeSelector": GPU}, {}, {}, "nodeSelector"),
    ("affinity: one of the terms", {"affinity": AFFINITY_A100}, GPU, {}, None),
    ("affinity: no term", {"affinity": AFFINITY_A100}, {"gpu": "t4"}, {}, "required node affinity"),
    ("affinity by field: another node", {"affinity": AFFINITY_BY_NAME}, {}, {}, "required node affinity"),
    ("NoSchedule taint", {}, {}, {"taints": [GPU_TAINT]}, "taint the pod does not tolerate"),
    ("NoExecute taint", {}, {}, {"taints": [{**GPU_TAINT, "effect": "NoExecute"}]}, "taint"),
    (
        "PreferNoSchedule taint never refuses",
        {},
        {},
        {"taints": [{**GPU_TAINT, "effect": "PreferNoSchedule"}]},
        None,
    ),
    ("taint tolerated", {"tolerations": [TOLERATE_GPU]}, {}, {"taints": [GPU_TAINT]}, None),
    (
        "taint tolerated by Exists without a key",
        {"tolerations": [TOLERATE_ALL]},
        {},
        {"taints": [GPU_TAINT]},
        None,
    ),
    (
        "toleration of another effect",
        {"tolerations": [{**TOLERATE_GPU, "effect": "NoExecute"}]},
        {},
        {"taints": [GPU_TAINT]},
        "taint",
    ),
    (
        "unreadable toleration refuses with the reason",
        {"tolerations": ["x"]},
        {},
        {"taints": [GPU_TAINT]},
        "cannot read",
    ),
]


@pytest.mark.parametrize(
    ("spec", "labels", "node_spec", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_node_fit(
    spec: dict[str, Any], labels: dict[str, str], node_spec: dict[str, Any], reason: str | None
) -> None:
    raw_pod = pod("moved")
    raw_pod["spec"].update(spec)
    raw_node = {**node("node-1", **labels), "spec": node_spec}
    found = refuses(parse_pod(raw_pod), parse_node(raw_node))
    if reason is None:
        assert found is None
    else:
        assert found is not None and reason in found
