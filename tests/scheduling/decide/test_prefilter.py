"""A PodClaims' keys (decide/prefilter.py): made once, as a fresh computation would make them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from tests.builders import allocated, claim, device_class, exact, pod


def claims_of(*objects: dict[str, Any], pod_name: str = "p") -> PodClaims:
    state = ClusterState.from_objects([device_class(), *objects])
    return Snapshot(state, Features(), CelEnvironment()).claims_of(state.pods[("default", pod_name)])


def fresh_keys(claims: PodClaims) -> tuple[Any, Any]:
    """The keys of a copy that never made them."""
    copy = dataclasses.replace(claims)
    return copy.key(), copy.content_key()


#: name -> the pod's claims.
PODS = {
    "one claim to allocate": [claim("one"), pod("p", ["one"])],
    "two claims": [claim("one"), claim("two", requests=[exact(count=2)]), pod("p", ["one", "two"])],
    "an allocated claim": [
        claim("one", allocation=allocated(("driver-a", "node-1", "d0"))),
        claim("two"),
        pod("p", ["one", "two"]),
    ],
}


@pytest.mark.parametrize("case", list(PODS))
def test_keys_are_made_once_and_equal_a_fresh_computation(case: str) -> None:
    claims = claims_of(*PODS[case])
    first = claims.key(), claims.content_key()
    assert first == fresh_keys(claims)
    assert claims.key() is first[0] and claims.content_key() is first[1]  # not made again


def test_a_changed_copy_makes_its_own_keys() -> None:
    claims = claims_of(claim("one"), claim("two"), pod("p", ["one", "two"]))
    before = claims.key(), claims.content_key()
    fewer = dataclasses.replace(claims, to_allocate=claims.to_allocate[:1])
    assert fewer.key() != before[0] and fewer.content_key() != before[1]
    assert (fewer.key(), fewer.content_key()) == fresh_keys(fewer)


def test_pods_with_the_same_specs_share_the_content_key_only() -> None:
    objects = [claim("one"), pod("p", ["one"]), claim("two"), pod("q", ["two"])]
    p, q = claims_of(*objects), claims_of(*objects, pod_name="q")
    assert p.content_key() == q.content_key() and p.key() != q.key()
