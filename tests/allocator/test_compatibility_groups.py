"""DRADeviceCompatibilityGroups (1.37 alpha, off; kubernetes#139795): devices drawing on one
counter set must be compatible.

Translated from 1.37's structured/internal/experimental compatibility_groups_test.go
(TestCompatibilityGroupIntersectionAdmits, ...Rolling, ...NoGroupsStacking) and the
testCompatibilityGroups integration cases (CompatibleCoAllocation, IncompatibleDevicesUnschedulable,
IncompatibleRejectedCompatibleAdmitted), on the fixture they use: a counter set ``gpu-0`` in its
own slice, every device drawing ``mem: 4`` (or 1) from it. With the gate off, 1.37 ignores a
slice whose devices name groups, so its pool is incomplete.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.allocator.counters import Intersection
from tests.allocator.harness import allocate
from tests.builders import allocated, claim, device, device_class, exact, resource_slice

ON = "DRAPartitionableDevices=true,DRADeviceCompatibilityGroups=true"
OFF = "DRAPartitionableDevices=true,DRADeviceCompatibilityGroups=false"


def groups(*names: str) -> frozenset[str]:
    return frozenset(names)


def after(*members: frozenset[str]) -> Intersection:
    state = Intersection()
    for m in members:
        state = state.add(m)
    return state


#: name -> (members so far, candidate, admitted)
ADMITS = {
    "empty-intersection-admits-grouped": ((), groups("a"), True),
    "empty-intersection-admits-nil": ((), groups(), True),
    "no-group-members-admit-no-group-candidate (nil-vs-nil)": ((groups(),), groups(), True),
    "no-group-members-reject-grouped-candidate (nil-vs-set)": ((groups(),), groups("a"), False),
    "grouped-members-reject-no-group-candidate (set-vs-nil)": ((groups("a"),), groups(), False),
    "grouped-members-admit-overlapping-candidate (set-vs-set)": ((groups("a", "b"),), groups("b"), True),
    "grouped-members-reject-disjoint-candidate": ((groups("a"),), groups("b"), False),
    "multi-group-candidate-overlaps": ((groups("a"),), groups("b", "a"), True),
    "multi-group-candidate-disjoint": ((groups("a"),), groups("b", "c"), False),
}


@pytest.mark.parametrize("row", ADMITS.values(), ids=ADMITS.keys())
def test_intersection_admits(row: tuple[tuple[frozenset[str], ...], frozenset[str], bool]) -> None:
    members, candidate, admitted = row
    assert after(*members).admits(candidate) is admitted


def test_intersection_rolls() -> None:
    """[foo, foobar] then [bar, foobar] leaves {foobar}: [baz] no longer fits, [foobar] does."""
    state = after(groups("foo", "foobar"), groups("bar", "foobar"))
    assert state.running == groups("foobar")
    assert not state.admits(groups("baz")) and state.admits(groups("foobar"))


def test_no_group_members_stack() -> None:
    state = after(groups(), groups())
    assert state.admits(groups()) and not state.admits(groups("mig"))


def counter_slice(mem: str = "8") -> dict[str, Any]:
    return resource_slice(
        "counters", None, count=2, sharedCounters=[{"name": "gpu-0", "counters": {"mem": {"value": mem}}}]
    )


def part(name: str, *names: str, mem: str = "4", field: bool = True) -> dict[str, Any]:
    consumption: dict[str, Any] = {"counterSet": "gpu-0", "counters": {"mem": {"value": mem}}}
    if field:
        consumption["compatibilityGroups"] = list(names)
    return device(name, consumesCounters=[consumption])


def objects(
    *devices: dict[str, Any], mem: str = "8", count: int = 2, extra: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    one = claim("claim-0", requests=[exact("r", count=count)])
    return [
        device_class(),
        counter_slice(mem),
        resource_slice("parts", list(devices), count=2),
        one,
        *(extra or []),
    ]


def test_compatible_devices_are_allocated_together() -> None:
    outcome = allocate(objects(part("dev-0", "mig"), part("dev-1", "mig")), gates=ON)
    assert outcome.devices() == [("r", "dev-0"), ("r", "dev-1")]


def test_incompatible_devices_are_not() -> None:
    """IncompatibleDevicesUnschedulable; the extender's explanation says what kept the device out."""
    outcome = allocate(objects(part("dev-0", "mig"), part("dev-1", "vgpu")), gates=ON)
    assert "1 incompatible compatibility groups" in (outcome.unsatisfiable or ""), outcome


