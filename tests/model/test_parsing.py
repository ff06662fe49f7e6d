"""Reading raw API objects into records: v1 and older versions, and clear errors for bad input."""

from __future__ import annotations

import re
from typing import Any

import pytest

from extender.model.core import parse_pod
from extender.model.dra import parse_resource_claim, parse_resource_slice
from extender.model.errors import ObjectError
from extender.model.nodeselector import node_name_selector, parse_node_selector
from extender.model.reader import Reader
from tests.builders import claim, device, exact, pod, resource_slice


def test_v1beta1_slice_devices_are_flattened() -> None:
    raw = resource_slice(
        "s",
        [
            {
                "name": "d",
                "basic": {"attributes": {"model": {"string": "a"}}, "capacity": {"mem": {"value": "1Gi"}}},
            }
        ],
    )
    raw["apiVersion"] = "resource.k8s.io/v1beta1"
    parsed = parse_resource_slice(raw)
    assert parsed.devices[0].attributes == {"model": ("string", "a")}
    assert parsed.devices[0].capacity["mem"].value.value == 2**30


def test_v1beta1_claim_requests_move_under_exactly() -> None:
    raw = claim(requests=[{"name": "r", "deviceClassName": "c", "count": 2, "allocationMode": "ExactCount"}])
    raw["apiVersion"] = "resource.k8s.io/v1beta1"
    request = parse_resource_claim(raw).spec.requests[0]
    assert (
        request.exactly is not None
        and request.exactly.device_class_name == "c"
        and request.exactly.count == 2
    )


def test_v1beta1_claim_requests_keep_their_derived_attributes() -> None:
    derived = [{"name": "derived/x", "expression": "1"}]
    raw = claim(requests=[{"name": "r", "deviceClassName": "c", "derivedAttributes": derived}])
    raw["apiVersion"] = "resource.k8s.io/v1beta1"
    request = parse_resource_claim(raw).spec.requests[0]
    assert request.exactly is not None and request.exactly.derived_attributes == (("derived/x", "1"),)


def test_v1beta2_is_read_like_v1() -> None:
    raw = claim(requests=[exact("r", "c")])
    raw["apiVersion"] = "resource.k8s.io/v1beta2"
    assert parse_resource_claim(raw).spec.requests[0].exactly.device_class_name == "c"  # type: ignore[union-attr]


def test_defaults() -> None:
    request = parse_resource_claim(
        claim(requests=[{"name": "r", "exactly": {"deviceClassName": "c"}}])
    ).spec.requests[0]
    assert request.exactly is not None
    assert (request.exactly.allocation_mode, request.exactly.count, request.exactly.admin_access) == (
        "ExactCount",
        1,
        None,
    )
    assert request.exactly.capacity_requests is None


def test_a_request_with_neither_field_has_no_exactly_part() -> None:
    # kube-scheduler's PreFilter tells this apart ("unknown request type"), so the model does too.
    request = parse_resource_claim(claim(requests=[{"name": "r"}])).spec.requests[0]
    assert request.exactly is None and request.first_available == ()


BAD_SLICES = [
    (
        "count-not-int",
        {"pool": {"name": "p", "generation": "one"}},
        "spec.pool.generation: expected an integer",
    ),
    ("devices-not-list", {"devices": {"name": "d"}}, "spec.devices: expected a list"),
    (
        "bad-quantity",
        {"devices": [device("d", capacity={"mem": "lots"})]},
        "spec.devices[0].capacity.mem.value: invalid quantity 'lots'",
    ),
    ("missing-pool", {"pool": None}, "spec.driver and spec.pool.name are required"),
    # kube-apiserver refuses these; a state file may hold them (a version that is a number
    # made CEL's conversion raise TypeError in every filter that looked at the device).
    *(
        (
            f"{kind}-as-{type(value).__name__}",
            {"devices": [device("d", attributes={"a": {kind: value}})]},
            message,
        )
        for kind, value, message in [
            ("version", 5, "spec.devices[0].attributes.a.version: expected a string"),
            ("string", 1, "spec.devices[0].attributes.a.string: expected a string"),
            ("int", True, "spec.devices[0].attributes.a.int: expected a 64-bit integer"),
            ("int", 1.5, "spec.devices[0].attributes.a.int: expected a 64-bit integer"),
            ("int", 2**63, "spec.devices[0].attributes.a.int: expected a 64-bit integer"),
            ("bool", 0, "spec.devices[0].attributes.a.bool: expected a boolean"),
            ("ints", [1, "2"], "spec.devices[0].attributes.a.ints: expected a list of 64-bit integers"),
            ("versions", "1.0.0", "spec.devices[0].attributes.a.versions: expected a list of strings"),
        ]
    ),
]


