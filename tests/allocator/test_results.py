"""What the allocation result says: config propagation and node selectors."""

from __future__ import annotations

from tests.allocator.harness import allocate
from tests.builders import claim, device, device_class, exact, first_available, resource_slice

OPAQUE_A = {"opaque": {"driver": "driver-a", "parameters": {"a": 1}}}
OPAQUE_B = {"opaque": {"driver": "driver-a", "parameters": {"b": 2}}}


def test_class_config_once_per_class_with_the_requests_using_it() -> None:
    objects = [
        device_class("class-a", config=[OPAQUE_A]),
        device_class("class-b"),
        resource_slice("s", [device(f"d{i}") for i in range(3)]),
        claim(requests=[exact("r1"), exact("r2", cls="class-b"), exact("r3")]),
    ]
    config = allocate(objects).allocations[0]["devices"]["config"]  # type: ignore[index]
    assert config == [{"source": "FromClass", "requests": ["r1", "r3"], **OPAQUE_A}]


def test_config_covering_every_request_has_its_request_list_cleared() -> None:
    objects = [
        device_class("class-a", config=[OPAQUE_A]),
        resource_slice("s", [device("d0"), device("d1")]),
        claim(requests=[exact("r1"), exact("r2")]),
    ]
    config = allocate(objects).allocations[0]["devices"]["config"]  # type: ignore[index]
    assert config == [{"source": "FromClass", **OPAQUE_A}]


def test_claim_configs_follow_the_chosen_subrequest() -> None:
    objects = [
        device_class(),
        resource_slice("s", [device("d0"), device("d1")]),
        claim(
            requests=[first_available("r", exact("big", count=2), exact("small")), exact("other")],
            config=[
                {"requests": ["r/big"], **OPAQUE_A},
                {"requests": ["r/small"], **OPAQUE_B},
                {**OPAQUE_A},
            ],
        ),
    ]
    config = allocate(objects).allocations[0]["devices"]["config"]  # type: ignore[index]
    assert config == [
        {"source": "FromClaim", "requests": ["r/small"], **OPAQUE_B},
        {"source": "FromClaim", **OPAQUE_A},
    ]


def test_node_selectors_of_network_attached_slices_are_merged() -> None:
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["1"]}]}]}
    objects = [
        device_class(),
        resource_slice("s1", [device("d1")], pool="p1", nodeSelector=zone),
        resource_slice("s2", [device("d2")], pool="p2", nodeSelector=rack),
        resource_slice("s3", [device("d3")], pool="p3", nodeSelector=zone),
        claim(requests=[exact(count=3)]),
    ]
    selector = allocate(objects, labels={"zone": "a", "rack": "1"}).allocations[0]["nodeSelector"]  # type: ignore[index]
    assert selector == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    zone["nodeSelectorTerms"][0]["matchExpressions"][0],
                    rack["nodeSelectorTerms"][0]["matchExpressions"][0],
                ]
            }
        ]
    }


def test_one_node_local_device_pins_the_allocation_to_the_node() -> None:
    zone = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
    objects = [
        device_class(),
        resource_slice("net", [device("n")], pool="p1", nodeSelector=zone),
        resource_slice("local", [device("l")], pool="p2"),
        claim(requests=[exact(count=2)]),
    ]
    selector = allocate(objects, labels={"zone": "a"}).allocations[0]["nodeSelector"]  # type: ignore[index]
    assert selector["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    ]
