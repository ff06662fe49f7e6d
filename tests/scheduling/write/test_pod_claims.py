"""What a bind's claim writes leave for the cache (extender/scheduling/write/pod_claims.py)."""

from __future__ import annotations

import asyncio

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