def test_the_search_backtracks_past_an_incompatible_device() -> None:
    """foo [foo, foobar], bar [bar, foobar], baz [baz]: two of them can only be foo and bar,
    even with baz listed first; three cannot be."""
    devices = [
        part("foo", "foo", "foobar", mem="1"),
        part("bar", "bar", "foobar", mem="1"),
        part("baz", "baz", mem="1"),
    ]
    assert allocate(objects(*devices), gates=ON).devices() == [("r", "foo"), ("r", "bar")]
    first = [devices[2], devices[0], devices[1]]
    assert allocate(objects(*first), gates=ON).devices() == [("r", "foo"), ("r", "bar")]
    assert allocate(objects(*devices, count=3), gates=ON).unsatisfiable


def test_an_allocated_device_seeds_the_counter_set() -> None:
    """dev-0 [mig] is allocated: dev-1 [vgpu] is skipped and dev-2 [mig] taken."""
    held = claim("holder", requests=[exact("r")])
    held["status"] = {"allocation": allocated(("driver-a", "pool-1", "dev-0"))}
    devices = [part("dev-0", "mig"), part("dev-1", "vgpu"), part("dev-2", "mig")]
    outcome = allocate(objects(*devices, mem="12", count=1, extra=[held]), gates=ON)
    assert outcome.devices() == [("r", "dev-2")]


def test_devices_without_groups_go_together_but_not_with_grouped_ones() -> None:
    assert allocate(objects(part("a", field=False), part("b")), gates=ON).devices() == [
        ("r", "a"),
        ("r", "b"),
    ]
    assert allocate(objects(part("a"), part("b", "mig")), gates=ON).unsatisfiable
    assert allocate(objects(part("a", "mig"), part("b", field=False)), gates=ON).unsatisfiable


def test_the_groups_hold_across_the_claims_of_a_pod() -> None:
    two = [
        claim("c0", requests=[exact("r", selectors=['device.attributes["driver-a"].kind == "mig"'])]),
        claim("c1", requests=[exact("r", selectors=['device.attributes["driver-a"].kind == "vgpu"'])]),
    ]
    mig, vgpu = part("mig", "mig"), part("vgpu", "vgpu")
    mig["attributes"] = {"kind": {"string": "mig"}}
    vgpu["attributes"] = {"kind": {"string": "vgpu"}}
    state = [device_class(), counter_slice(), resource_slice("parts", [mig, vgpu], count=2), *two]
    assert allocate(state, ["c0", "c1"], gates=ON).unsatisfiable
    assert allocate(state, ["c0"], gates=ON).devices() == [("r", "mig")]


def test_with_the_gate_off_a_pool_whose_devices_name_groups_is_incomplete() -> None:
    """1.37 GatherPools leaves such slices out ("whether any of the devices are already allocated
    is deliberately irrelevant"): no device of the pool is allocated, and All says why."""
    grouped = objects(part("dev-0", "mig"), part("dev-1", "mig"))
    assert allocate(grouped, gates=OFF).unsatisfiable
    plain = objects(part("dev-0", field=False), part("dev-1"))  # [] and no field: no groups
    assert allocate(plain, gates=OFF).devices() == [("r", "dev-0"), ("r", "dev-1")]
    every = [*grouped[:3], claim("claim-0", requests=[exact("r", mode="All")])]
    assert "is currently being updated" in (allocate(every, gates=OFF).error or "")


def test_a_1_36_allocator_does_not_know_groups_and_allocates_those_devices() -> None:
    """The field is new in 1.37: --kubernetes-version 1.36 (e.g. against a 1.37 API server, within
    the allowed skew) decides as 1.36 does, groups unseen."""
    from extender.allocator import Features
    from extender.allocator.releases import release_of

    assert not Features.from_gates({}, release_of(36)).since_1_37
    grouped = objects(part("dev-0", "mig"), part("dev-1", "vgpu"))
    assert allocate(grouped, gates="DRAPartitionableDevices=true", release=36).devices() == [
        ("r", "dev-0"),
        ("r", "dev-1"),
    ]


def test_a_device_that_joined_and_was_then_rejected_leaves_the_groups_as_they_were() -> None:
    """dev-0 [mig] joins, then runs out of counters (it asks 9 of 8): the set is untouched, so
    dev-1 [vgpu] and dev-2 [vgpu] go together."""
    devices = [part("dev-0", "mig", mem="9"), part("dev-1", "vgpu"), part("dev-2", "vgpu")]
    assert allocate(objects(*devices), gates=ON).devices() == [("r", "dev-1"), ("r", "dev-2")]
