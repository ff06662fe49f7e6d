"""Feature-gated allocation: admin access, taints, partitionable devices, consumable capacity, binding conditions."""

from __future__ import annotations

import pytest

from tests.allocator.harness import NO_GATES, allocate
from tests.builders import (
    allocated,
    attrs,
    claim,
    device,
    device_class,
    device_taint_rule,
    exact,
    resource_slice,
)

A = device_class()


def in_use(*names: str, **kw: object) -> dict[str, object]:
    return claim("held", allocation=allocated(*[("driver-a", "pool-1", n) for n in names], **kw))  # type: ignore[arg-type]


# --- admin access ------------------------------------------------------------------------------


def test_admin_access_ignores_devices_in_use_and_is_marked() -> None:
    out = allocate(
        [A, resource_slice("s", [device("d")]), in_use("d"), claim(requests=[exact(adminAccess=True)])]
    )
    assert out.results() == [
        {"request": "req-0", "driver": "driver-a", "pool": "pool-1", "device": "d", "adminAccess": True}
    ]


def test_admin_access_cannot_take_one_device_twice_in_a_claim() -> None:
    objects = [
        A,
        resource_slice("s", [device("d")]),
        claim(requests=[exact("a", adminAccess=True), exact("b", adminAccess=True)]),
    ]
    assert allocate(objects).unsatisfiable


def test_admin_pick_blocks_later_non_admin_request_in_the_same_call() -> None:
    objects = [
        A,
        resource_slice("s", [device("d")]),
        claim("admin", requests=[exact(adminAccess=True)]),
        claim("user"),
    ]
    assert allocate(objects, ["admin", "user"]).unsatisfiable
    assert allocate(objects, ["user", "admin"]).allocations is not None


def test_admin_access_false_is_not_marked() -> None:
    out = allocate([A, resource_slice("s", [device("d")]), claim(requests=[exact(adminAccess=False)])])
    assert "adminAccess" not in out.results()[0]


# --- taints ------------------------------------------------------------------------------------

NO_SCHEDULE = [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]


def test_untolerated_taints_block_and_tolerations_are_copied() -> None:
    objects = [A, resource_slice("s", [device("tainted", taints=NO_SCHEDULE), device("clean")]), claim()]
    assert allocate(objects).devices() == [("req-0", "clean")]
    toleration = {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}
    objects[-1] = claim(requests=[exact(tolerations=[toleration])])
    out = allocate(objects)
    assert out.devices() == [("req-0", "tainted")]
    assert out.results()[0]["tolerations"] == [toleration]


TOLERATIONS = [
    ("equal-value", {"key": "maintenance", "operator": "Equal", "value": "true"}, True),
    ("empty-operator-is-equal", {"key": "maintenance", "value": "true"}, True),
    ("wrong-value", {"key": "maintenance", "value": "false"}, False),
    ("wrong-effect", {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}, False),
    ("empty-key-exists", {"operator": "Exists"}, True),
]


def test_toleration_matching() -> None:
    for name, toleration, tolerated in TOLERATIONS:
        objects = [
            A,
            resource_slice("s", [device("tainted", taints=NO_SCHEDULE)]),
            claim(requests=[exact(tolerations=[toleration])]),
        ]
        assert (allocate(objects).allocations is not None) == tolerated, name


def test_none_effect_and_gate_off_ignore_taints() -> None:
    none_taint = [{"key": "k", "value": "v", "effect": "None"}]
    assert allocate([A, resource_slice("s", [device("d", taints=none_taint)]), claim()]).allocations
    assert allocate(
        [A, resource_slice("s", [device("d", taints=NO_SCHEDULE)]), claim()], gates=NO_GATES
    ).allocations


def test_device_taint_rules_add_taints() -> None:
    rule = device_taint_rule("drain-d0", device="d0")
    objects = [A, resource_slice("s", [device("d0"), device("d1")]), rule, claim()]
    assert allocate(objects).devices() == [("req-0", "d1")]
    assert allocate(objects, gates="DRADeviceTaintRules=false").devices() == [("req-0", "d0")]


