"""The claim writes against the store (which plays the API server): what a retried bind meets."""

from __future__ import annotations

import asyncio

import pytest

from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.model.core import parse_pod
from extender.model.dra import parse_resource_claim
from extender.scheduling.write.claim_writes import ClaimWriteError, reserve_claim
from tests.builders import allocated, claim, pod


def test_a_claim_an_earlier_attempt_allocated_elsewhere_is_not_taken_as_this_writes() -> None:
    # Bind 1 allocated the claim on node-0 and reserved it for the pod (its Binding may have
    # landed there). Bind 2, deciding on a cache that lags, wants devices on node-1: finding
    # the claim reserved for the pod must not count as its own write.
    store = MemoryStore()
    stale = claim("c", uid="uid-c")
    store.load([stale])
    stale_view = parse_resource_claim(store.get("ResourceClaim", "default", "c"))  # what the cache shows
    current = store.get("ResourceClaim", "default", "c")
    current["status"] = {
        "allocation": allocated(("driver-a", "pool-0", "d0")),
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}],
    }
    store.update(current, status=True)
    api = MemoryAPI(store)
    p = parse_pod(pod("p", ["c"]))
    elsewhere = allocated(("driver-a", "pool-1", "d0"))
    with pytest.raises(ClaimWriteError, match="already allocated to other devices"):
        asyncio.run(reserve_claim(api, stale_view, elsewhere, p))
    # The same devices (its own earlier write, landed): that is this write, done.
    same = allocated(("driver-a", "pool-0", "d0"))
    answer = asyncio.run(reserve_claim(api, stale_view, same, p))
    assert answer["status"]["reservedFor"][0]["uid"] == "uid-p"
    assert store.get("ResourceClaim", "default", "c")["status"]["allocation"] == same
