"""extender/scheduling/decide/capacity.py: free devices per node, class and product, and pods that fit
(hand-counted on a small cluster)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.scheduling.decide.capacity import Capacity, ClassProduct, DeviceStates, NodeDrivers, capacity
from extender.scheduling.decide.snapshot import Snapshot
from tests.builders import (
    allocated,
    attrs,
    claim,
    device,
    device_class,
    device_taint_rule,
    node,
    resource_slice,
)


def gpus(prefix: str, count: int, product: str) -> list[dict[str, Any]]:
    return [device(f"{prefix}{i}", attributes=attrs(productName=product)) for i in range(count)]


def cluster(*extra: dict[str, Any]) -> Capacity:
    objects = [
        device_class("gpu", 'device.driver == "driver-a"'),
        device_class(
            "big-gpu", 'device.driver == "driver-a" && device.attributes["driver-a"].productName == "H100"'
        ),
        node("node-a"),
        node("node-b"),
        resource_slice("a", gpus("g", 4, "A100"), pool="node-a", node="node-a"),
        resource_slice("b", gpus("h", 2, "H100"), pool="node-b", node="node-b"),
        # Reached by both nodes: one device, counted once per class, on each node's line.
        resource_slice("net", gpus("n", 1, "A100"), pool="net", allNodes=True),
        claim("held", allocation=allocated(("driver-a", "node-a", "g0"), ("driver-a", "node-b", "h1"))),
        *extra,
    ]
    state = ClusterState.from_objects(objects)
    return capacity(Snapshot(state, Features(), CelEnvironment()))


def test_per_node_and_driver_totals_and_held_devices() -> None:
    assert cluster().nodes == (
        NodeDrivers("node-a", "driver-a", total=5, allocated=1),
        NodeDrivers("node-b", "driver-a", total=3, allocated=1),
    )


def test_per_class_and_product_distinct_devices_and_free_ones() -> None:
    assert cluster().classes == (
        ClassProduct("big-gpu", "H100", total=2, free=1),
        ClassProduct("gpu", "A100", total=5, free=4),
        ClassProduct("gpu", "H100", total=2, free=1),
    )


FITS = {
    "one device": ("gpu", 1, 4 + 2),  # node-a: g1-g3 + net; node-b: h0 + net
    "two devices": ("gpu", 2, 2 + 1),
    "four devices": ("gpu", 4, 1),
    "five devices": ("gpu", 5, 0),
    "a narrower class": ("big-gpu", 1, 1),
    "an unknown class": ("nope", 1, 0),
}


@pytest.mark.parametrize(("device_class", "count", "fit"), FITS.values(), ids=FITS.keys())
def test_pods_that_fit_sum_free_devices_per_node_by_the_request_size(
    device_class: str, count: int, fit: int
) -> None:
    assert cluster().pods_that_fit(device_class, count) == fit


def test_a_class_whose_selector_does_not_compile_is_reported_not_counted() -> None:
    found = cluster(device_class("broken", "device.driver =="))
    assert "CEL compile error" in found.class_errors["broken"]
    assert "broken" not in found.free_by_class and found.pods_that_fit("broken", 1) == 0


def test_a_request_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        cluster().pods_that_fit("gpu", 0)


def states_of(
    *extra: dict[str, Any], in_flight: dict[str, Any] | None = None, features: Features | None = None
) -> Capacity:
    """One node, five GPUs (g3 tainted NoSchedule, g4 with a None effect); ``in_flight``: a claim
    only the extender's own writes hold (the snapshot's claims, not the cache's)."""
    objects = [
        device_class("gpu", 'device.driver == "driver-a"'),
        node("node-a"),
        resource_slice(
            "a",
            [
                device("g0"),
                device("g1"),
                device("g2"),
                device("g3", taints=[{"key": "broken", "effect": "NoSchedule"}]),
                device("g4", taints=[{"key": "flaky", "effect": "None"}]),
            ],
            pool="node-a",
            node="node-a",
        ),
        *extra,
    ]
    state = ClusterState.from_objects(objects)
    claims = dict(state.claims)
    if in_flight is not None:
        written = ClusterState.from_objects([in_flight]).claims
        claims.update(written)
    return capacity(Snapshot(state, features or Features(), CelEnvironment(), claims=claims))


DRAIN_G0 = device_taint_rule("drain-g0", device="g0")

STATES = {
    "all free but the NoSchedule-tainted one (a None effect keeps nothing)": (
        (),
        None,
        DeviceStates(free=4, tainted=1),
    ),
    "a claim in the cache holds one": (
        (claim("held", allocation=allocated(("driver-a", "node-a", "g0"))),),
        None,
        DeviceStates(free=3, allocated=1, tainted=1),
    ),
    "only the extender's write holds one": (
        (),
        claim("mine", allocation=allocated(("driver-a", "node-a", "g1"))),
        DeviceStates(free=3, in_flight=1, tainted=1),
    ),
    "held and tainted counts as held": (
        (claim("held", allocation=allocated(("driver-a", "node-a", "g3"))),),
        None,
        DeviceStates(free=4, allocated=1),
    ),
    "admin access holds nothing: the device stays free": (
        (claim("watcher", allocation=allocated(("driver-a", "node-a", "g0"), admin=True)),),
        None,
        DeviceStates(free=4, tainted=1),
    ),
    "a DeviceTaintRule's NoExecute taint": ((DRAIN_G0,), None, DeviceStates(free=3, tainted=2)),
}


@pytest.mark.parametrize(("extra", "in_flight", "expected"), STATES.values(), ids=STATES.keys())
def test_each_device_of_a_class_counts_in_one_state(
    extra: tuple[dict[str, Any], ...], in_flight: dict[str, Any] | None, expected: DeviceStates
) -> None:
    found = states_of(*extra, in_flight=in_flight)
    assert found.states_by_class["gpu"] == {"node-a": expected}
    assert found.class_states("gpu") == expected
    assert found.class_states("gpu").total == 5


def test_with_device_taints_off_a_tainted_device_is_free() -> None:
    """DRADeviceTaints off: the allocator ignores taints, and so does the count."""
    found = states_of(DRAIN_G0, features=Features(device_taints=False, device_taint_rules=False))
    assert found.class_states("gpu") == DeviceStates(free=5)
    assert [n.tainted for n in found.nodes] == [0]


def test_node_totals_leave_tainted_devices_out_of_free() -> None:
    (node_a,) = states_of(claim("held", allocation=allocated(("driver-a", "node-a", "g0")))).nodes
    assert (node_a.total, node_a.allocated, node_a.tainted, node_a.free) == (5, 1, 1, 3)


def test_a_tainted_device_is_not_free_for_pods_that_fit() -> None:
    found = states_of()
    assert found.free_by_class["gpu"] == {"node-a": 4}
    assert found.pods_that_fit("gpu", 4) == 1 and found.pods_that_fit("gpu", 5) == 0
    assert {c.product: c.free for c in found.classes if c.device_class == "gpu"} == {"": 4}


STRANDED = {
    "pods of one strand nothing": (1, 0),
    "pods of two: node-a's 4 free leave none, node-b's 2 leave none": (2, 0),
    "pods of four: node-b's 2 free are stranded": (4, 2),
    "pods of eight: all 6 stranded": (8, 6),
}


@pytest.mark.parametrize(("count", "stranded"), STRANDED.values(), ids=STRANDED.keys())
def test_stranded_devices_are_each_nodes_remainder(count: int, stranded: int) -> None:
    # node-a: g1-g3 + net free (4); node-b: h0 + net free (2).
    assert cluster().stranded("gpu", count) == stranded