def taint_rule(selector: dict[str, str] | None) -> dict[str, object]:
    spec: dict[str, object] = {"taint": {"key": "drain", "effect": "NoSchedule"}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": spec,
    }


#: name, deviceSelector, devices left untainted out of driver-a pool-1 d0/d1
TAINT_RULE_SELECTION = [
    ("by device", {"device": "d0"}, ["d1"]),
    ("by pool", {"pool": "pool-1"}, []),
    ("other pool", {"pool": "elsewhere"}, ["d0", "d1"]),
    ("other driver", {"driver": "driver-b"}, ["d0", "d1"]),
    ("empty selector matches all (upstream tracker behaviour)", {}, []),
    ("absent selector matches all", None, []),
]


@pytest.mark.parametrize(
    ("name", "selector", "free"), TAINT_RULE_SELECTION, ids=[c[0] for c in TAINT_RULE_SELECTION]
)
def test_device_taint_rule_selection(name: str, selector: dict[str, str] | None, free: list[str]) -> None:
    objects = [
        A,
        resource_slice("s", [device("d0"), device("d1")]),
        taint_rule(selector),
        claim(requests=[exact(count=2)]),
    ]
    assert bool(allocate(objects).unsatisfiable) == (len(free) < 2), name
    one = [A, resource_slice("s", [device("d0"), device("d1")]), taint_rule(selector), claim()]
    outcome = allocate(one)
    if free:
        assert [d for _, d in outcome.devices()] == free[:1], name
    else:
        assert outcome.unsatisfiable and "2 tainted and not tolerated" in outcome.unsatisfiable, name


def test_admin_access_does_not_bypass_taints() -> None:
    objects = [
        A,
        resource_slice("s", [device("d", taints=NO_SCHEDULE)]),
        claim(requests=[exact(adminAccess=True)]),
    ]
    assert allocate(objects).unsatisfiable


# --- partitionable devices -----------------------------------------------------------------------


def partitions(*consumption: str, counter: str = "8Gi") -> list[dict[str, object]]:
    counters = resource_slice(
        "counters", None, count=2, sharedCounters=[{"name": "set", "counters": {"mem": {"value": counter}}}]
    )
    devices = [
        device(f"p{i}", consumesCounters=[{"counterSet": "set", "counters": {"mem": {"value": c}}}])
        for i, c in enumerate(consumption)
    ]
    return [counters, resource_slice("parts", devices, count=2)]


def test_counters_limit_partitions() -> None:
    objects = [A, *partitions("4Gi", "4Gi", "4Gi"), claim(requests=[exact(count=3)])]
    assert allocate(objects).unsatisfiable
    objects[-1] = claim(requests=[exact(count=2)])
    assert allocate(objects).devices() == [("req-0", "p0"), ("req-0", "p1")]


def test_counters_subtract_allocated_devices() -> None:
    objects = [A, *partitions("4Gi", "4Gi", "4Gi"), in_use("p0"), claim(requests=[exact(count=2)])]
    assert allocate(objects).unsatisfiable


def test_overcommitted_counter_blocks_every_consumer() -> None:
    objects = [A, *partitions("6Gi", "6Gi", "1Gi"), in_use("p0", "p1"), claim()]
    assert allocate(objects).unsatisfiable


def test_partitionable_gate_off_ignores_counter_devices_but_not_others() -> None:
    objects = [A, *partitions("4Gi"), resource_slice("plain", [device("plain")], pool="pool-2"), claim()]
    assert allocate(objects, gates=NO_GATES).devices() == [("req-0", "plain")]


def test_unknown_counter_set_makes_the_pool_invalid() -> None:
    bad = resource_slice(
        "parts", [device("p", consumesCounters=[{"counterSet": "nope", "counters": {"mem": {"value": "1"}}}])]
    )
    assert "invalid resource pools" in (allocate([A, bad, claim()]).node_error or "")


