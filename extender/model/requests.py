"""What a pod requests, as resourcehelper.PodRequests computes it (v1.36.3
staging/src/k8s.io/component-helpers/resource/helpers.go): regular containers and sidecars add
up, an init container counts with the sidecars started before it and the largest such wins, a
node-allocatable DRA claim's resources add to the containers', pod-level requests replace what
they name, and the overhead comes on top."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction

from extender.model.core import Container, Pod
from extender.model.node_allocatable import ClaimResources
from extender.quantity import Quantity

Requests = dict[str, Fraction]

#: Resources pod-level requests may name (IsSupportedPodLevelResource), besides hugepages-*.
POD_LEVEL = frozenset({"cpu", "memory"})


def pod_requests(
    pod: Pod,
    *,
    use_status: bool = False,
    pod_level: bool = False,
    node_allocatable: Iterable[ClaimResources] = (),
    overhead: bool = True,
) -> Requests:
    """PodRequests with ``UseStatusResources`` (in-place resizes count), pod-level resources
    (``not SkipPodLevelResources``) and ``node_allocatable`` the claim statuses to add
    (``UseDRANodeAllocatableResourceClaimStatus``); ``overhead=False``: without
    ``spec.overhead`` (AggregateContainerRequests)."""
    total: Requests = {}
    sidecars: Requests = {}
    init_max: Requests = {}
    for c in pod.containers:
        if not c.init:
            _add(total, _of(c, use_status))
    for c in pod.containers:
        if not c.init:
            continue
        if c.sidecar:
            _add(total, _of(c, use_status))
            _add(sidecars, _of(c, use_status))
            needs = sidecars
        else:
            needs = dict(sidecars)
            _add(needs, c.requests)
        for name, value in needs.items():
            init_max[name] = max(init_max.get(name, Fraction(0)), value)
    for name, value in init_max.items():
        total[name] = max(total.get(name, Fraction(0)), value)
    for status in node_allocatable:
        for name, amount in status.amounts().items():
            total[name] = total.get(name, Fraction(0)) + amount
    if pod_level and any(_pod_level(name) for name in pod.pod_requests):
        effective = pod.pod_effective if use_status and pod.pod_effective is not None else None
        for name, q in pod.pod_requests.items():
            if _pod_level(name):
                chosen = effective.get(name) if effective is not None else q
                total[name] = chosen.value if chosen is not None else Fraction(0)
    if overhead:
        _add(total, pod.overhead)
    return total


def _pod_level(name: str) -> bool:
    return name in POD_LEVEL or name.startswith("hugepages-")


def _of(container: Container, use_status: bool) -> Mapping[str, Quantity]:
    return container.effective if use_status and container.effective is not None else container.requests


def _add(into: Requests, requests: Mapping[str, Quantity]) -> None:
    for name, q in requests.items():
        into[name] = into.get(name, Fraction(0)) + q.value
