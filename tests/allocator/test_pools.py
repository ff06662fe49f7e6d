"""Which pools a node sees: node selection, generations, completeness, validity."""

from __future__ import annotations

from tests.allocator.harness import NO_GATES, allocate
from tests.builders import claim, device, device_class, exact, resource_slice

A = device_class()


def test_slices_of_other_nodes_are_not_visible() -> None:
    objects = [A, resource_slice("s", [device("d")], node="node-2"), claim()]
    assert "no device matches" in (allocate(objects).unsatisfiable or "")


def test_node_selector_slices_match_by_labels() -> None:
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    }
    objects = [A, resource_slice("s", [device("d")], nodeSelector=selector), claim()]
    out = allocate(objects, labels={"zone": "a"})
    assert out.allocations and out.allocations[0]["nodeSelector"] == selector
    assert allocate(objects, labels={"zone": "b"}).unsatisfiable


def test_all_nodes_slices_need_no_node_selector() -> None:
    out = allocate([A, resource_slice("s", [device("d")], allNodes=True), claim()])
    assert out.allocations and "nodeSelector" not in out.allocations[0]


def test_newest_generation_wins() -> None:
    objects = [
        A,
        resource_slice("old", [device("old-dev")], generation=1),
        resource_slice("new", [device("new-dev")], generation=2),
        claim(),
    ]
    assert allocate(objects).devices() == [("req-0", "new-dev")]


def test_incomplete_pools_are_not_used_for_exact_counts() -> None:
    objects = [A, resource_slice("s", [device("d")], count=2), claim()]
    out = allocate(objects)
    assert out.unsatisfiable and "pools being updated: driver-a/pool-1" in out.unsatisfiable


def test_a_pool_complete_across_nodes_is_complete() -> None:
    objects = [
        A,
        resource_slice("mine", [device("a")], count=2),
        resource_slice("theirs", [device("b")], node="node-2", count=2),
        claim(),
    ]
    assert allocate(objects).devices() == [("req-0", "a")]


def test_a_newer_generation_on_another_node_makes_the_local_view_obsolete() -> None:
    objects = [
        A,
        resource_slice("mine", [device("a")], count=2, generation=1),
        resource_slice("theirs", [device("b")], node="node-2", count=2, generation=2),
        claim(),
    ]
    assert allocate(objects).unsatisfiable


def test_duplicate_device_names_make_the_pool_invalid() -> None:
    objects = [
        A,
        resource_slice("s1", [device("d")], count=2),
        resource_slice("s2", [device("d")], count=2),
        claim(),
    ]
    assert "invalid resource pools were encountered" in (allocate(objects).node_error or "")


def test_an_invalid_pool_does_not_matter_when_another_pool_fits() -> None:
    objects = [
        A,
        resource_slice("s1", [device("d")], count=2),
        resource_slice("s2", [device("d")], count=2),
        resource_slice("good", [device("g")], pool="pool-2"),
        claim(),
    ]
    assert allocate(objects).devices() == [("req-0", "g")]


def test_per_device_node_selection() -> None:
    devices = [
        device("elsewhere", nodeName="node-2"),
        device("here", nodeName="node-1"),
        device("anywhere", allNodes=True),
    ]
    objects = [A, resource_slice("s", devices, perDeviceNodeSelection=True), claim(requests=[exact(count=2)])]
    out = allocate(objects)
    assert out.devices() == [("req-0", "here"), ("req-0", "anywhere")]
    assert out.allocations and out.allocations[0]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"
    ] == ["node-1"]
    # Without DRAPartitionableDevices such slices are ignored entirely.
    assert allocate(objects, gates=NO_GATES).unsatisfiable
