"""The wire format, byte for byte where kube-scheduler cares."""

from __future__ import annotations

import json

import pytest

from extender.model.core import Pod, parse_pod
from extender.model.errors import ObjectError
from extender.scheduling.preempt.victims import Candidate
from extender.service import wire
from tests.service.fixtures import TRAINER, args_names, args_nodes, scheduler_node


def test_node_names_mode_round_trip() -> None:
    args = wire.decode_args(args_names(TRAINER, ["a", "b"]))
    assert args.node_names == ["a", "b"] and args.nodes_raw is None
    out = json.loads(wire.encode_filter_result(args, ["a"], {}, {"b": "no"}, ""))
    assert out == {
        "Nodes": None,
        "NodeNames": ["a"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {"b": "no"},
        "Error": "",
    }


def test_full_node_list_mode_returns_the_original_objects() -> None:
    nodes = [scheduler_node("a", {"zone": "z1"}), scheduler_node("b")]
    args = wire.decode_args(args_nodes(TRAINER, nodes))
    assert args.node_names == ["a", "b"]
    assert args.raw_node_labels is not None and args.raw_node_labels["a"]["zone"] == "z1"
    out = json.loads(wire.encode_filter_result(args, ["b"], {}, {"a": "no"}, ""))
    assert out["NodeNames"] is None
    assert out["Nodes"] == {"metadata": {}, "items": [nodes[1]]}  # unchanged, incl. the legacy "Port" key


#: name -> (scores, the answer): nodes scoring 0 are left out, as kube-scheduler adds nothing
#: for a node not listed (schedule_one.go prioritizeNodes, v1.34.0-v1.37.0).
PRIORITIES: dict[str, tuple[list[tuple[str, int]], bytes]] = {
    "a bare array of integer scores": (
        [("a", 7), ("b", 10)],
        b'[{"Host":"a","Score":7},{"Host":"b","Score":10}]',
    ),
    "a node scoring 0 is left out": ([("a", 7), ("b", 0)], b'[{"Host":"a","Score":7}]'),
    "every node scoring 0: an empty array": ([("a", 0), ("b", 0)], b"[]"),
    "no node": ([], b"[]"),
}


@pytest.mark.parametrize("case", list(PRIORITIES))
def test_priorities(case: str) -> None:
    scores, answer = PRIORITIES[case]
    assert wire.encode_priorities([n for n, _ in scores], [s for _, s in scores]) == answer


def test_priorities_pair_every_node_with_a_score() -> None:
    with pytest.raises(ValueError):
        wire.encode_priorities(["a", "b"], [1])


def test_binding_round_trip() -> None:
    args = wire.decode_binding(b'{"PodName":"p","PodNamespace":"ns","PodUID":"u","Node":"n"}')
    assert (args.PodName, args.PodNamespace, args.PodUID, args.Node) == ("p", "ns", "u", "n")
    assert wire.encode_binding_result("") == b'{"Error":""}'


BAD = [
    ("empty", b"", "empty request body"),
    ("not-json", b"{nope", "malformed request"),
    ("no-pod", b'{"Pod":null,"Nodes":null,"NodeNames":[]}', "Pod is required"),
    ("pod-wrong-type", b'{"Pod":[1]}', "malformed request"),
    ("names-wrong-type", b'{"Pod":{"metadata":{"name":"p"}},"NodeNames":"a"}', "NodeNames"),
    ("pod-without-name", b'{"Pod":{"metadata":{}},"NodeNames":[]}', "Pod.metadata.name is required"),
    ("node-item-not-object", b'{"Pod":{"metadata":{"name":"p"}},"Nodes":{"items":[5]}}', "Nodes.items[0]"),
    (
        "nested deeper than the decoder recurses",
        b'{"Pod":{"metadata":{"name":"p"},"x":' + b"[" * 5000 + b"]" * 5000 + b"}}",
        "malformed request: nested too deeply",
    ),
]


@pytest.mark.parametrize(("name", "body", "message"), BAD, ids=[b[0] for b in BAD])
def test_malformed_args_are_rejected_with_a_reason(name: str, body: bytes, message: str) -> None:
    with pytest.raises(wire.WireError, match=message.replace("[", r"\[").replace("]", r"\]")):
        wire.decode_args(body)


def test_binding_needs_its_fields() -> None:
    with pytest.raises(wire.WireError, match="PodName, Node required"):
        wire.decode_binding(b'{"PodNamespace":"ns"}')


def preemption_args(**fields: object) -> bytes:
    return json.dumps(
        {"Pod": TRAINER, "NodeNameToVictims": None, "NodeNameToMetaVictims": None, **fields}
    ).encode()


PREEMPTION_REQUESTS = {
    "node cache: meta victims": (
        {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "u1"}, {"UID": "u2"}], "NumPDBViolations": 1}}},
        {"n1": Candidate(("u1", "u2"), 1)},
    ),
    "full pods": (
        {
            "NodeNameToVictims": {
                "n1": {"Pods": [{"metadata": {"name": "v", "uid": "u1"}}], "NumPDBViolations": 0}
            }
        },
        {"n1": Candidate(("u1",), 0)},
    ),
    "1.38 placeholder: no victims": (
        {"NodeNameToMetaVictims": {"n1": {"Pods": [], "NumPDBViolations": 0}, "n2": {"Pods": None}}},
        {"n1": Candidate(()), "n2": Candidate(())},
    ),
    "no candidates": ({}, {}),
}


