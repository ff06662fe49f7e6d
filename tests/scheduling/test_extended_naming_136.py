"""Request naming and request mappings of the extended-resource claim, as Kubernetes v1.36.3 has them.

Source: pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources_test.go,
v1.36.3, ``Test_createRequestsAndMappings_requests`` and ``Test_createRequestsAndMappings_mappings``
(code under test: ``createRequestsAndMappings`` in extendeddynamicresources.go). The extender's
counterpart is :func:`extender.scheduling.decide.extended.synthesize`; its requests become the in-memory
claim (:meth:`ExtendedResources.claim_for`) and its mappings are what
:func:`extender.scheduling.write.extended_writes.record_mappings` writes to
``pod.status.extendedResourceClaimStatus.requestMappings``. Everything runs in process.

How upstream's fixtures are read here:

- Pods: ``st.MakePod()`` named ``my-pod`` in ``default`` with UID ``1234``. Each ``Res`` appends a
  regular container ``con<len(containers)>``, each ``InitReq`` an init container
  ``init-con<len(initContainers)>``, each ``SidecarReq`` an init container
  ``sidecar-con<len(initContainers)>`` with ``restartPolicy: Always``. ``Resources`` sets the
  map as both requests and limits. A pod built without ``Res`` has no regular container at all.
- The class resolver: upstream's ``mockDeviceClassResolver`` is a fixed resource -> DeviceClass
  map. Here real DeviceClasses (``spec.extendedResourceName``) go through
  :func:`extended_resource_classes`; every case also checks that this resolver answers upstream's
  map for each resource of the case (a class also backs its implicit
  ``deviceclass.resource.kubernetes.io/<class>`` name, which is how upstream's
  ``devMapInit`` entry for ``deviceclass.resource.kubernetes.io/classInit`` comes about).
- ``extendedResources``: upstream passes resource -> amount, of which ``createRequestsAndMappings``
  reads only the names; the tables keep upstream's maps and hand their keys to ``synthesize``.
- Comparison: requests in the returned order (upstream: "should already be sorted") by name,
  class, allocation mode and count; mappings sorted by request name, then container name, as
  upstream sorts them, against upstream's list in its order.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.model.core import Pod, parse_pod
from extender.model.dra import parse_device_class
from extender.scheduling.decide import extended as er
from extender.scheduling.write.extended_writes import record_mappings
from tests.builders import container, device_class, pod

ER = "example.com/gpu"  # upstream's extendedResourceName
ER1 = ER + "1"
ER_INIT = ER + "init"
IMPLICIT_CLASS_INIT = er.IMPLICIT_PREFIX + "classInit"  # ResourceDeviceClassPrefix + "classInit"

POD_NAME, POD_UID = "my-pod", "1234"

# --- upstream's pod builder ---------------------------------------------------------------------

Step = tuple[str, dict[str, str]]


def res(amounts: dict[str, str]) -> Step:
    """``PodWrapper.Res``: a regular container."""
    return ("res", amounts)


def init_req(amounts: dict[str, str]) -> Step:
    """``PodWrapper.InitReq``: a plain init container."""
    return ("init", amounts)


def sidecar_req(amounts: dict[str, str]) -> Step:
    """``PodWrapper.SidecarReq``: an init container that keeps running."""
    return ("sidecar", amounts)


def _requests_and_limits(name: str, amounts: dict[str, str], *, sidecar: bool = False) -> dict[str, Any]:
    """``MakeContainer().Resources(m)``: ``m`` as requests and as limits."""
    c = container(name, dict(amounts), sidecar=sidecar)
    c["resources"]["limits"] = dict(c["resources"]["requests"])
    return c


def make_pod(*steps: Step) -> dict[str, Any]:
    """The raw pod ``st.MakePod().Name(podName).Namespace(namespace).UID(podUID)`` plus ``steps``."""
    regular: list[dict[str, Any]] = []
    inits: list[dict[str, Any]] = []
    for kind, amounts in steps:
        if kind == "res":
            regular.append(_requests_and_limits(f"con{len(regular)}", amounts))
        elif kind == "init":
            inits.append(_requests_and_limits(f"init-con{len(inits)}", amounts))
        else:
            inits.append(_requests_and_limits(f"sidecar-con{len(inits)}", amounts, sidecar=True))
    raw = pod(POD_NAME, uid=POD_UID, containers=regular or None, init_containers=inits or None)
    raw["spec"]["containers"] = regular  # the builder's default container is not upstream's
    return raw


# Upstream's pods (the same in both functions where the names match).
PODS: dict[str, dict[str, Any]] = {
    "pod1": make_pod(res({ER: "1", ER1: "2"})),
    "pod1InitImplicit": make_pod(init_req({ER_INIT: "1", IMPLICIT_CLASS_INIT: "2"})),
    "pod2": make_pod(res({ER: "1"}), res({ER1: "2"})),
    "podInit": make_pod(res({ER: "1"}), init_req({ER_INIT: "2"})),
    "podInit2": make_pod(res({ER: "1"}), init_req({ER_INIT: "1"}), init_req({ER_INIT: "2"})),
    "podInitImplicit": make_pod(
        res({ER: "1"}), init_req({ER_INIT: "1"}), init_req({IMPLICIT_CLASS_INIT: "2"})
    ),
    "podInit3": make_pod(
        res({ER: "1"}), init_req({ER_INIT: "1"}), sidecar_req({ER_INIT: "1"}), init_req({ER_INIT: "2"})
    ),
}

# --- upstream's extendedResources maps ---------------------------------------------------------

RES_ONE = {ER: 1}  # requests test: res
RES_TWO = {ER: 1, ER1: 2}  # requests test: res2; mappings test: res
RES_INIT = {ER: 1, ER_INIT: 2}  # resInit
RES_INIT_IMPLICIT = {ER: 1, ER_INIT: 2, IMPLICIT_CLASS_INIT: 2}  # resInitImplicit


# --- upstream's resolvers, as DeviceClass objects and as the map the mock answers from ----------


@dataclass(frozen=True)
class Resolver:
    """One ``mockDeviceClassResolver``: the DeviceClasses standing in for it, and its map."""

    classes: tuple[dict[str, Any], ...] = ()
    upstream: dict[str, str] = field(default_factory=dict)

    def resolve(self) -> dict[str, str]:
        parsed = [parse_device_class(o) for o in self.classes]
        return er.extended_resource_classes({c.name: c for c in parsed})


NO_RESOLVER = Resolver()  # the "nil" case passes no resolver at all
DEV_MAP = Resolver((device_class("class", extended_resource=ER),), {ER: "class"})
DEV_MAP2 = Resolver(
    (device_class("class", extended_resource=ER), device_class("class1", extended_resource=ER1)),
    {ER: "class", ER1: "class1"},
)
DEV_MAP_INIT = Resolver(
    (device_class("class", extended_resource=ER), device_class("classInit", extended_resource=ER_INIT)),
    {ER: "class", ER_INIT: "classInit", IMPLICIT_CLASS_INIT: "classInit"},
)


# --- the case tables -----------------------------------------------------------------------------

Request = tuple[str, str, int]  # (name, deviceClassName, count); allocationMode is ExactCount
Mapping = tuple[str, str, str]  # (containerName, resourceName, requestName)


@dataclass(frozen=True)
class Case:
    pod: str
    resources: dict[str, int]
    resolver: Resolver
    requests: tuple[Request, ...] = ()
    mappings: tuple[Mapping, ...] = ()


def rq(name: str, cls: str, count: int) -> Request:
    return (name, cls, count)


def mp(container_name: str, resource: str, request: str) -> Mapping:
    return (container_name, resource, request)


REQUEST_CASES: dict[str, Case] = {
    # v1.36.3 extendeddynamicresources_test.go Test_createRequestsAndMappings_requests/nil
    "nil": Case("pod1", {}, NO_RESOLVER),
    # v1.36.3 extendeddynamicresources_test.go Test_createRequestsAndMappings_requests/one resource match
    "one resource match": Case("pod1", RES_ONE, DEV_MAP, (rq("container-0-request-0", "class", 1),)),
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_requests/one resource match, one resource not match
    "one resource match, one resource not match": Case(
        "pod1", RES_TWO, DEV_MAP, (rq("container-0-request-0", "class", 1),)
    ),
    # v1.36.3 extendeddynamicresources_test.go Test_createRequestsAndMappings_requests/two resources match
    "two resources match": Case(
        "pod1",
        RES_TWO,
        DEV_MAP2,
        (rq("container-0-request-0", "class", 1), rq("container-0-request-1", "class1", 2)),
    ),
    # v1.36.3 extendeddynamicresources_test.go Test_createRequestsAndMappings_requests/two containers match
    "two containers match": Case(
        "pod2",
        RES_TWO,
        DEV_MAP2,
        (rq("container-0-request-0", "class", 1), rq("container-1-request-0", "class1", 2)),
    ),
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_requests/one init container, one regular container
    "one init container, one regular container": Case(
        "podInit",
        RES_INIT,
        DEV_MAP_INIT,
        (rq("container-0-request-0", "classInit", 2), rq("container-1-request-0", "class", 1)),
    ),
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_requests/two init containers, one regular container
    "two init containers, one regular container": Case(
        "podInit2",
        RES_INIT,
        DEV_MAP_INIT,
        (rq("container-1-request-0", "classInit", 2), rq("container-2-request-0", "class", 1)),
    ),
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_requests/three init containers, one sidecar, one regular container
    "three init containers, one sidecar, one regular container": Case(
        "podInit3",
        RES_INIT,
        DEV_MAP_INIT,
        (
            rq("container-1-request-0", "classInit", 1),
            rq("container-2-request-0", "classInit", 2),
            rq("container-3-request-0", "class", 1),
        ),
    ),
}

MAPPING_CASES: dict[str, Case] = {
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_mappings/one container, two requests
    "one container, two requests": Case(
        "pod1",
        RES_TWO,
        DEV_MAP2,
        mappings=(mp("con0", ER, "container-0-request-0"), mp("con0", ER1, "container-0-request-1")),
    ),
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_mappings/one container, one explicit and one implicit request
    "one container, one explicit and one implicit request": Case(
        "pod1InitImplicit",
        RES_INIT_IMPLICIT,
        DEV_MAP_INIT,
        mappings=(
            mp("init-con0", IMPLICIT_CLASS_INIT, "container-0-request-0"),
            mp("init-con0", ER_INIT, "container-0-request-1"),
        ),
    ),
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_mappings/two containers, two requests
    "two containers, two requests": Case(
        "pod2",
        RES_TWO,
        DEV_MAP2,
        mappings=(mp("con0", ER, "container-0-request-0"), mp("con1", ER1, "container-1-request-0")),
    ),
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_mappings/one init container, one regular container, one request
    "one init container, one regular container, one request": Case(
        "podInit",
        RES_INIT,
        DEV_MAP_INIT,
        mappings=(
            mp("init-con0", ER_INIT, "container-0-request-0"),
            mp("con0", ER, "container-1-request-0"),
        ),
    ),
    # v1.36.3 extendeddynamicresources_test.go
    # Test_createRequestsAndMappings_mappings/three containers (two are init container), two requests
    "three containers (two are init container), two requests": Case(
        "podInit2",
        RES_INIT,
        DEV_MAP_INIT,
        mappings=(
            mp("init-con0", ER_INIT, "container-1-request-0"),
            mp("init-con1", ER_INIT, "container-1-request-0"),
            mp("con0", ER, "container-2-request-0"),
        ),
    ),
    # v1.36.3 extendeddynamicresources_test.go Test_createRequestsAndMappings_mappings/
    # three containers (two are init container), both explicit and implicit resources
    "three containers (two are init container), both explicit and implicit resources": Case(
        "podInitImplicit",
        RES_INIT_IMPLICIT,
        DEV_MAP_INIT,
        mappings=(
            mp("init-con0", ER_INIT, "container-0-request-0"),
            mp("init-con1", IMPLICIT_CLASS_INIT, "container-1-request-0"),
            mp("con0", ER, "container-2-request-0"),
        ),
    ),
    # v1.36.3 extendeddynamicresources_test.go Test_createRequestsAndMappings_mappings/
    # four containers (two are init container, one sidecar), three requests
    "four containers (two are init container, one sidecar), three requests": Case(
        "podInit3",
        RES_INIT,
        DEV_MAP_INIT,
        mappings=(
            mp("init-con0", ER_INIT, "container-1-request-0"),
            mp("sidecar-con1", ER_INIT, "container-1-request-0"),
            mp("init-con2", ER_INIT, "container-2-request-0"),
            mp("con0", ER, "container-3-request-0"),
        ),
    ),
}

#: Upstream cases the extender's functions cannot express (upstream name -> reason). None so far.
NOT_EXPRESSIBLE: dict[str, str] = {}

#: Every case of the two upstream functions in v1.36.3, in source order.
UPSTREAM_NAMES: dict[str, tuple[str, ...]] = {
    "Test_createRequestsAndMappings_requests": (
        "nil",
        "one resource match",
        "one resource match, one resource not match",
        "two resources match",
        "two containers match",
        "one init container, one regular container",
        "two init containers, one regular container",
        "three init containers, one sidecar, one regular container",
    ),
    "Test_createRequestsAndMappings_mappings": (
        "one container, two requests",
        "one container, one explicit and one implicit request",
        "two containers, two requests",
        "one init container, one regular container, one request",
        "three containers (two are init container), two requests",
        "three containers (two are init container), both explicit and implicit resources",
        "four containers (two are init container, one sidecar), three requests",
    ),
}


# --- helpers --------------------------------------------------------------------------------------


def parsed(case: Case) -> Pod:
    return parse_pod(PODS[case.pod])


def resolved(case: Case) -> dict[str, str]:
    """The extender's resolver for the case, checked against upstream's mock on the case's resources."""
    classes = case.resolver.resolve()
    assert {r: classes.get(r) for r in case.resources} == {
        r: case.resolver.upstream.get(r) for r in case.resources
    }, "the DeviceClasses do not resolve as upstream's mockDeviceClassResolver does"
    return classes


