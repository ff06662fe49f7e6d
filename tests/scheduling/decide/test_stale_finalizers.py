"""Delete protection that protects nothing (decide/stale_finalizers.py): which claims, after how
long, and never one a write of this replica is settling."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster.state import ClusterState
from extender.scheduling.decide.stale_finalizers import stale_finalizers
from tests.builders import allocated, claim, reserve

PROTECTION = "resource.kubernetes.io/delete-protection"
GRACE = 10.0


def protected(name: str, **kw: Any) -> dict[str, Any]:
    c = claim(name, **kw)
    c["metadata"]["finalizers"] = [PROTECTION]
    return c


CASES = {
    "not allocated, reserved for nobody": (protected("c"), True),
    "allocated": (protected("c", allocation=allocated(("driver-a", "node-1", "gpu-0"))), False),
    "reserved (a bind of another scheduler in flight)": (reserve(protected("c"), "p"), False),
    "another finalizer only": (
        {**claim("c"), "metadata": {**claim("c")["metadata"], "finalizers": ["x/y"]}},
        False,
    ),
    "no finalizer": (claim("c"), False),
}


@pytest.mark.parametrize(("obj", "stale"), CASES.values(), ids=CASES.keys())
def test_only_protection_of_nothing_is_stale_and_only_after_the_grace(
    obj: dict[str, Any], stale: bool
) -> None:
    state = ClusterState.from_objects([obj])
    seen: dict[Any, float] = {}
    assert stale_finalizers(state, lambda key: False, 100.0, seen, GRACE) == []  # first seen
    found = stale_finalizers(state, lambda key: False, 100.0 + GRACE, seen, GRACE)
    assert [c.name for c in found] == (["c"] if stale else [])


def test_a_claim_this_replica_is_writing_is_never_stale_and_its_count_starts_over() -> None:
    state = ClusterState.from_objects([protected("c")])
    seen: dict[Any, float] = {}
    stale_finalizers(state, lambda key: False, 100.0, seen, GRACE)
    assert stale_finalizers(state, lambda key: True, 200.0, seen, GRACE) == []
    assert seen == {}  # settling: forgotten
    assert stale_finalizers(state, lambda key: False, 201.0, seen, GRACE) == []
    assert [c.name for c in stale_finalizers(state, lambda key: False, 211.0, seen, GRACE)] == ["c"]


def test_the_cache_keeps_the_candidates_as_claims_change() -> None:
    # The sweep reads the cache's index, not every claim: it must follow stores and removals.
    state = ClusterState.from_objects([protected("c"), claim("d")])
    assert state.unprotecting == {("default", "c")}
    state.apply(protected("c", allocation=allocated(("driver-a", "node-1", "gpu-0"))))
    assert state.unprotecting == set()
    state.apply(protected("d"))
    assert state.unprotecting == {("default", "d")}
    state.remove(protected("d"))
    assert state.unprotecting == set()
