"""kube-scheduler's extender wire format (k8s.io/kube-scheduler/extender/v1), decoded fast.

The Go types have no json tags: keys are the Go field names, nulls are sent, nothing is
omitted. Requests are decoded with msgspec into only the fields we read; Node objects of a
full NodeList are kept as raw bytes so that they go back unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, starmap
from typing import Any

import msgspec

from extender.scheduling.preempt.victims import Candidate


class WireError(ValueError):
    """A request body that is not what kube-scheduler sends (answered with HTTP 400)."""


class _NodeMeta(msgspec.Struct):
    name: str = ""
    labels: dict[str, str] | None = None


class _NodeHead(msgspec.Struct):
    metadata: _NodeMeta = msgspec.field(default_factory=_NodeMeta)


class NodeList(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class ExtenderArgs(msgspec.Struct):
    Pod: dict[str, Any] | None = None
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None


class ExtenderBindingArgs(msgspec.Struct):
    PodName: str = ""
    PodNamespace: str = ""
    PodUID: str = ""
    Node: str = ""


class _MetaPod(msgspec.Struct):
    UID: str = ""


class _MetaVictims(msgspec.Struct):
    Pods: list[_MetaPod] | None = None
    NumPDBViolations: int = 0


class _PodMeta(msgspec.Struct):
    uid: str = ""


class _PodHeadOnly(msgspec.Struct):
    metadata: _PodMeta = msgspec.field(default_factory=_PodMeta)


class _Victims(msgspec.Struct):
    Pods: list[_PodHeadOnly] | None = None
    NumPDBViolations: int = 0


class ExtenderPreemptionArgs(msgspec.Struct):
    Pod: dict[str, Any] | None = None
    NodeNameToVictims: dict[str, _Victims | None] | None = None
    NodeNameToMetaVictims: dict[str, _MetaVictims | None] | None = None


class DecodedPreemption:
    __slots__ = ("candidates", "pod")

    def __init__(self, pod: dict[str, Any], candidates: dict[str, Candidate]) -> None:
        self.pod = pod
        self.candidates = candidates


_args = msgspec.json.Decoder(ExtenderArgs)
_preemption = msgspec.json.Decoder(ExtenderPreemptionArgs)
_binding = msgspec.json.Decoder(ExtenderBindingArgs)
_node_head = msgspec.json.Decoder(_NodeHead)
_encoder = msgspec.json.Encoder()


def _decode(decoder: msgspec.json.Decoder[Any], body: bytes) -> Any:
    if not body.strip():
        raise WireError("empty request body")
    try:
        return decoder.decode(body)
    except msgspec.DecodeError as exc:
        raise WireError(f"malformed request: {exc}") from None
    except RecursionError:
        raise WireError("malformed request: nested too deeply") from None


class DecodedArgs:
    """A filter/prioritize request: the pod, the node names, and the raw nodes if sent."""

    __slots__ = ("node_names", "nodes_raw", "pod", "raw_node_labels")

    def __init__(
        self,
        pod: dict[str, Any],
        node_names: list[str],
        nodes_raw: list[msgspec.Raw] | None,
        labels: dict[str, dict[str, str]] | None,
    ) -> None:
        self.pod = pod
        self.node_names = node_names
        #: Full-NodeList mode: the Node objects exactly as received, by position.
        self.nodes_raw = nodes_raw
        self.raw_node_labels = labels


def _require_pod(pod: dict[str, Any] | None) -> dict[str, Any]:
    if pod is None:
        raise WireError("malformed request: Pod is required")
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise WireError("malformed request: Pod.metadata.name is required")
    return pod


def decode_args(body: bytes) -> DecodedArgs:
    args: ExtenderArgs = _decode(_args, body)
    _require_pod(args.Pod)
    assert args.Pod is not None
    if args.NodeNames is not None:
        return DecodedArgs(args.Pod, args.NodeNames, None, None)
    if args.Nodes is not None:
        raw = args.Nodes.items or []
        names: list[str] = []
        labels: dict[str, dict[str, str]] = {}
        for i, item in enumerate(raw):
            try:
                head = _node_head.decode(item)
            except msgspec.DecodeError as exc:
                raise WireError(f"malformed request: Nodes.items[{i}]: {exc}") from None
            names.append(head.metadata.name)
            labels[head.metadata.name] = head.metadata.labels or {}
        return DecodedArgs(args.Pod, names, raw, labels)
    return DecodedArgs(args.Pod, [], None, None)


def decode_preemption(body: bytes) -> DecodedPreemption:
    """ExtenderPreemptionArgs: victims by UID, from NodeNameToMetaVictims (nodeCacheCapable) or
    from the full pods of NodeNameToVictims."""
    args: ExtenderPreemptionArgs = _decode(_preemption, body)
    pod = _require_pod(args.Pod)
    candidates: dict[str, Candidate] = {}
    if args.NodeNameToMetaVictims is not None:
        for node, meta in args.NodeNameToMetaVictims.items():
            pods = (meta.Pods if meta is not None else None) or []
            candidates[node] = Candidate(
                tuple(p.UID for p in pods), meta.NumPDBViolations if meta is not None else 0
            )
    elif args.NodeNameToVictims is not None:
        for node, victims in args.NodeNameToVictims.items():
            full = (victims.Pods if victims is not None else None) or []
            candidates[node] = Candidate(
                tuple(p.metadata.uid for p in full), victims.NumPDBViolations if victims is not None else 0
            )
    for node, candidate in candidates.items():
        if any(not uid for uid in candidate.uids):
            raise WireError(f"malformed request: a victim on node {node} has no UID")
    return DecodedPreemption(pod, candidates)


def encode_preemption_result(candidates: dict[str, Candidate]) -> bytes:
    """ExtenderPreemptionResult: always NodeNameToMetaVictims (UIDs), whatever the request held."""
    return _encoder.encode(
        {
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": uid} for uid in c.uids], "NumPDBViolations": c.pdb_violations}
                for node, c in candidates.items()
            }
        }
    )


def decode_binding(body: bytes) -> ExtenderBindingArgs:
    args: ExtenderBindingArgs = _decode(_binding, body)
    missing = [k for k in ("PodName", "PodNamespace", "Node") if not getattr(args, k)]
    if missing:
        raise WireError(f"malformed request: {', '.join(missing)} required")
    return args


def encode_filter_result(
    args: DecodedArgs, passed: list[str], failed: dict[str, str], unresolvable: dict[str, str], error: str
) -> bytes:
    if args.nodes_raw is not None:
        keep = set(passed)
        items = [raw for raw, name in zip(args.nodes_raw, args.node_names, strict=True) if name in keep]
        nodes: dict[str, Any] | None = {"metadata": {}, "items": items}
        names: list[str] | None = None
    else:
        nodes, names = None, passed
    return _encoder.encode(
        {
            "Nodes": nodes,
            "NodeNames": names,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": error,
        }
    )


class HostPriority(msgspec.Struct, gc=False):
    """extenderv1.HostPriority (a struct encodes about twice as fast as a dict)."""

    Host: str
    Score: int


def encode_priorities(names: Sequence[str], scores: Sequence[int]) -> bytes:
    """The nodes that score above 0. kube-scheduler adds each listed node's score to the
    node's total and a node left out adds nothing (pkg/scheduler/schedule_one.go,
    prioritizeNodes: ``combinedScores[host] += score * weight``, v1.34.0-v1.37.0), so leaving
    out the zeros answers the same; with binpacking on a cluster of mostly empty nodes that is
    most of them (5,000 nodes: half of prioritize's encoding time)."""
    kept = compress(zip(names, scores, strict=True), scores)  # scores are ints
    return _encoder.encode(list(starmap(HostPriority, kept)))


def encode_binding_result(error: str) -> bytes:
    return _encoder.encode({"Error": error})


def encode(value: Any) -> bytes:
    return _encoder.encode(value)