# --- consumable capacity -------------------------------------------------------------------------


def shared_device(name: str = "shared", memory: object = "8Gi") -> dict[str, object]:
    slots = {"value": "4", "requestPolicy": {"default": "1", "validRange": {"min": "1"}}}
    return device(name, allowMultipleAllocations=True, capacity={"memory": memory, "slots": slots})


def test_unrequested_capacity_without_policy_consumes_everything() -> None:
    dev = device("shared", allowMultipleAllocations=True, capacity={"memory": "8Gi", "slots": "4"})
    objects = [
        A,
        resource_slice("s", [dev]),
        claim(
            requests=[
                exact("a", capacity={"requests": {"memory": "2Gi"}}),
                exact("b", capacity={"requests": {"memory": "2Gi"}}),
            ]
        ),
    ]
    assert "out of capacity" in (allocate(objects).unsatisfiable or "")


def test_shared_device_serves_several_requests_with_share_ids_and_all_capacities() -> None:
    objects = [
        A,
        resource_slice("s", [shared_device()]),
        claim(
            requests=[
                exact("a", capacity={"requests": {"memory": "2Gi"}}),
                exact("b", capacity={"requests": {"memory": "2Gi"}}),
            ]
        ),
    ]
    results = allocate(objects).results()
    assert [r["device"] for r in results] == ["shared", "shared"]
    assert results[0]["shareID"] != results[1]["shareID"]
    assert results[0]["consumedCapacity"] == {"memory": "2Gi", "slots": "1"}


def test_shares_add_up_to_the_capacity() -> None:
    held = claim(
        "held", allocation=allocated(("driver-a", "pool-1", "shared"), share="s1", consumed={"memory": "7Gi"})
    )
    objects = [
        A,
        resource_slice("s", [shared_device()]),
        held,
        claim(requests=[exact(capacity={"requests": {"memory": "2Gi"}})]),
    ]
    assert allocate(objects).unsatisfiable
    objects[-1] = claim(requests=[exact(capacity={"requests": {"memory": "1Gi"}})])
    assert allocate(objects).allocations


def test_range_policy_rounds_up_and_rejects_above_max() -> None:
    policy = {
        "value": "10Gi",
        "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "max": "4Gi", "step": "1Gi"}},
    }
    dev = device("shared", allowMultipleAllocations=True, capacity={"memory": policy})
    objects = [
        A,
        resource_slice("s", [dev]),
        claim(requests=[exact(capacity={"requests": {"memory": "1500Mi"}})]),
    ]
    assert allocate(objects).results()[0]["consumedCapacity"] == {"memory": "2Gi"}
    objects[-1] = claim(requests=[exact(capacity={"requests": {"memory": "5Gi"}})])
    assert allocate(objects).unsatisfiable


def test_valid_values_policy_picks_the_next_value() -> None:
    policy = {"value": "10Gi", "requestPolicy": {"default": "1Gi", "validValues": ["1Gi", "4Gi", "8Gi"]}}
    dev = device("shared", allowMultipleAllocations=True, capacity={"memory": policy})
    objects = [
        A,
        resource_slice("s", [dev]),
        claim(requests=[exact(capacity={"requests": {"memory": "3Gi"}})]),
    ]
    assert allocate(objects).results()[0]["consumedCapacity"] == {"memory": "4Gi"}


def test_dedicated_devices_check_but_do_not_record_capacity() -> None:
    objects = [
        A,
        resource_slice("s", [device("d", capacity={"memory": "8Gi"})]),
        claim(requests=[exact(capacity={"requests": {"memory": "4Gi"}})]),
    ]
    result = allocate(objects).results()[0]
    assert "consumedCapacity" not in result and "shareID" not in result
    objects[-1] = claim(requests=[exact(capacity={"requests": {"memory": "16Gi"}})])
    assert allocate(objects).unsatisfiable
    objects[-1] = claim(requests=[exact(capacity={"requests": {"unknown": "1"}})])
    assert allocate(objects).unsatisfiable


