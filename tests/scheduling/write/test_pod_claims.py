"""What a bind's claim writes leave for the cache (extender/scheduling/write/pod_claims.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.builders import claim, pod
from tests.scheduling.inflight.test_catch_up import cluster

KEY = ("default", "gpu")


def test_the_watch_s_echo_of_a_claim_write_is_stored_as_the_answer_was_read() -> None:
    e, store = cluster(claim("gpu", uid="uid-gpu"), pod("worker", ["gpu"], uid="uid-worker"))
    assert asyncio.run(e.bind("default", "worker", "uid-worker", "node-1")) == ""
    answer = e.state.answers[KEY]
    stored = store.get("ResourceClaim", "default", "gpu")
    assert answer.resource_version == stored["metadata"]["resourceVersion"]
    assert answer.allocation is not None and answer.reserved_for
    e.state.apply(stored)  # the watch delivers the write
    assert e.state.claims[KEY] is answer


def test_a_bind_with_nothing_to_release_is_never_parked() -> None:
    """Only a wait on the cluster (a preemption's victims' claims released) parks a bind: a
    parked bind makes bind pressure recount every bind in flight on each filter and bind."""
    e, _store = cluster(claim("gpu", uid="uid-gpu"), pod("worker", ["gpu"], uid="uid-worker"))
    parked: list[str] = []
    real = e.tracker.parked

    def parking(pod_uid: str) -> Any:
        parked.append(pod_uid)
        return real(pod_uid)

    e.tracker.parked = parking  # type: ignore[method-assign]
    assert asyncio.run(e.bind("default", "worker", "uid-worker", "node-1")) == ""
    assert parked == []
