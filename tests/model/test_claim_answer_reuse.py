"""A status write's answer read on the allocation the write sent (parse_resource_claim's
``known``): reused when the stored allocation is that one, or that one with the
``allocationTimestamp`` the write added; read afresh otherwise. Either way the claim equals
a fresh read of the answer."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.model.dra import parse_allocation, parse_resource_claim
from extender.model.reader import Reader

SENT: dict[str, Any] = {
    "devices": {
        "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-3"}]
    },
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    },
}
STAMP = "2026-12-02T05:50:00Z"


def answer(allocation: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default", "uid": "u", "resourceVersion": "9"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
        "status": {"allocation": allocation, "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}]},
    }


def other_device() -> dict[str, Any]:
    changed = copy.deepcopy(SENT)
    changed["devices"]["results"][0]["device"] = "gpu-4"
    return changed


#: (case, the stored allocation, the sent one's parsed devices are reused)
CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("as-sent", copy.deepcopy(SENT), True),
    ("with-the-write-s-timestamp", {**copy.deepcopy(SENT), "allocationTimestamp": STAMP}, True),
    ("another-device", other_device(), False),
    ("timestamp-and-more", {**copy.deepcopy(SENT), "allocationTimestamp": STAMP, "extra": 1}, False),
    ("timestamp-not-a-string", {**copy.deepcopy(SENT), "allocationTimestamp": 5}, False),
]


@pytest.mark.parametrize(("stored", "reused"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_answer_reads_as_a_fresh_read_and_reuses_only_what_it_may(
    stored: dict[str, Any], reused: bool
) -> None:
    known = parse_allocation(Reader(copy.deepcopy(SENT), "allocation"))
    try:
        fresh = parse_resource_claim(answer(stored))
    except Exception as exc:  # a malformed answer fails the same way either way
        with pytest.raises(type(exc)):
            parse_resource_claim(answer(stored), None, known)
        assert not reused
        return
    claim = parse_resource_claim(answer(stored), None, known)
    assert claim == fresh and claim.allocation is not None
    assert claim.allocation.raw == claim.raw["status"]["allocation"]
    assert (claim.allocation.devices is known.devices) == reused


def test_a_known_allocation_with_a_timestamp_of_its_own_is_not_restamped() -> None:
    known = parse_allocation(Reader({**copy.deepcopy(SENT), "allocationTimestamp": STAMP}, "allocation"))
    stored = {**copy.deepcopy(SENT), "allocationTimestamp": "2026-12-02T06:00:00Z"}
    claim = parse_resource_claim(answer(stored), None, known)
    assert claim == parse_resource_claim(answer(stored)) and claim.allocation is not known
