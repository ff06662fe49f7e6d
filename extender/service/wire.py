"""kube-scheduler's extender wire format (k8s.io/kube-scheduler/extender/v1), decoded fast.

The Go types have no json tags: keys are the Go field names, nulls are sent, nothing is
omitted. Requests are decoded with msgspec into only the fields we read; Node objects of a
full NodeList are kept as raw bytes so that they go back unchanged.

The Pod is kept as raw bytes too, and parsed through a :class:`PodMemo`: kube-scheduler sends the
same Pod (the same bytes) in a scheduling attempt's filter and prioritize, and again in every
retry while the pod is unchanged (issue 54: decoding and parsing it was about 5% of the CPU).
A pod new to the memo that equals the cache's record of it (the informer parsed the same
object) is that record, not parsed again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress, starmap
from typing import Any

import msgspec
from cachetools import LRUCache

from extender.model.core import Pod, parse_pod
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
    #: The Pod's JSON as sent (empty: left out); see :class:`PodMemo`. (Not ``Raw | None``:
    #: msgspec 0.22 then accepts only null.)
    Pod: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    Nodes: NodeList | None = None
    #: The names' JSON array as sent (empty: left out); see :class:`NamesMemo`.
    NodeNames: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _ExtenderArgsChecked(ExtenderArgs):
    """The same with the Pod and the names decoded, as every request was before the memos:
    decoding a malformed request again this way gives the reason it always gave (the first
    error in the body, at the same path and byte)."""

    Pod: dict[str, Any] | None = None  # type: ignore[assignment]
    NodeNames: list[str] | None = None  # type: ignore[assignment]


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
    Pod: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    NodeNameToVictims: dict[str, _Victims | None] | None = None
    NodeNameToMetaVictims: dict[str, _MetaVictims | None] | None = None


class _ExtenderPreemptionArgsChecked(ExtenderPreemptionArgs):
    """See :class:`_ExtenderArgsChecked`."""

    Pod: dict[str, Any] | None = None  # type: ignore[assignment]


class DecodedPreemption:
    __slots__ = ("candidates", "pod")

    def __init__(self, pod: Pod, candidates: dict[str, Candidate]) -> None:
        self.pod = pod
        self.candidates = candidates


_args = msgspec.json.Decoder(ExtenderArgs)
_args_checked = msgspec.json.Decoder(_ExtenderArgsChecked)
_preemption = msgspec.json.Decoder(ExtenderPreemptionArgs)
_preemption_checked = msgspec.json.Decoder(_ExtenderPreemptionArgsChecked)
_pod_object = msgspec.json.Decoder(dict[str, Any])
_names = msgspec.json.Decoder(list[str] | None)
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


def _decode_as_before(
    decoder: msgspec.json.Decoder[Any], checked: msgspec.json.Decoder[Any], body: bytes
) -> Any:
    """``body`` decoded with ``decoder`` (the Pod kept raw); when that fails, the reason is the
    one decoding with ``checked`` (the Pod into dicts) gives, as it always was."""
    try:
        return _decode(decoder, body)
    except WireError as fast:
        _decode(checked, body)  # raises the same, or an error the Pod comes to first
        raise fast from None


class DecodedArgs:
    """A filter/prioritize request: the pod, the node names, and the raw nodes if sent."""

    __slots__ = ("node_names", "nodes_raw", "pod", "raw_node_labels")

    def __init__(
        self,
        pod: Pod,
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


#: How many parsed pods a :class:`PodMemo` keeps: the pods kube-scheduler is trying now and
#: will retry soon (it sends one pod at a time; a retry comes after a backoff of 1-10 s).
POD_MEMO_SIZE = 256
#: A pod larger than this is parsed each time, not kept: the memo holds at most
#: ``POD_MEMO_SIZE`` x this of request bytes (and their parsed pods).
POD_MEMO_MAX_BYTES = 128 * 1024


class PodMemo:
    """Parsed pods by the exact bytes of the Pod in the request (the whole bytes are the key:
    a dict compares them in full, a hash alone would not do).

    Equal bytes are the same object, so they parse to the same :class:`Pod`, which is shared
    between requests: nothing changes a parsed Pod (a frozen dataclass) nor its ``raw`` dict or
    other dicts after :func:`parse_pod` (the engine reads ``pod.raw``; a changed pod is a new
    one, ``dataclasses.replace``). Only pods that parsed are kept: a malformed one is checked
    again, with the same reason, each time it comes.

    ``cached``: the cache's record of a pod by (namespace, name). A pod new to the memo that
    equals the record's object (but for ``kind`` and ``apiVersion``, which kube-scheduler's copy
    leaves out) is that record: equal input, equal output, and that input was checked when the
    informer parsed it. kube-scheduler sends its informer's copy of the pod, which ours parsed
    already (issue 54: parsing it was 2.5% of the extender's CPU at 500 x 8); anything else,
    a changed, older or malformed pod, is parsed and checked as ever.
    """

    def __init__(
        self,
        size: int = POD_MEMO_SIZE,
        max_bytes: int = POD_MEMO_MAX_BYTES,
        cached: Callable[[tuple[str, str]], Pod | None] | None = None,
    ) -> None:
        self._pods: LRUCache[bytes, Pod] = LRUCache(maxsize=size)
        self.max_bytes = max_bytes
        self.cached = cached
        #: Pods parsed (memo misses that parsed).
        self.parsed = 0
        #: Pods that were the cache's record (memo misses that the cache answered).
        self.from_cache = 0

    def __len__(self) -> int:
        return len(self._pods)

    def known(self, raw: bytes) -> Pod | None:
        return self._pods.get(raw)

    def parse(self, raw: bytes, obj: dict[str, Any]) -> Pod:
        """``obj`` (``raw`` decoded and checked) parsed, or the cache's record of it; kept;
        raises ObjectError."""
        pod = self._cached_as_sent(obj)
        if pod is None:
            pod = parse_pod(obj)
            self.parsed += 1
        else:
            self.from_cache += 1
        if len(raw) <= self.max_bytes:
            self._pods[raw] = pod
        return pod

    def _cached_as_sent(self, obj: dict[str, Any]) -> Pod | None:
        meta = obj.get("metadata")
        if self.cached is None or not isinstance(meta, dict):
            return None
        namespace, name = meta.get("namespace", "default"), meta.get("name")
        if not (isinstance(namespace, str) and isinstance(name, str)):
            return None
        record = self.cached((namespace, name))
        if record is None or record.uid != meta.get("uid"):
            return None
        kept = record.raw
        keys = obj.keys() - _TYPE_META
        if keys != kept.keys() - _TYPE_META or any(obj[k] != kept[k] for k in keys):
            return None
        return record


#: An object's type, which kube-scheduler's copy of a pod leaves out and the informer's carries.
_TYPE_META = frozenset({"kind", "apiVersion"})


class _PodOf:
    """A request's Pod: from the memo, or decoded and checked where the request was checked
    before the memo, and parsed last (:meth:`parsed`), so a request with more than one fault
    is refused for the same one as ever."""

    __slots__ = ("known", "memo", "obj", "raw")

    def __init__(
        self, raw: msgspec.Raw, memo: PodMemo, checked: msgspec.json.Decoder[Any], body: bytes
    ) -> None:
        self.memo = memo
        self.raw = bytes(raw)
        self.known = memo.known(self.raw)
        self.obj: dict[str, Any] = {}
        if self.known is None:
            self.obj = _require_pod(self._decoded(checked, body))

    def _decoded(self, checked: msgspec.json.Decoder[Any], body: bytes) -> dict[str, Any] | None:
        if self.raw in (b"", b"null"):  # left out, or null
            return None
        try:
            obj: dict[str, Any] = _pod_object.decode(self.raw)
        except (msgspec.DecodeError, RecursionError):
            pod: dict[str, Any] | None = _decode(checked, body).Pod  # raises the reason as ever
            return pod
        return obj

    def parsed(self) -> Pod:
        return self.known if self.known is not None else self.memo.parse(self.raw, self.obj)


#: How many node-name lists a :class:`NamesMemo` keeps: the last requests' and answers'.
NAMES_MEMO_SIZE = 4


class NamesMemo:
    """Node-name lists by the exact bytes of their JSON array, as requests sent them or filter
    answered them (compared in full, newest first).

    kube-scheduler's prioritize sends the names the filter of the same cycle just passed, in
    the filter's order (findNodesThatPassExtenders keeps the extender's order, v1.34.0-v1.37.0),
    so its array is the bytes of that answer: the list is taken as it is, not decoded again,
    and the engine finds it to be the filter's by identity, not by comparing 500 names (issue
    54). A list is shared between requests: nothing changes a request's names (the engine and
    the answers only read them), as nothing changes a filter's passed names once answered.
    """

    def __init__(self, size: int = NAMES_MEMO_SIZE) -> None:
        self.size = size
        self._lists: list[tuple[bytes, list[str]]] = []
        #: Arrays decoded (memo misses).
        self.decoded = 0

    def __len__(self) -> int:
        return len(self._lists)

    def known(self, raw: bytes) -> list[str] | None:
        for i, (seen, names) in enumerate(self._lists):
            if seen == raw:
                if i:
                    self._lists.insert(0, self._lists.pop(i))
                return names
        return None

    def remember(self, raw: bytes, names: list[str]) -> None:
        if self.size <= 0 or not names:
            return
        self._lists = [(raw, names), *(e for e in self._lists if e[0] != raw)][: self.size]


def _node_names(raw: msgspec.Raw, memo: NamesMemo | None, body: bytes) -> list[str] | None:
    """The request's names (None: left out or null), through ``memo``; malformed, the reason
    decoding the whole request gives, as ever (the first error in the body)."""
    as_sent = bytes(raw)
    if memo is not None and (known := memo.known(as_sent)) is not None:
        return known
    if as_sent in (b"", b"null"):
        return None
    try:
        names: list[str] | None = _names.decode(as_sent)
    except (msgspec.DecodeError, RecursionError):
        _decode(_args_checked, body)  # raises the reason as ever
        raise WireError("malformed request: NodeNames") from None  # (not reached)
    if memo is not None and names is not None:
        memo.decoded += 1
        memo.remember(as_sent, names)
    return names


def decode_args(body: bytes, memo: PodMemo | None = None, names: NamesMemo | None = None) -> DecodedArgs:
    """A filter/prioritize request, its Pod parsed (through ``memo``; None: a memo of its own),
    its node names through ``names`` (None: decoded). Raises WireError, or ObjectError for a
    Pod that is JSON but no Pod."""
    args: ExtenderArgs = _decode_as_before(_args, _args_checked, body)
    node_names = _node_names(args.NodeNames, names, body)  # as before: its errors before the Pod's
    pod = _PodOf(args.Pod, memo if memo is not None else PodMemo(), _args_checked, body)
    if node_names is not None:
        return DecodedArgs(pod.parsed(), node_names, None, None)
    if args.Nodes is not None:
        raw = args.Nodes.items or []
        listed: list[str] = []
        labels: dict[str, dict[str, str]] = {}
        for i, item in enumerate(raw):
            try:
                head = _node_head.decode(item)
            except msgspec.DecodeError as exc:
                raise WireError(f"malformed request: Nodes.items[{i}]: {exc}") from None
            listed.append(head.metadata.name)
            labels[head.metadata.name] = head.metadata.labels or {}
        return DecodedArgs(pod.parsed(), listed, raw, labels)
    return DecodedArgs(pod.parsed(), [], None, None)


def decode_preemption(body: bytes, memo: PodMemo | None = None) -> DecodedPreemption:
    """ExtenderPreemptionArgs: victims by UID, from NodeNameToMetaVictims (nodeCacheCapable) or
    from the full pods of NodeNameToVictims. The Pod as in :func:`decode_args`."""
    args: ExtenderPreemptionArgs = _decode_as_before(_preemption, _preemption_checked, body)
    pod = _PodOf(args.Pod, memo if memo is not None else PodMemo(), _preemption_checked, body)
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
    return DecodedPreemption(pod.parsed(), candidates)


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
    args: DecodedArgs,
    passed: list[str],
    failed: dict[str, str],
    unresolvable: dict[str, str],
    error: str,
    memo: NamesMemo | None = None,
) -> bytes:
    """ExtenderFilterResult; the passed names' array remembered in ``memo`` (the prioritize
    that follows sends it back)."""
    names: list[str] | msgspec.Raw | None
    if args.nodes_raw is not None:
        keep = set(passed)
        items = [raw for raw, name in zip(args.nodes_raw, args.node_names, strict=True) if name in keep]
        nodes: dict[str, Any] | None = {"metadata": {}, "items": items}
        names = None
    elif memo is not None and passed:
        array = _encoder.encode(passed)
        memo.remember(array, passed)
        nodes, names = None, msgspec.Raw(array)
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
