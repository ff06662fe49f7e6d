"""ClusterState tells which ResourceSlices changed since an inventory version (what an
inventory update re-indexes), and when more than slices changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from extender.cluster.state import ClusterState
from tests.builders import attrs, device, device_class, resource_slice


def cluster() -> ClusterState:
    return ClusterState.from_objects(
        [
            device_class(),
            resource_slice("a", [device("d", attributes=attrs(model="x"))], pool="p1"),
            resource_slice("b", [device("d")], pool="p2", node="node-2"),
        ]
    )


def taint_rule(name: str = "rule") -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": {"driver": "driver-a"}, "taint": {"key": "k", "effect": "NoSchedule"}},
    }


def delete(kind: str, name: str) -> Callable[[ClusterState], None]:
    return lambda state: state.remove({"kind": kind, "metadata": {"name": name}})


def apply(*objects: dict[str, Any]) -> Callable[[ClusterState], None]:
    def change(state: ClusterState) -> None:
        for obj in objects:
            state.apply(obj)

    return change


def add_c_delete_a(state: ClusterState) -> None:
    state.apply(resource_slice("c", []))
    delete("ResourceSlice", "a")(state)


CHANGES: dict[str, tuple[Callable[[ClusterState], None], set[str] | None]] = {
    # what happens -> slices_changed_since(the version before) (None: rebuild everything)
    "a device changed": (
        apply(resource_slice("a", [device("d", attributes=attrs(model="y"))], pool="p1")),
        {"a"},
    ),
    "a slice added": (apply(resource_slice("c", [], pool="p3")), {"c"}),
    "a slice deleted": (delete("ResourceSlice", "b"), {"b"}),
    "two slices": (add_c_delete_a, {"a", "c"}),
    "a class changed": (apply(device_class(expression="true")), None),
    "a class deleted": (delete("DeviceClass", "class-a"), None),
    "a taint rule added": (apply(taint_rule()), None),
    "a slice and then a class": (apply(resource_slice("c", []), device_class(expression="true")), None),
}


@pytest.mark.parametrize(("change", "expected"), CHANGES.values(), ids=CHANGES.keys())
def test_slices_changed_since(change: Callable[[ClusterState], None], expected: set[str] | None) -> None:
    state = cluster()
    before = state.inventory_version
    change(state)
    assert state.inventory_version > before
    assert state.slices_changed_since(before) == expected
    assert state.slices_changed_since(state.inventory_version) == set()


def test_only_changes_after_the_version_count() -> None:
    state = cluster()
    state.apply(resource_slice("c", []))
    middle = state.inventory_version
    state.apply(resource_slice("d", []))
    assert state.slices_changed_since(middle) == {"d"}
    state.apply(resource_slice("c", [device("x")]))  # changed again: listed once, as of now
    assert state.slices_changed_since(middle) == {"c", "d"}


def test_a_slice_read_again_unchanged_leaves_the_inventory_alone() -> None:
    state = cluster()
    before, record = state.inventory_version, state.slices["a"]
    again = resource_slice("a", [device("d", attributes=attrs(model="x"))], pool="p1")
    again["metadata"]["resourceVersion"] = "42"
    state.apply(again)
    assert state.inventory_version == before and state.slices_changed_since(before) == set()
    assert state.slices["a"].resource_version == "42"
    assert state.slices["a"].devices[0] is record.devices[0]


def test_deleted_names_are_forgotten_before_they_pile_up() -> None:
    state = cluster()
    before = state.inventory_version
    for i in range(1100):
        state.apply(resource_slice(f"gone-{i}", []))
        delete("ResourceSlice", f"gone-{i}")(state)
    assert len(state.slice_changes) <= 2 * len(state.slices) + 1024
    assert state.slices_changed_since(before) is None  # too long ago to tell: rebuild
    now = state.inventory_version
    state.apply(resource_slice("c", []))
    assert state.slices_changed_since(now) == {"c"}
