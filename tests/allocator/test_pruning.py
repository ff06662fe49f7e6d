"""The search's candidate bound never changes an answer: not the devices, not an error.

Upstream walks every branch; the extender skips branches with too few usable candidates left.
This property compares both on small random inventories that mix what can interact with the
bound: selectors that fail at runtime on some devices, matchAttribute constraints, taints,
counter-consuming and multi-allocatable devices (a rejected candidate leaves nothing charged
since kubernetes#140431, so walking a hopeless branch changes no state).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.allocator.search import _Attempt
from tests.allocator.harness import Outcome, allocate
from tests.builders import attrs, claim, device, device_class, exact, resource_slice

ERRORING = 'device.attributes["driver-a"].extra == "x"'
TAINT = [{"key": "k", "value": "v", "effect": "NoSchedule"}]


@st.composite
def scenario(draw: st.DrawFn) -> list[dict[str, Any]]:
    devices = []
    for i in range(draw(st.integers(1, 6))):
        extra: dict[str, Any] = {}
        values: dict[str, Any] = {"model": draw(st.sampled_from(["x", "y"]))}
        if draw(st.booleans()):
            values["extra"] = "x"
        if draw(st.integers(0, 2)) == 0:
            extra["taints"] = TAINT
        if draw(st.integers(0, 3)) > 0:
            extra["consumesCounters"] = [{"counterSet": "cs", "counters": {"mem": {"value": "1"}}}]
        if draw(st.integers(0, 3)) == 0:
            extra["allowMultipleAllocations"] = True
        devices.append(device(f"d{i}", attributes=attrs(**values), **extra))
    counters = [{"name": "cs", "counters": {"mem": {"value": str(draw(st.integers(1, 3)))}}}]
    requests: list[dict[str, Any]] = []
    for r in range(draw(st.integers(1, 3))):
        selectors = [ERRORING] if draw(st.integers(0, 3)) == 0 else None
        tolerate = draw(st.integers(0, 2)) == 0
        kw: dict[str, Any] = {"tolerations": [{"operator": "Exists"}]} if tolerate else {}
        if draw(st.booleans()):  # a firstAvailable request: a bigger and a smaller alternative
            big = exact("big", count=draw(st.integers(2, 3)), selectors=selectors, **kw)
            requests.append(
                {
                    "name": f"r{r}",
                    "firstAvailable": [
                        {"name": "big", **big["exactly"]},
                        {"name": "one", **exact("one")["exactly"]},
                    ],
                }
            )
        else:
            requests.append(exact(f"r{r}", count=draw(st.integers(1, 3)), selectors=selectors, **kw))
    constraints = []
    if len(requests) > 1 and draw(st.booleans()):
        constraints = [{"requests": [r["name"] for r in requests], "matchAttribute": "driver-a/model"}]
    return [
        device_class(),
        resource_slice("s", devices, sharedCounters=counters),
        claim(requests=requests, constraints=constraints),
    ]


def answer(outcome: Outcome) -> tuple[Any, ...]:
    return (
        [outcome.devices(i) for i in range(len(outcome.allocations))] if outcome.allocations else None,
        outcome.unsatisfiable is not None,
        outcome.error,
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(objects=scenario())
def test_the_candidate_bound_never_changes_the_answer(
    objects: list[dict[str, Any]], monkeypatch: Any
) -> None:
    pruned = answer(allocate(objects))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Attempt, "_enough_candidates", lambda *_args: True)
        exhaustive = answer(allocate(objects))
    assert pruned == exhaustive
