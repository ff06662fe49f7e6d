"""``dra-extender simulate``: answer, offline, what filter would answer for a cluster state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from extender.allocator import Features
from extender.cel import CelEnvironment, CelOptions
from extender.cluster.state import ClusterState
from extender.model.core import Pod
from extender.scheduling.decision import NodeDecision, Snapshot, fit_summary


@dataclass(frozen=True, slots=True)
class SimulationRequest:
    pod: str | None = None  # "namespace/name"
    node: str | None = None
    timeout: float | None = 1.0


class SelectionError(ValueError):
    """A named pod or node that the state does not contain."""


def _pods(state: ClusterState, wanted: str | None) -> list[Pod]:
    if wanted is None:
        return sorted((p for p in state.pods.values() if not p.node_name), key=lambda p: p.key)
    namespace, _, name = wanted.rpartition("/")
    pod = state.pods.get((namespace or "default", name))
    if pod is None:
        raise SelectionError(f"pod {wanted} not found in the state")
    return [pod]


def simulate(state: ClusterState, features: Features, request: SimulationRequest) -> dict[str, Any]:
    cel = CelEnvironment(CelOptions(list_type_attributes=features.list_type_attributes))
    snapshot = Snapshot(state, features, cel)
    if request.node is not None and request.node not in state.nodes:
        raise SelectionError(f"node {request.node} not found in the state")
    nodes = (
        [state.nodes[request.node]] if request.node else sorted(state.nodes.values(), key=lambda n: n.name)
    )
    pods_out = []
    for pod in _pods(state, request.pod):
        claims = snapshot.claims_of(pod)
        decisions: dict[str, NodeDecision] = {
            n.name: snapshot.decide(claims, n, timeout=request.timeout) for n in nodes
        }
        pods_out.append(
            {
                "namespace": pod.namespace,
                "name": pod.name,
                "nodes": {name: d.to_dict() for name, d in decisions.items()},
            }
        )
    return {"pods": pods_out, "problems": list(state.problems)}


def render_text(result: dict[str, Any]) -> str:
    """A readable table per pod: node, fit, and the devices or the reason."""
    lines: list[str] = []
    for problem in result.get("problems", []):
        lines.append(f"warning: {problem}")
    if not result["pods"]:
        lines.append("no pending pods")
    for pod in result["pods"]:
        lines.append(f"pod {pod['namespace']}/{pod['name']}")
        width = max([len(n) for n in pod["nodes"]] + [4])
        lines.append(f"  {'NODE':<{width}}  FITS  DETAIL")
        for node, d in pod["nodes"].items():
            if d["fits"]:
                lines.append(f"  {node:<{width}}  yes   {fit_summary(d)}")
            else:
                detail = f"error: {d['error']}" if d["error"] else d["reason"]
                lines.append(f"  {node:<{width}}  no    {detail}")
    return "\n".join(lines)


def summarize(result: dict[str, Any]) -> Sequence[str]:
    return [f"{p['namespace']}/{p['name']}" for p in result["pods"]]
