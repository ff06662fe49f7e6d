"""DRA-backed extended resources: names, the class resolver, PodRequests, request synthesis, Filter.

The synthesis tables are upstream's ``Test_createRequestsAndMappings`` and
``Test_createRequestsAndMappings_mappings`` (extendeddynamicresources_test.go, 1.37), with
upstream's pod builder names: ``Res`` -> ``con<i>``, ``InitReq`` -> ``init-con<i>``,
``SidecarReq`` -> ``sidecar-con<i>``.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.model.core import parse_node, parse_pod
from extender.model.dra import parse_device_class, parse_resource_claim
from extender.model.requests import pod_requests
from extender.scheduling.decide import extended as er
from tests.builders import container, device_class, node, pod, with_allocatable

ER = "example.com/gpu"
ER1, ER_INIT = ER + "1", ER + "init"
IMPLICIT_INIT = "deviceclass.resource.kubernetes.io/classInit"


@pytest.mark.parametrize(
    ("name", "dra"),
    [
        ("example.com/gpu", True),
        ("nvidia.com/gpu", True),
        ("deviceclass.resource.kubernetes.io/gpu-class", True),
        ("cpu", False),
        ("memory", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/something", False),
        ("foo.kubernetes.io/x", False),
        ("requests.example.com/gpu", False),
        ("example.com/-bad", False),
    ],
)
def test_is_dra_extended_resource_name(name: str, dra: bool) -> None:
    assert er.is_dra_extended_resource_name(name) is dra


def classes(*objs: dict[str, Any]) -> dict[str, Any]:
    parsed = [parse_device_class(o) for o in objs]
    return {c.name: c for c in parsed}


CLASS_CONFLICTS = {
    "implicit names always map": (
        [device_class("a"), device_class("b")],
        {"deviceclass.resource.kubernetes.io/a": "a", "deviceclass.resource.kubernetes.io/b": "b"},
    ),
    "the newest class naming a resource wins": (
        [
            device_class("old", extended_resource=ER, created="2026-01-01T00:00:00Z"),
            device_class("new", extended_resource=ER, created="2026-02-01T00:00:00Z"),
        ],
        {ER: "new"},
    ),
    "on equal timestamps the lower name wins": (
        [
            device_class("zeta", extended_resource=ER, created="2026-01-01T00:00:00Z"),
            device_class("alpha", extended_resource=ER, created="2026-01-01T00:00:00Z"),
        ],
        {ER: "alpha"},
    ),
    "the loser still backs its implicit name": (
        [
            device_class("old", extended_resource=ER, created="2026-01-01T00:00:00Z"),
            device_class("new", extended_resource=ER, created="2026-02-01T00:00:00Z"),
        ],
        {"deviceclass.resource.kubernetes.io/old": "old"},
    ),
}


@pytest.mark.parametrize(("objs", "expected"), CLASS_CONFLICTS.values(), ids=CLASS_CONFLICTS.keys())
def test_extended_resource_classes(objs: list[dict[str, Any]], expected: dict[str, str]) -> None:
    mapping = er.extended_resource_classes(classes(*objs))
    assert {k: mapping.get(k) for k in expected} == expected


def test_pod_requests_follow_the_init_and_sidecar_rules() -> None:
    p = parse_pod(
        pod(
            containers=[container("a", {ER: 1}), container("b", {ER: 2})],
            init_containers=[
                container("i0", {ER: 5}),  # alone: 5
                container("s1", {ER: 1}, sidecar=True),  # sidecar: runs with the rest
                container("i2", {ER: 4}),  # with the sidecar: 5
            ],
        )
    )
    # max(regular 3 + sidecar 1, init peaks 5 and 4 + 1) = 5
    assert pod_requests(p)[ER] == 5


def test_limits_default_the_requests() -> None:
    raw = pod(containers=[{"name": "c", "resources": {"limits": {ER: "2"}}}])
    assert pod_requests(parse_pod(raw)) == {ER: 2}


# Upstream's pods (st.MakePod): the containers, in initContainers ++ containers order.
PODS: dict[str, dict[str, Any]] = {
    "pod1": pod(containers=[container("con0", {ER: 1, ER1: 2})]),
    "pod1InitImplicit": pod(init_containers=[container("init-con0", {ER_INIT: 1, IMPLICIT_INIT: 2})]),
    "pod2": pod(containers=[container("con0", {ER: 1}), container("con1", {ER1: 2})]),
    "podInit": pod(
        containers=[container("con0", {ER: 1})], init_containers=[container("init-con0", {ER_INIT: 2})]
    ),
    "podInit2": pod(
        containers=[container("con0", {ER: 1})],
        init_containers=[container("init-con0", {ER_INIT: 1}), container("init-con1", {ER_INIT: 2})],
    ),
    "podInitImplicit": pod(
        containers=[container("con0", {ER: 1})],
        init_containers=[container("init-con0", {ER_INIT: 1}), container("init-con1", {IMPLICIT_INIT: 2})],
    ),
    "podInit3": pod(
        containers=[container("con0", {ER: 1})],
        init_containers=[
            container("init-con0", {ER_INIT: 1}),
            container("sidecar-con1", {ER_INIT: 1}, sidecar=True),
            container("init-con2", {ER_INIT: 2}),
        ],
    ),
}
DEV_MAP = {ER: "class"}
DEV_MAP2 = {ER: "class", ER1: "class1"}
DEV_MAP_INIT = {ER: "class", ER_INIT: "classInit", IMPLICIT_INIT: "classInit"}


def req(name: str, cls: str, count: int) -> tuple[str, str, int]:
    return (name, cls, count)


# Test_createRequestsAndMappings: (pod, resources going through DRA, classes) -> requests.
REQUESTS = {
    "nil": ("pod1", [], {}, []),
    "one resource match": ("pod1", [ER], DEV_MAP, [req("container-0-request-0", "class", 1)]),
    "one resource match, one resource not match": (
        "pod1",
        [ER, ER1],
        DEV_MAP,
        [req("container-0-request-0", "class", 1)],
    ),
    "two resources match": (
        "pod1",
        [ER, ER1],
        DEV_MAP2,
        [req("container-0-request-0", "class", 1), req("container-0-request-1", "class1", 2)],
    ),
    "two containers match": (
        "pod2",
        [ER, ER1],
        DEV_MAP2,
        [req("container-0-request-0", "class", 1), req("container-1-request-0", "class1", 2)],
    ),
    "one init container, one regular container": (
        "podInit",
        [ER, ER_INIT],
        DEV_MAP_INIT,
        [req("container-0-request-0", "classInit", 2), req("container-1-request-0", "class", 1)],
    ),
    "two init containers, one regular container": (
        "podInit2",
        [ER, ER_INIT],
        DEV_MAP_INIT,
        [req("container-1-request-0", "classInit", 2), req("container-2-request-0", "class", 1)],
    ),
    "three init containers, one sidecar, one regular container": (
        "podInit3",
        [ER, ER_INIT],
        DEV_MAP_INIT,
        [
            req("container-1-request-0", "classInit", 1),
            req("container-2-request-0", "classInit", 2),
            req("container-3-request-0", "class", 1),
        ],
    ),
}


@pytest.mark.parametrize(
    ("pod_name", "resources", "mapping", "expected"), REQUESTS.values(), ids=REQUESTS.keys()
)
def test_synthesized_requests(
    pod_name: str, resources: list[str], mapping: dict[str, str], expected: list[tuple[str, str, int]]
) -> None:
    requests, _ = er.synthesize(parse_pod(PODS[pod_name]), resources, mapping)
    got = [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"]) for r in requests]
    assert got == expected
    assert all(r["exactly"]["allocationMode"] == "ExactCount" for r in requests)


def m(container_name: str, resource: str, request: str) -> tuple[str, str, str]:
    return (request, container_name, resource)


# Test_createRequestsAndMappings_mappings (compared sorted by request, then container, as upstream).
MAPPINGS = {
    "one container, two requests": (
        "pod1",
        [ER, ER1],
        {ER: "class", ER1: "class1"},
        [m("con0", ER, "container-0-request-0"), m("con0", ER1, "container-0-request-1")],
    ),
    "one container, one explicit and one implicit request": (
        "pod1InitImplicit",
        [ER, ER_INIT, IMPLICIT_INIT],
        DEV_MAP_INIT,
        [
            m("init-con0", IMPLICIT_INIT, "container-0-request-0"),
            m("init-con0", ER_INIT, "container-0-request-1"),
        ],
    ),
    "two containers, two requests": (
        "pod2",
        [ER, ER1],
        {ER: "class", ER1: "class1"},
        [m("con0", ER, "container-0-request-0"), m("con1", ER1, "container-1-request-0")],
    ),
    "one init container, one regular container, one request": (
        "podInit",
        [ER, ER_INIT],
        DEV_MAP_INIT,
        [m("init-con0", ER_INIT, "container-0-request-0"), m("con0", ER, "container-1-request-0")],
    ),
    "three containers (two are init container), two requests": (
        "podInit2",
        [ER, ER_INIT],
        DEV_MAP_INIT,
        [
            m("init-con0", ER_INIT, "container-1-request-0"),
            m("init-con1", ER_INIT, "container-1-request-0"),
            m("con0", ER, "container-2-request-0"),
        ],
    ),
    "three containers (two are init container), both explicit and implicit resources": (
        "podInitImplicit",
        [ER, ER_INIT, IMPLICIT_INIT],
        DEV_MAP_INIT,
        [
            m("init-con0", ER_INIT, "container-0-request-0"),
            m("init-con1", IMPLICIT_INIT, "container-1-request-0"),
            m("con0", ER, "container-2-request-0"),
        ],
    ),
    "four containers (two are init container, one sidecar), three requests": (
        "podInit3",
        [ER, ER_INIT],
        DEV_MAP_INIT,
        [
            m("init-con0", ER_INIT, "container-1-request-0"),
            m("sidecar-con1", ER_INIT, "container-1-request-0"),
            m("init-con2", ER_INIT, "container-2-request-0"),
            m("con0", ER, "container-3-request-0"),
        ],
    ),
}


@pytest.mark.parametrize(
    ("pod_name", "resources", "mapping", "expected"), MAPPINGS.values(), ids=MAPPINGS.keys()
)
def test_synthesized_mappings(
    pod_name: str, resources: list[str], mapping: dict[str, str], expected: list[tuple[str, str, str]]
) -> None:
    _, mappings = er.synthesize(parse_pod(PODS[pod_name]), resources, mapping)
    got = sorted((x["requestName"], x["containerName"], x["resourceName"]) for x in mappings)
    assert got == sorted(expected)


def test_the_claim_looks_like_upstreams() -> None:
    p = parse_pod(pod("web-0", containers=[container("c", {ER: 2})], uid="uid-web-0"))
    obj = er.claim_object(p, [{"name": "container-0-request-0"}])
    meta = obj["metadata"]
    assert meta["name"] == "<extended-resources>" and meta["generateName"] == "web-0-extended-resources-"
    assert meta["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": "uid-web-0", "controller": True}
    ]
    assert er.is_extended_claim_of(parse_resource_claim(obj), p)


def test_created_names_are_generated_names_derived_from_the_pod_uid() -> None:
    a = parse_pod(pod("web-0", uid="uid-1"))
    b = parse_pod(pod("web-0", uid="uid-2"))
    assert er.claim_name(a) == er.claim_name(a) != er.claim_name(b)
    assert er.claim_name(a).startswith("web-0-extended-resources-") and len(er.claim_name(a)) == 30
    long = parse_pod(pod("x" * 70, uid="uid-1"))
    assert len(er.claim_name(long)) == 63  # names.SimpleNameGenerator: base cut to 58


def resources_of(
    p: dict[str, Any], n: dict[str, Any], mapping: dict[str, str]
) -> tuple[str | None, list[str] | None]:
    found = er.prefilter(parse_pod(p), mapping, {})
    assert found is not None
    reason, plan = found.for_node(parse_node(n))
    return reason, None if plan is None else sorted(plan.resources)


FILTER = {
    "not advertised, backed by a class: DRA": (
        pod(containers=[container("c", {ER: 1})]),
        node("n"),
        {ER: "gpu"},
        (None, [ER]),
    ),
    "advertised by a device plugin: left to it": (
        pod(containers=[container("c", {ER: 1})]),
        with_allocatable(node("n"), {ER: 4}),
        {ER: "gpu"},
        (None, None),
    ),
    "advertised as 0: DRA": (
        pod(containers=[container("c", {ER: 1})]),
        with_allocatable(node("n"), {ER: 0}),
        {ER: "gpu"},
        (None, [ER]),
    ),
    "one through DRA, one through a device plugin": (
        pod(containers=[container("c", {ER: 1, ER1: 1})]),
        with_allocatable(node("n"), {ER1: 2}),
        {ER: "gpu", ER1: "gpu1"},
        (None, [ER]),
    ),
    "neither advertised nor backed: cannot fit": (
        pod(containers=[container("c", {ER: 1, ER1: 1})]),
        node("n"),
        {ER: "gpu"},
        (
            "cannot fit resource: example.com/gpu1 (the node does not offer it and no DeviceClass backs it)",
            None,
        ),
    ),
}


@pytest.mark.parametrize(("p", "n", "mapping", "expected"), FILTER.values(), ids=FILTER.keys())
def test_filter_splits_resources_between_dra_and_device_plugins(
    p: dict[str, Any], n: dict[str, Any], mapping: dict[str, str], expected: tuple[Any, Any]
) -> None:
    assert resources_of(p, n, mapping) == expected


def test_prefilter_ignores_pods_without_backed_resources() -> None:
    assert er.prefilter(parse_pod(pod(containers=[container("c", {"cpu": 1, ER: 1})])), {}, {}) is None
    assert er.prefilter(parse_pod(pod(containers=[container("c", {ER: 0})])), {ER: "gpu"}, {}) is None


def test_an_earlier_attempts_claim_is_found_and_rejected() -> None:
    p = parse_pod(pod("p", containers=[container("c", {ER: 1})], uid="uid-p"))
    leftover = parse_resource_claim(er.claim_object(p, [], name=er.claim_name(p)))
    foreign = parse_resource_claim(
        er.claim_object(parse_pod(pod("q", uid="uid-q")), [], name="q-extended-resources-x")
    )
    found = er.prefilter(p, {ER: "gpu"}, er.claims_by_owner([foreign, leftover]))
    assert found is not None and found.existing is leftover
    assert found.for_node(parse_node(node("n"))) == ("cannot schedule extended resource claim", None)
