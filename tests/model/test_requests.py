"""resourcehelper.PodRequests as the extender computes it (v1.36.3 component-helpers/resource
helpers.go): one case per rule, each with the amounts upstream's formula gives."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from extender.model.core import parse_pod
from extender.model.requests import pod_requests
from tests.builders import container, pod


def with_status(p: dict[str, Any], **status: Any) -> dict[str, Any]:
    p["status"] = status
    return p


def resized(
    requests: str, actuated: str | None, allocated: str | None, infeasible: bool = False
) -> dict[str, Any]:
    """One container asking ``requests`` cpu, its status saying what runs and what is allocated."""
    p = pod("p", containers=[container("c", {"cpu": requests})])
    cs: dict[str, Any] = {"name": "c", "resources": {"requests": {"cpu": actuated}} if actuated else {}}
    if allocated:
        cs["allocatedResources"] = {"cpu": allocated}
    status: dict[str, Any] = {"containerStatuses": [cs]}
    if infeasible:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]
    return with_status(p, **status)


def cpu(raw: dict[str, Any], **options: Any) -> Fraction:
    return pod_requests(parse_pod(raw), **options).get("cpu", Fraction(0))


SIDECAR_POD = pod(
    "p",
    containers=[container("main", {"cpu": "1"})],
    init_containers=[
        container("side", {"cpu": "500m"}, sidecar=True),
        container("setup", {"cpu": "2"}),
    ],
)

#: name -> (pod, options, cpu)
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], Fraction]] = {
    # containers 1 + sidecar 0.5 = 1.5; the init container runs with the sidecar: 2 + 0.5 = 2.5
    "init containers take the maximum, with the sidecars started before them": (
        SIDECAR_POD,
        {},
        Fraction(5, 2),
    ),
    "a resize: the largest of spec, actuated and allocated": (
        resized("1", "3", "2"),
        {"use_status": True},
        Fraction(3),
    ),
    "a resize is not read without use_status": (resized("1", "3", "2"), {}, Fraction(1)),
    "an infeasible resize: actuated and allocated only": (
        resized("4", "1", "2", infeasible=True),
        {"use_status": True},
        Fraction(2),
    ),
}


@pytest.mark.parametrize("row", CASES.values(), ids=CASES.keys())
def test_cpu(row: tuple[dict[str, Any], dict[str, Any], Fraction]) -> None:
    raw, options, expected = row
    assert cpu(raw, **options) == expected


def test_overhead_comes_on_top() -> None:
    raw = pod("p", containers=[container("c", {"cpu": "1"})])
    raw["spec"]["overhead"] = {"cpu": "250m"}
    assert cpu(raw) == Fraction(5, 4)


def test_node_allocatable_statuses_add_to_the_containers_and_pod_level_requests_replace_both() -> None:
    raw = pod("p", containers=[container("c", {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi"})])
    raw["status"] = {
        "nodeAllocatableResourceClaimStatuses": [
            {"resourceClaimName": "x", "containers": ["c"], "resources": {"cpu": "3", "memory": "1Gi"}}
        ]
    }
    p = parse_pod(raw)
    with_claims = pod_requests(p, node_allocatable=p.node_allocatable)
    assert (with_claims["cpu"], with_claims["memory"]) == (Fraction(4), Fraction(2 * 2**30))
    assert pod_requests(p)["cpu"] == 1  # the statuses count only when asked for (the gate)
    raw["spec"]["resources"] = {"requests": {"cpu": "6", "hugepages-2Mi": "8Mi"}}
    leveled = parse_pod(raw)
    both = pod_requests(leveled, pod_level=True, node_allocatable=leveled.node_allocatable)
    # cpu and hugepages from the pod level; memory (not named there) from containers + claims
    assert (both["cpu"], both["hugepages-2Mi"], both["memory"]) == (
        Fraction(6),
        Fraction(8 * 2**20),
        Fraction(2 * 2**30),
    )