@pytest.mark.parametrize(
    ("fields", "candidates"), PREEMPTION_REQUESTS.values(), ids=PREEMPTION_REQUESTS.keys()
)
def test_preemption_requests_decode_to_victim_uids_per_node(
    fields: dict[str, object], candidates: dict[str, Candidate]
) -> None:
    decoded = wire.decode_preemption(preemption_args(**fields))
    assert decoded.candidates == candidates and decoded.pod.name == "trainer"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (json.dumps({"NodeNameToMetaVictims": {}}).encode(), "Pod is required"),
        (
            preemption_args(NodeNameToMetaVictims={"n1": {"Pods": [{"UID": ""}]}}),
            "a victim on node n1 has no UID",
        ),
        (preemption_args(NodeNameToMetaVictims={"n1": {"Pods": "x"}}), "malformed request"),
    ],
    ids=["no pod", "victim without uid", "victims not a list"],
)
def test_malformed_preemption_requests_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(wire.WireError, match=message):
        wire.decode_preemption(body)


def test_the_preemption_answer_is_always_meta_victims_exactly() -> None:
    answer = wire.encode_preemption_result({"n1": Candidate(("u1", "u2"), 1), "n2": Candidate(())})
    assert answer == (
        b'{"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"u1"},{"UID":"u2"}],"NumPDBViolations":1},'
        b'"n2":{"Pods":[],"NumPDBViolations":0}}}'
    )


def pod_bytes(name: str, **spec: object) -> bytes:
    return json.dumps({"metadata": {"name": name, "namespace": "default"}, "spec": spec}).encode()


def filter_body(pod: bytes, names: str = '["a"]') -> bytes:
    return b'{"Pod":' + pod + b',"Nodes":null,"NodeNames":' + names.encode() + b"}"


def preempt_body(pod: bytes) -> bytes:
    return b'{"Pod":' + pod + b',"NodeNameToMetaVictims":{}}'


def test_the_same_pod_bytes_are_parsed_once_for_filter_prioritize_and_preempt() -> None:
    memo = wire.PodMemo()
    first = wire.decode_args(filter_body(pod_bytes("p")), memo).pod
    again = wire.decode_args(filter_body(pod_bytes("p"), '["a","b"]'), memo).pod  # other nodes
    preempt = wire.decode_preemption(preempt_body(pod_bytes("p")), memo).pod
    assert first is again is preempt and first.name == "p"
    assert memo.parsed == 1 and len(memo) == 1


#: name -> a pod's bytes that differ from ``pod_bytes("p")``'s: parsed again, kept apart.
OTHER_BYTES = {
    "another pod": pod_bytes("q"),
    "the pod changed": pod_bytes("p", priority=7),
    "the same pod spaced otherwise": pod_bytes("p").replace(b", ", b","),
}


@pytest.mark.parametrize("case", list(OTHER_BYTES))
def test_other_pod_bytes_are_parsed_again(case: str) -> None:
    memo = wire.PodMemo()
    first = wire.decode_args(filter_body(pod_bytes("p")), memo).pod
    other = wire.decode_args(filter_body(OTHER_BYTES[case]), memo).pod
    assert other is not first and memo.parsed == 2 and len(memo) == 2
    assert wire.decode_args(filter_body(pod_bytes("p")), memo).pod is first


#: name -> (a request, its reason): the same each time it comes, as the memo keeps no failure.
MALFORMED_PODS = {
    "null": (filter_body(b"null"), "malformed request: Pod is required"),
    "left out": (b'{"NodeNames":[]}', "malformed request: Pod is required"),
    "not an object": (
        filter_body(b"[1]"),
        "malformed request: Expected `object | null`, got `array` - at `$.Pod`",
    ),
    "no name": (filter_body(b'{"metadata":{}}'), "malformed request: Pod.metadata.name is required"),
    "not a pod": (filter_body(pod_bytes("p", containers=5)), "spec.containers: expected a list, got int"),
    "the pod first, then bad node names": (
        filter_body(b"[1]", '"a"'),
        "malformed request: Expected `object | null`, got `array` - at `$.Pod`",
    ),
    "a good pod, then bad node names": (
        filter_body(pod_bytes("p"), '"a"'),
        "malformed request: Expected `array | null`, got `str` - at `$.NodeNames`",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED_PODS))