def test_exclusively_held_multi_allocatable_device_is_not_shared() -> None:
    objects = [A, resource_slice("s", [shared_device()]), in_use("shared"), claim()]
    assert allocate(objects).unsatisfiable


def test_cel_sees_allow_multiple_allocations() -> None:
    cls = device_class(expression="device.allowMultipleAllocations")
    objects = [cls, resource_slice("s", [device("plain"), shared_device()]), claim()]
    assert allocate(objects).devices() == [("req-0", "shared")]


# --- binding conditions ---------------------------------------------------------------------------


def test_pools_with_binding_conditions_come_last_and_copy_conditions() -> None:
    objects = [
        A,
        resource_slice(
            "a",
            [device("slow", bindingConditions=["Ready"], bindingFailureConditions=["Failed"])],
            pool="a-pool",
        ),
        resource_slice("b", [device("fast")], pool="b-pool"),
        claim(requests=[exact(count=2)]),
    ]
    results = allocate(objects).results()
    assert [r["device"] for r in results] == ["fast", "slow"]
    assert results[1]["bindingConditions"] == ["Ready"] and results[1]["bindingFailureConditions"] == [
        "Failed"
    ]


def test_binding_condition_devices_need_the_gate() -> None:
    objects = [A, resource_slice("s", [device("slow", bindingConditions=["Ready"])]), claim()]
    assert allocate(objects, gates="DRADeviceBindingConditions=false").unsatisfiable


def test_binds_to_node_pins_network_attached_devices_to_the_node() -> None:
    objects = [
        A,
        resource_slice("s", [device("d", bindsToNode=True, bindingConditions=["Attached"])], allNodes=True),
        claim(),
    ]
    selector = allocate(objects).allocations[0]["nodeSelector"]  # type: ignore[index]
    assert selector == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    }


def test_attributes_builder_sanity() -> None:
    assert attrs(a=1, b="x", c=True, d=("version", "1.0.0")) == {
        "a": {"int": 1},
        "b": {"string": "x"},
        "c": {"bool": True},
        "d": {"version": "1.0.0"},
    }


#: (requested, consumedCapacity written) — upstream calculateConsumedCapacity returns the request's
#: own resource.Quantity (no policy, or validValues above every value), so its String() keeps the
#: request's format; a stepped validRange builds resource.NewQuantity(val, BinarySI).
CONSUMED_FORMATS = [
    ("no-policy-decimal-exponent", None, "12e3", "12e3"),
    ("no-policy-decimal-si", None, "12k", "12k"),
    ("no-policy-binary", None, "3Gi", "3Gi"),
    ("no-policy-normalized", None, "1000m", "1"),
    ("stepped-range-is-binary-si", {"validRange": {"min": "1Ki", "step": "1Ki"}}, "1500", "2Ki"),
    ("stepped-range-small-falls-back-to-decimal", {"validRange": {"min": "1", "step": "2"}}, "2", "3"),
]


@pytest.mark.parametrize(
    ("policy", "requested", "written"),
    [c[1:] for c in CONSUMED_FORMATS],
    ids=[c[0] for c in CONSUMED_FORMATS],
)
def test_consumed_capacity_echoes_the_request_format(
    policy: dict[str, object] | None, requested: str, written: str
) -> None:
    cap: dict[str, object] = {"value": "10Gi"}
    if policy:
        cap["requestPolicy"] = policy
    dev = device("shared", allowMultipleAllocations=True, capacity={"memory": cap})
    objects = [
        A,
        resource_slice("s", [dev]),
        claim(requests=[exact(capacity={"requests": {"memory": requested}})]),
    ]
    assert allocate(objects).results()[0]["consumedCapacity"] == {"memory": written}