@pytest.mark.parametrize(("name", "spec", "message"), BAD_SLICES, ids=[b[0] for b in BAD_SLICES])
def test_malformed_slices_say_which_field(name: str, spec: dict[str, object], message: str) -> None:
    raw = resource_slice("s", [])
    raw["spec"].update(spec)
    with pytest.raises(ObjectError, match=re.escape(message)):
        parse_resource_slice(raw)


def test_node_selector_matching() -> None:
    selector = parse_node_selector(
        Reader(
            {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["a"]},
                            {"key": "gpu", "operator": "Exists"},
                        ]
                    },
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]},
                ]
            }
        )
    )
    assert selector.matches("n", {"zone": "a", "gpu": "yes"})
    assert not selector.matches("n", {"zone": "a"})
    assert selector.matches("special", {})
    empty_term = parse_node_selector(Reader({"nodeSelectorTerms": [{}]}))
    assert not empty_term.matches("n", {})


def test_gt_lt_operators() -> None:
    selector = parse_node_selector(
        Reader(
            {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}]}
        )
    )
    assert (
        selector.matches("n", {"gen": "4"})
        and not selector.matches("n", {"gen": "3"})
        and not selector.matches("n", {"gen": "x"})
    )


def _one_name(**requirement: object) -> dict[str, object]:
    fields = {"key": "metadata.name", "operator": "In", "values": ["node-7"], **requirement}
    return {"nodeSelectorTerms": [{"matchFields": [fields]}]}


#: Selectors near a node-local allocation's (one node by name): each reads as its general form
#: does (the same selector with an empty matchExpressions, which takes the general path).
ONE_NODE_LOOKALIKES = {
    "node-local allocation": _one_name(),
    "two names": _one_name(values=["node-7", "node-8"]),
    "NotIn": _one_name(operator="NotIn"),
    "another field": _one_name(key="metadata.namespace"),
    "no values": _one_name(values=[]),
    "an extra key": _one_name(extra="x"),
    "empty name": _one_name(values=[""]),
}


@pytest.mark.parametrize("raw", ONE_NODE_LOOKALIKES.values(), ids=ONE_NODE_LOOKALIKES.keys())
def test_a_one_node_selector_reads_as_the_general_reading_does(raw: dict[str, Any]) -> None:
    general = {"nodeSelectorTerms": [{**raw["nodeSelectorTerms"][0], "matchExpressions": []}]}
    assert parse_node_selector(Reader(raw)) == parse_node_selector(Reader(general))


def test_a_node_local_allocation_selects_its_node_only() -> None:
    selector = parse_node_selector(Reader(_one_name()))
    assert selector == node_name_selector("node-7") and selector.error is None
    assert selector.matches("node-7", {}) and not selector.matches("node-8", {})
    bad = parse_node_selector(Reader(_one_name(values=["node-7", "node-8"])))
    assert bad.error is not None and "must have one element" in bad.error
    with pytest.raises(ObjectError, match="values"):
        parse_node_selector(Reader(_one_name(values=[7])))