def test_malformed_pods_are_refused_for_the_same_reason_each_time(case: str) -> None:
    body, reason = MALFORMED_PODS[case]
    memo = wire.PodMemo()
    for _ in range(2):
        with pytest.raises((wire.WireError, ObjectError)) as refused:
            wire.decode_args(body, memo)
        assert str(refused.value) == reason
    assert len(memo) == 0


def test_the_memo_keeps_the_last_pods_used_and_no_large_ones() -> None:
    memo = wire.PodMemo(size=2, max_bytes=200)
    pods = [wire.decode_args(filter_body(pod_bytes(name)), memo).pod for name in ("a", "b")]
    assert wire.decode_args(filter_body(pod_bytes("a")), memo).pod is pods[0]  # "a" used last
    wire.decode_args(filter_body(pod_bytes("c")), memo)  # "b" goes
    assert len(memo) == 2 and memo.parsed == 3
    assert wire.decode_args(filter_body(pod_bytes("a")), memo).pod is pods[0]
    assert wire.decode_args(filter_body(pod_bytes("b")), memo).pod is not pods[1]
    large = pod_bytes("large", nodeName="n" * 200)
    assert (
        wire.decode_args(filter_body(large), memo).pod is not wire.decode_args(filter_body(large), memo).pod
    )
    assert len(memo) == 2


def versioned_pod(name: str = "p", uid: str = "u1", version: str = "7", **spec: object) -> bytes:
    meta = {"name": name, "namespace": "default", "uid": uid, "resourceVersion": version}
    return json.dumps({"metadata": meta, "spec": spec}).encode()


def cache_of(*pods: bytes) -> dict[tuple[str, str], Pod]:
    """The cache's records of these pods, as the informer parsed them."""
    records = [parse_pod(json.loads(raw)) for raw in pods]
    return {record.key: record for record in records}


def typed(raw: bytes) -> bytes:
    """The pod as the informer holds it: with its kind and apiVersion (kube-scheduler's copy
    leaves them out)."""
    return json.dumps({"kind": "Pod", "apiVersion": "v1", **json.loads(raw)}).encode()


def test_a_pod_sent_as_the_cache_holds_it_is_the_cache_record() -> None:
    cache = cache_of(typed(versioned_pod(priority=3)))
    memo = wire.PodMemo(cached=cache.get)
    sent = versioned_pod(priority=3).replace(b", ", b",")  # other bytes, the same object
    pod = wire.decode_args(filter_body(sent), memo).pod
    assert pod is cache[("default", "p")] and memo.parsed == 0 and memo.from_cache == 1
    assert wire.decode_args(filter_body(sent), memo).pod is pod and memo.from_cache == 1  # kept