def request_tuples(requests: list[dict[str, Any]]) -> list[tuple[str, str, str, int]]:
    return [
        (r["name"], r["exactly"]["deviceClassName"], r["exactly"]["allocationMode"], r["exactly"]["count"])
        for r in requests
    ]


def expected_requests(case: Case) -> list[tuple[str, str, str, int]]:
    return [(name, cls, "ExactCount", count) for name, cls, count in case.requests]


def sorted_mappings(mappings: list[dict[str, str]]) -> list[Mapping]:
    """Upstream's order: by request name, then container name."""
    ordered = sorted(mappings, key=lambda x: (x["requestName"], x["containerName"]))
    return [(x["containerName"], x["resourceName"], x["requestName"]) for x in ordered]


# --- tests ----------------------------------------------------------------------------------------


def test_every_upstream_case_is_translated_or_explained() -> None:
    tables = {
        "Test_createRequestsAndMappings_requests": REQUEST_CASES,
        "Test_createRequestsAndMappings_mappings": MAPPING_CASES,
    }
    for func, names in UPSTREAM_NAMES.items():
        covered = set(tables[func]) | set(NOT_EXPRESSIBLE)
        assert set(names) <= covered, f"{func}: untranslated {sorted(set(names) - covered)}"
        assert set(tables[func]) <= set(names), f"{func}: cases upstream does not have"
    assert not set(REQUEST_CASES) & set(NOT_EXPRESSIBLE)
    assert not set(MAPPING_CASES) & set(NOT_EXPRESSIBLE)
    assert sum(len(n) for n in UPSTREAM_NAMES.values()) == 15