def test_a_reread_claim_reuses_what_did_not_change() -> None:
    from extender.model.dra import parse_resource_claim
    from tests.builders import allocated, claim

    first = parse_resource_claim(claim("c", allocation=allocated(("driver-a", "pool-1", "d0")), uid="u1"))
    reserved = claim("c", allocation=allocated(("driver-a", "pool-1", "d0")), uid="u1")
    reserved["status"]["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "up"}]
    again = parse_resource_claim(reserved, first)
    assert again.spec is first.spec and again.allocation is first.allocation
    assert again.reserved_for == ({"resource": "pods", "name": "p", "uid": "up"},)
    moved = parse_resource_claim(
        claim("c", allocation=allocated(("driver-a", "pool-1", "d1")), uid="u1"), first
    )
    assert moved.allocation is not first.allocation and moved.allocation is not None
    assert [d.id.device for d in moved.allocation.devices] == ["d1"]
    replaced = parse_resource_claim(
        claim("c", allocation=allocated(("driver-a", "pool-1", "d0")), uid="u2"), first
    )
    assert replaced.allocation is not first.allocation  # another object of that name: parsed afresh


def test_the_answer_to_a_status_write_reuses_the_allocation_it_sent() -> None:
    from extender.model.dra import parse_allocation, parse_resource_claim
    from extender.model.reader import Reader
    from tests.builders import allocated, claim

    sent = parse_allocation(Reader(allocated(("driver-a", "pool-1", "d0")), "allocation"))
    answer = claim("c", allocation=allocated(("driver-a", "pool-1", "d0")), uid="u1")
    assert parse_resource_claim(answer, None, sent).allocation is sent
    other = claim("c", allocation=allocated(("driver-a", "pool-1", "d1")), uid="u1")
    parsed = parse_resource_claim(other, None, sent).allocation
    assert parsed is not sent and parsed is not None and [d.id.device for d in parsed.devices] == ["d1"]


POD_PRIORITIES = {
    "no priority class": ({}, 0, "PreemptLowerPriority"),
    "from the priority class": ({"priority": 1000, "preemptionPolicy": "Never"}, 1000, "Never"),
    "negative": ({"priority": -5}, -5, "PreemptLowerPriority"),
}


@pytest.mark.parametrize(("spec", "priority", "policy"), POD_PRIORITIES.values(), ids=POD_PRIORITIES.keys())
def test_pod_priority_and_preemption_policy(spec: dict[str, object], priority: int, policy: str) -> None:
    raw = pod("p")
    raw["spec"].update(spec)
    parsed = parse_pod(raw)
    assert (parsed.priority, parsed.preemption_policy) == (priority, policy)


def test_a_pod_priority_that_is_not_an_integer_is_a_clear_error() -> None:
    raw = pod("p")
    raw["spec"]["priority"] = "high"
    with pytest.raises(ObjectError, match=r"spec.priority: expected an integer, got str"):
        parse_pod(raw)


POD_PREEMPTION_FIELDS = {
    "a plain pending pod": ({}, {}, ({}, "", False, False, None)),
    "labelled, nominated": (
        {"labels": {"app": "a"}},
        {"nominatedNodeName": "node-1"},
        ({"app": "a"}, "node-1", False, False, None),
    ),
    "terminating, started": (
        {"deletionTimestamp": "2026-11-24T00:00:00Z"},
        {"phase": "Running", "startTime": "2026-11-24T00:00:01Z"},
        ({}, "", True, False, 1795478401.0),
    ),
    "succeeded": ({}, {"phase": "Succeeded"}, ({}, "", False, True, None)),
    "failed": ({}, {"phase": "Failed"}, ({}, "", False, True, None)),
}


@pytest.mark.parametrize(
    ("meta", "status", "fields"), POD_PREEMPTION_FIELDS.values(), ids=POD_PREEMPTION_FIELDS.keys()
)
def test_pod_fields_preemption_reads(
    meta: dict[str, object], status: dict[str, object], fields: tuple[object, ...]
) -> None:
    raw = pod("p")
    raw["metadata"].update(meta)
    raw["status"] = status
    parsed = parse_pod(raw)
    assert (
        parsed.labels,
        parsed.nominated_node_name,
        parsed.deleting,
        parsed.terminal,
        parsed.start_time,
    ) == fields