#: name -> a request's pod that is not the cache's record of ``versioned_pod(priority=3)``: parsed.
NOT_AS_CACHED = {
    "another resourceVersion": versioned_pod(version="8", priority=5),
    "another uid (a pod of the same name, recreated)": versioned_pod(uid="u2", priority=5),
    "no resourceVersion": json.dumps(
        {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": {"priority": 5}}
    ).encode(),
    "another pod": versioned_pod(name="q", priority=5),
    "the cached version, another spec (not what the API server holds)": versioned_pod(priority=5),
}


@pytest.mark.parametrize("case", list(NOT_AS_CACHED))
def test_a_pod_not_as_the_cache_holds_it_is_parsed(case: str) -> None:
    cache = cache_of(versioned_pod(priority=3))
    memo = wire.PodMemo(cached=cache.get)
    pod = wire.decode_args(filter_body(NOT_AS_CACHED[case]), memo).pod
    assert pod.priority == 5 and memo.parsed == 1 and memo.from_cache == 0


#: name -> a malformed pod under a cached pod's name, uid and version: refused as without a cache.
MALFORMED_AS_CACHED = {
    "metadata of the wrong type": (
        json.dumps({"metadata": {"name": "p", "namespace": "default", "uid": 1, "resourceVersion": "7"}}),
        r"metadata\.uid",
    ),
    "a spec that is no object": (json.dumps({**json.loads(versioned_pod()), "spec": "x"}), r"spec"),
    "containers that are no list": (versioned_pod(containers=5).decode(), r"spec\.containers"),
}


@pytest.mark.parametrize("case", list(MALFORMED_AS_CACHED))
def test_a_malformed_pod_is_refused_as_ever_with_a_cache(case: str) -> None:
    cache = cache_of(versioned_pod())
    body, reason = MALFORMED_AS_CACHED[case]
    memo = wire.PodMemo(cached=cache.get)
    for _ in range(2):  # and not kept
        with pytest.raises(ObjectError, match=reason):
            wire.decode_args(filter_body(body.encode()), memo)
    assert memo.from_cache == 0 and len(memo) == 0


def test_prioritize_takes_the_names_filter_answered_as_they_are() -> None:
    names = wire.NamesMemo()
    args = wire.decode_args(filter_body(pod_bytes("p"), '["a","b","c"]'), names=names)
    passed = ["c", "a"]
    answer = wire.encode_filter_result(args, passed, {}, {"b": "no"}, "", names)
    assert answer == wire.encode_filter_result(args, passed, {}, {"b": "no"}, "")  # the same bytes
    prioritize = filter_body(
        pod_bytes("p"), json.dumps(json.loads(answer)["NodeNames"], separators=(",", ":"))
    )
    assert wire.decode_args(prioritize, names=names).node_names is passed
    assert names.decoded == 1  # the filter's request only


#: name -> a names array that differs from '["a","b"]' (as bytes): decoded again, kept apart.
OTHER_NAMES = {
    "other nodes": ('["a","c"]', ["a", "c"]),
    "another order": ('["b","a"]', ["b", "a"]),
    "the same names spaced otherwise": ('["a", "b"]', ["a", "b"]),
    "a node fewer": ('["a"]', ["a"]),
}


@pytest.mark.parametrize("case", list(OTHER_NAMES))
def test_other_names_bytes_are_decoded_again(case: str) -> None:
    array, expected = OTHER_NAMES[case]
    names = wire.NamesMemo()
    first = wire.decode_args(filter_body(pod_bytes("p"), '["a","b"]'), names=names).node_names
    other = wire.decode_args(filter_body(pod_bytes("p"), array), names=names).node_names
    assert other == expected and other is not first and names.decoded == 2
    assert wire.decode_args(filter_body(pod_bytes("q"), '["a","b"]'), names=names).node_names is first


#: name -> (a request, its reason): the same with the names memo, and each time it comes.
MALFORMED_NAMES = {
    "not an array": (
        filter_body(pod_bytes("p"), '"a"'),
        "malformed request: Expected `array | null`, got `str` - at `$.NodeNames`",
    ),
    "a name that is no string": (
        filter_body(pod_bytes("p"), '["a",5]'),
        "malformed request: Expected `str`, got `int` - at `$.NodeNames[1]`",
    ),
    "the pod first, then bad names": (
        filter_body(b"[1]", '["a",5]'),
        "malformed request: Expected `object | null`, got `array` - at `$.Pod`",
    ),
    "bad names, then no pod": (
        b'{"NodeNames":["a",5],"Pod":null}',
        "malformed request: Expected `str`, got `int` - at `$.NodeNames[1]`",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED_NAMES))
def test_malformed_names_are_refused_for_the_same_reason_with_the_memo(case: str) -> None:
    body, reason = MALFORMED_NAMES[case]
    names = wire.NamesMemo()
    wire.decode_args(filter_body(pod_bytes("p"), '["a"]'), names=names)
    for memo in (None, names, names):
        with pytest.raises(wire.WireError) as refused:
            wire.decode_args(body, names=memo)
        assert str(refused.value) == reason
    assert len(names) == 1


#: name -> a names array and what it decodes to, with or without the memo.
ABSENT_NAMES: dict[str, tuple[bytes, list[str]]] = {
    "null": (b'{"Pod":{"metadata":{"name":"p"}},"NodeNames":null}', []),
    "left out": (b'{"Pod":{"metadata":{"name":"p"}}}', []),
    "empty": (b'{"Pod":{"metadata":{"name":"p"}},"NodeNames":[]}', []),
}


@pytest.mark.parametrize("case", list(ABSENT_NAMES))
def test_no_names_decode_as_ever_and_are_not_kept(case: str) -> None:
    body, expected = ABSENT_NAMES[case]
    names = wire.NamesMemo()
    assert wire.decode_args(body, names=names).node_names == expected == wire.decode_args(body).node_names
    assert len(names) == 0


def test_the_names_memo_keeps_the_last_arrays_used() -> None:
    names = wire.NamesMemo(size=2)
    lists = [wire.decode_args(filter_body(pod_bytes("p"), f'["{n}"]'), names=names).node_names for n in "ab"]
    assert wire.decode_args(filter_body(pod_bytes("p"), '["a"]'), names=names).node_names is lists[0]
    wire.decode_args(filter_body(pod_bytes("p"), '["c"]'), names=names)  # "b" goes
    assert len(names) == 2 and names.decoded == 3
    assert wire.decode_args(filter_body(pod_bytes("p"), '["a"]'), names=names).node_names is lists[0]
    assert wire.decode_args(filter_body(pod_bytes("p"), '["b"]'), names=names).node_names is not lists[1]