def test_pods_are_built_as_upstreams_pod_wrapper_builds_them() -> None:
    p = parse_pod(PODS["podInit3"])
    assert [(c.name, c.init, c.sidecar) for c in p.containers] == [
        ("init-con0", True, False),
        ("sidecar-con1", True, True),
        ("init-con2", True, False),
        ("con0", False, False),
    ]
    assert [c.name for c in parse_pod(PODS["pod1InitImplicit"]).containers] == ["init-con0"]
    assert (p.name, p.namespace, p.uid) == (POD_NAME, "default", POD_UID)


@pytest.mark.parametrize("case", REQUEST_CASES.values(), ids=REQUEST_CASES.keys())
def test_requests(case: Case) -> None:
    """Test_createRequestsAndMappings_requests: the claim's requests, sorted by name."""
    requests, _ = er.synthesize(parsed(case), case.resources, resolved(case))
    assert request_tuples(requests) == expected_requests(case)


@pytest.mark.parametrize("case", REQUEST_CASES.values(), ids=REQUEST_CASES.keys())
def test_requests_of_the_in_memory_claim(case: Case) -> None:
    """The same requests as the extender allocates them: PreFilter's claim for those resources."""
    found = er.prefilter(parsed(case), resolved(case), {})
    if found is None:  # no class backs anything the pod requests: no claim, no requests
        assert case.requests == ()
        return
    claim = found.claim_for(frozenset(case.resources)).claim
    got = []
    for r in claim.spec.requests:
        assert r.exactly is not None
        got.append((r.name, r.exactly.device_class_name, r.exactly.allocation_mode, r.exactly.count))
    assert got == expected_requests(case)


@pytest.mark.parametrize("case", MAPPING_CASES.values(), ids=MAPPING_CASES.keys())
def test_mappings(case: Case) -> None:
    """Test_createRequestsAndMappings_mappings: container -> request mappings."""
    _, mappings = er.synthesize(parsed(case), case.resources, resolved(case))
    assert sorted_mappings(mappings) == list(case.mappings)


@pytest.mark.parametrize("case", MAPPING_CASES.values(), ids=MAPPING_CASES.keys())
def test_mappings_recorded_in_the_pod_status(case: Case) -> None:
    """The mappings as they land in ``status.extendedResourceClaimStatus.requestMappings``."""
    p = parsed(case)
    found = er.prefilter(p, resolved(case), {})
    assert found is not None
    node_claim = found.claim_for(frozenset(case.resources))
    store = MemoryStore()
    store.load([PODS[case.pod]])
    asyncio.run(record_mappings(MemoryAPI(store), p, "my-pod-extended-resources-x", node_claim.mappings))
    status = store.get("Pod", "default", POD_NAME)["status"]["extendedResourceClaimStatus"]
    assert status["resourceClaimName"] == "my-pod-extended-resources-x"
    assert sorted_mappings(status["requestMappings"]) == list(case.mappings)
