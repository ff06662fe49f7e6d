"""``dra-extender simulate``: answer, offline, what filter would answer for a cluster state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from extender.allocator import Features
from extender.allocator.releases import DEFAULT_MINOR, Release, release_of
from extender.cel import CelEnvironment, CelOptions
from extender.cluster.state import ClusterState
from extender.model.core import Pod
from extender.scheduling.decide import what_if
from extender.scheduling.decide.decision import NodeDecision, fit_summary
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt import nominated, victims
from extender.scheduling.preempt.victims import Candidate, preempt


@dataclass(frozen=True, slots=True)
class SimulationRequest:
    pod: str | None = None  # "namespace/name"
    node: str | None = None
    timeout: float | None = 1.0
    #: Answer as ``serve --device-preemption`` (devices kept for nominated pods, reasons that say
    #: where preemption may help) and, for a pod that fits nowhere, which lower-priority pods to
    #: evict per node (the preempt verb).
    preempt: bool = False
    #: The Kubernetes release decisions follow (1.37 when None).
    release: Release | None = None


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
    release = request.release or release_of(DEFAULT_MINOR)
    snapshot = Snapshot(state, features, cel, timeout_is_error=release.filter_timeout_is_error)
    timeout = request.timeout if features.filter_timeout else None  # DRASchedulerFilterTimeout
    if request.node is not None and request.node not in state.nodes:
        raise SelectionError(f"node {request.node} not found in the state")
    nodes = (
        [state.nodes[request.node]] if request.node else sorted(state.nodes.values(), key=lambda n: n.name)
    )
    pods_out: list[dict[str, Any]] = []
    for pod in _pods(state, request.pod):
        if pod.node_name:  # only with --pod: the pending ones are simulated otherwise
            pods_out.append(_bound(state, pod))
            continue
        claims = snapshot.claims_of(pod)
        nominations = nominated.Nominations() if request.preempt else None
        adjustments = nominated.adjustments(
            snapshot, pod, claims, [n.name for n in nodes], nominations, nominated.no_victims, releasing=False
        )
        decisions: dict[str, NodeDecision] = {
            n.name: what_if.decide(
                snapshot, claims, n, adjustments.get(n.name, what_if.UNCHANGED), timeout=timeout
            )
            for n in nodes
        }
        if request.preempt:
            failing = [n for n in nodes if not decisions[n.name].fits and decisions[n.name].error is None]
            rejected = {n.name: n for n in failing}
            helped = victims.where_it_may_help(
                snapshot, pod, claims, rejected, nominations=nominations, timeout=timeout
            )
            for name, addition in helped.items():
                decisions[name].reason = (decisions[name].reason or "does not fit") + addition
        entry: dict[str, Any] = {
            "namespace": pod.namespace,
            "name": pod.name,
            "nodes": {name: d.to_dict() for name, d in decisions.items()},
        }
        aborted = any(d.error is not None for d in decisions.values())  # Filter's error ends the attempt
        if request.preempt and not aborted and not any(d.fits for d in decisions.values()):
            names = [n.name for n in nodes]
            entry["preemption"] = _preemption(state, snapshot, pod, names, timeout, release)
        pods_out.append(entry)
    return {"pods": pods_out, "problems": list(state.problems)}


def _preemption(
    state: ClusterState,
    snapshot: Snapshot,
    pod: Pod,
    nodes: list[str],
    timeout: float | None,
    release: Release,
) -> dict[str, list[str]]:
    """Per node where evicting lower-priority pods makes room: those pods, most important first
    (the preempt verb's order)."""
    by_uid = {p.uid: p for p in state.pods.values()}
    candidates = {n: Candidate(()) for n in nodes}
    answer = preempt(
        snapshot,
        pod,
        candidates,
        nominations=nominated.Nominations(),
        timeout=timeout,
        budget=60.0,
        pdb_selectors_as_policy_v1=release.pdb_selectors_as_policy_v1,
    )
    return {
        node: [f"{by_uid[u].namespace}/{by_uid[u].name}" for u in candidate.uids if u in by_uid]
        for node, candidate in answer.items()
    }


def _bound(state: ClusterState, pod: Pod) -> dict[str, Any]:
    """A bound pod: where it runs and the devices its claims hold (nothing to simulate)."""
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "boundTo": pod.node_name,
        "claims": state.devices_of(pod),
    }


def unschedulable(result: dict[str, Any]) -> list[str]:
    """The simulated pods that fit on no node, or whose attempt an error on some node ends as
    kube-scheduler's does (a timeout from 1.36); ``simulate`` exits 1 when there are any."""
    return [
        f"{p['namespace']}/{p['name']}"
        for p in result["pods"]
        if "boundTo" not in p
        and (
            not any(d["fits"] for d in p["nodes"].values())
            or any(d.get("error") for d in p["nodes"].values())
        )
    ]


def render_text(result: dict[str, Any]) -> str:
    """A readable table per pod: node, fit, and the devices or the reason."""
    lines: list[str] = []
    for problem in result.get("problems", []):
        lines.append(f"warning: {problem}")
    if not result["pods"]:
        lines.append("no pending pods")
    for pod in result["pods"]:
        if "boundTo" in pod:
            lines.append(f"pod {pod['namespace']}/{pod['name']} is bound to {pod['boundTo']}")
            for claim, devices in pod["claims"].items():
                lines.append(f"  {claim}: {', '.join(devices) or 'no devices'}")
            continue
        lines.append(f"pod {pod['namespace']}/{pod['name']}")
        width = max([len(n) for n in pod["nodes"]] + [4])
        lines.append(f"  {'NODE':<{width}}  FITS  DETAIL")
        for node, d in pod["nodes"].items():
            if d["fits"]:
                lines.append(f"  {node:<{width}}  yes   {fit_summary(d)}")
                continue
            detail = f"error: {d['error']}" if d["error"] else d["reason"]
            # A multi-line reason (a CEL error with its caret line) continues under its row.
            first, *rest = detail.splitlines() or [""]
            lines.append(f"  {node:<{width}}  no    {first}")
            lines.extend(f"  {'':<{width}}        {line}" for line in rest)
        if "preemption" in pod:
            if not pod["preemption"]:
                lines.append("  preemption: evicting lower-priority pods frees enough on no node")
            for node, victims in pod["preemption"].items():
                lines.append(f"  preemption: on {node} evict {', '.join(victims) or 'nobody (room is free)'}")
    return "\n".join(lines)


def summarize(result: dict[str, Any]) -> Sequence[str]:
    return [f"{p['namespace']}/{p['name']}" for p in result["pods"]]
