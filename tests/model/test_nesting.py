"""Objects nested deeper than the extender carries: decoded anyway (cut and marked), refused by
the parsers with the reason, and nothing around them lost."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from extender.cluster.state import ClusterState
from extender.model import nesting
from extender.model.dra import parse_device_class, parse_resource_claim, parse_resource_claim_template
from extender.model.errors import ObjectError
from tests.builders import claim, device_class


def deep_json(depth: int, leaf: str = '"x"') -> str:
    return '{"a":' * depth + leaf + "}" * depth


def deep(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def with_parameters(obj: dict[str, Any], parameters: Any) -> dict[str, Any]:
    obj["spec"]["devices"]["config"] = [{"opaque": {"driver": "d", "parameters": parameters}}]
    return obj


def test_a_document_orjson_decodes_comes_back_as_it_is() -> None:
    text = '{"items": [{"metadata": {"name": "x"}, "s": "{[\\"]"}]}'
    assert nesting.loads(text) == orjson.loads(text)


MALFORMED = {
    "cut short": '{"items": [{"a": 1}',
    "a stray bracket": '{"a": 1]}',
    "deep, and malformed below the cut": '{"spec": ' + '{"a":' * 1500 + '"x"' + "}" * 1499,
    "deep, and malformed above the cut": '{"spec": ' + deep_json(1500) + ",}",
}


@pytest.mark.parametrize("text", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_document_is_a_decode_error_at_any_depth(text: str) -> None:
    # Whether depth was the trouble is found by cutting, not by reading orjson's message.
    with pytest.raises(orjson.JSONDecodeError):
        nesting.loads(text)


def test_a_list_with_one_object_too_deep_keeps_the_others_and_marks_that_one() -> None:
    # Brackets inside strings (with escaped quotes) are not nesting.
    tricky = '"a string with [ { and \\" quotes }"'
    items = [
        f'{{"metadata": {{"name": "before"}}, "note": {tricky}}}',
        f'{{"metadata": {{"name": "deep"}}, "spec": {deep_json(1500)}}}',
        '{"metadata": {"name": "after"}, "spec": {"x": [1, 2, {"y": "]"}]}}',
    ]
    doc = nesting.loads(
        '{"kind": "List", "items": [' + ",".join(items) + '], "metadata": {"resourceVersion": "7"}}'
    )
    before, cut, after = doc["items"]
    assert before == {"metadata": {"name": "before"}, "note": 'a string with [ { and " quotes }'}
    assert after == {"metadata": {"name": "after"}, "spec": {"x": [1, 2, {"y": "]"}]}}
    assert cut[nesting.UNREADABLE] == nesting.REASON and cut["metadata"] == {"name": "deep"}
    assert nesting.UNREADABLE not in before and nesting.UNREADABLE not in after
    assert doc["metadata"] == {"resourceVersion": "7"}
    orjson.dumps(doc)  # what was cut encodes again


def test_a_watch_event_marks_its_object() -> None:
    event = nesting.loads(
        b'{"type": "ADDED", "object": {"metadata": {"name": "x"}, "spec": ' + deep_json(2000).encode() + b"}}"
    )
    assert event["type"] == "ADDED" and event["object"][nesting.UNREADABLE] == nesting.REASON


@pytest.mark.parametrize(
    "parse",
    [
        lambda p: parse_resource_claim(with_parameters(claim("c"), p)),
        lambda p: parse_resource_claim_template(
            {
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t"},
                "spec": {"spec": with_parameters(claim("c"), p)["spec"]},
            }
        ),
        lambda p: parse_device_class(
            {**device_class("k"), "spec": {"config": [{"opaque": {"driver": "d", "parameters": p}}]}}
        ),
    ],
    ids=["claim", "template", "class"],
)
def test_the_parsers_refuse_objects_too_deep_and_read_the_rest(parse: Any) -> None:
    parse(deep(50))
    with pytest.raises(ObjectError, match=f"nested deeper than {nesting.READABLE_DEPTH} levels"):
        parse(deep(300))  # orjson decodes this, but could not send it back


def test_a_claim_too_deep_is_a_broken_claim_in_the_cache() -> None:
    cut = nesting.loads(
        '{"object": '
        + orjson.dumps(with_parameters(claim("c"), "DEEP")).decode().replace('"DEEP"', deep_json(1100))
        + "}"
    )
    state = ClusterState.from_objects([cut["object"], claim("plain")])
    # Kept (without its parameters) for what it holds, and broken for the pods that use it.
    assert ("default", "c") in state.claims and ("default", "plain") in state.claims
    assert "nested deeper than" in state.broken_claims[("default", "c")]
    assert nesting.UNREADABLE not in state.claims[("default", "c")].raw
    assert ("default", "plain") not in state.broken_claims
