"""Why a node does not fit: the reason text operators read in FailedScheduling events.

Every reason must survive the search's pruning (the candidate bound skips devices the search
would reject, so the explanation cannot rely on rejections alone).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.allocator.harness import allocate
from tests.builders import allocated, attrs, claim, device, device_class, exact, resource_slice

A = device_class()
NUMA = [device("d0", attributes=attrs(numa=0)), device("d1", attributes=attrs(numa=1))]
NO_SCHEDULE = [{"key": "broken", "value": "", "effect": "NoSchedule"}]


def held(*names: str) -> dict[str, Any]:
    return claim("held", allocation=allocated(*[("driver-a", "pool-1", n) for n in names]))


def counters_slices(*consumption: str) -> list[dict[str, Any]]:
    counters = resource_slice(
        "counters", None, count=2, sharedCounters=[{"name": "set", "counters": {"mem": {"value": "8Gi"}}}]
    )
    devices = [
        device(f"p{i}", consumesCounters=[{"counterSet": "set", "counters": {"mem": {"value": c}}}])
        for i, c in enumerate(consumption)
    ]
    return [counters, resource_slice("parts", devices, count=2)]


#: name, objects (the claim under test last), the expected reason after "claim default/claim-0, "
EXPLANATIONS: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "no devices here",
        [A, claim()],
        "request req-0: needs 1 device, no device matches (no devices published",
    ),
    (
        "selector excludes all",
        [A, resource_slice("s", NUMA), claim(requests=[exact(selectors=["false"])])],
        "request req-0: needs 1 device, no device matches on this node",
    ),
    (
        "in use",
        [A, resource_slice("s", NUMA), held("d0", "d1"), claim()],
        "request req-0: needs 1 device; 2 match, 2 of them in use",
    ),
    (
        "tainted",
        [A, resource_slice("s", [device("d0", taints=NO_SCHEDULE)]), claim()],
        "request req-0: needs 1 device; 1 match, 1 tainted and not tolerated",
    ),
    (
        "constraint",
        [
            A,
            resource_slice("s", NUMA),
            claim(requests=[exact(count=2)], constraints=[{"matchAttribute": "driver-a/numa"}]),
        ],
        "request req-0: needs 2 devices; 2 match, 1 excluded by a constraint",
    ),
    (
        "counters",
        [A, *counters_slices("6Gi", "6Gi"), claim(requests=[exact(count=2)])],
        "request req-0: needs 2 devices; 2 match, 1 out of counters",
    ),
    (
        "too many",
        [A, resource_slice("s", NUMA), claim(requests=[exact(count=3)])],
        "needs 3 devices; 2 match",
    ),
]


@pytest.mark.parametrize(("name", "objects", "reason"), EXPLANATIONS, ids=[c[0] for c in EXPLANATIONS])
def test_unfit_reason(name: str, objects: list[dict[str, Any]], reason: str) -> None:
    outcome = allocate(objects)
    assert outcome.unsatisfiable is not None, name
    assert outcome.unsatisfiable.startswith("cannot allocate all claims: claim default/claim-0, "), outcome
    assert reason in outcome.unsatisfiable, outcome.unsatisfiable
