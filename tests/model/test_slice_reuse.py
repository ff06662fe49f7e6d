"""A re-read ResourceSlice keeps the device records whose raw content did not change."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from extender.model.dra import DeviceID, ResourceSlice, parse_resource_slice
from extender.model.errors import ObjectError
from tests.builders import attrs, device, resource_slice

Raw = dict[str, Any]


def gpu(name: str, **extra: Any) -> Raw:
    return device(name, attributes=attrs(model="a100", index=0), capacity={"memory": "40Gi"}, **extra)


def base() -> Raw:
    return resource_slice(
        "s",
        [gpu("d0"), gpu("d1", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]), gpu("d2")],
        sharedCounters=[{"name": "set", "counters": {"mem": {"value": "80Gi"}}}],
    )


def reread(change: Callable[[Raw], None]) -> tuple[ResourceSlice, ResourceSlice]:
    """The base slice parsed, then ``change``d and parsed again with the first as previous."""
    first = parse_resource_slice(base())
    raw = base()
    change(raw)
    return first, parse_resource_slice(raw, first)


def changed(change: Callable[[Raw], None]) -> ResourceSlice:
    """The changed slice parsed on its own."""
    raw = base()
    change(raw)
    return parse_resource_slice(raw)


def d1(raw: Raw) -> Raw:
    found: Raw = raw["spec"]["devices"][1]
    return found


def set_attribute(value: dict[str, Any]) -> Callable[[Raw], None]:
    return lambda raw: d1(raw)["attributes"].update(index=value)


# Each change touches device d1 only: d1 must be read afresh, d0 and d2 kept.
DEVICE_CHANGES: dict[str, Callable[[Raw], None]] = {
    "attribute value": set_attribute({"int": 1}),
    "attribute kind": set_attribute({"string": "0"}),
    "attribute added": lambda raw: d1(raw)["attributes"].update(extra={"bool": True}),
    "attribute order": lambda raw: d1(raw).update(attributes=dict(reversed(d1(raw)["attributes"].items()))),
    "capacity value": lambda raw: d1(raw)["capacity"]["memory"].update(value="80Gi"),
    "capacity request policy": lambda raw: d1(raw)["capacity"]["memory"].update(
        requestPolicy={"default": "1Gi", "validRange": {"min": "1Gi"}}
    ),
    "taint effect": lambda raw: d1(raw)["taints"][0].update(effect="NoExecute"),
    "taint removed": lambda raw: d1(raw).pop("taints"),
    "counter consumption": lambda raw: d1(raw).update(
        consumesCounters=[{"counterSet": "set", "counters": {"mem": {"value": "40Gi"}}}]
    ),
    "binding conditions": lambda raw: d1(raw).update(bindingConditions=["ready"]),
    "binding failure conditions": lambda raw: d1(raw).update(bindingFailureConditions=["failed"]),
    "binds to node": lambda raw: d1(raw).update(bindsToNode=True),
    "multiple allocations": lambda raw: d1(raw).update(allowMultipleAllocations=True),
}


@pytest.mark.parametrize("change", DEVICE_CHANGES.values(), ids=DEVICE_CHANGES.keys())
def test_a_changed_device_is_read_again_and_the_others_are_kept(change: Callable[[Raw], None]) -> None:
    first, again = reread(change)
    assert again.devices[0] is first.devices[0] and again.devices[2] is first.devices[2]
    assert again.devices[1] is not first.devices[1]
    assert _content(again.devices[1]) == _content(changed(change).devices[1])
    assert not first.same_content(again)


def _content(d: Any) -> tuple[Any, ...]:
    return (
        d.id,
        list(d.attributes.items()),
        {n: (c.value.text, c.request_policy) for n, c in d.capacity.items()},
        d.consumes_counters,
        d.taints,
        d.binding_conditions,
        d.binding_failure_conditions,
        d.binds_to_node,
        d.allow_multiple_allocations,
    )


@pytest.mark.parametrize("value", [0.0, False], ids=["float", "bool"])
def test_an_int_turned_another_type_equal_in_python_is_read_again_and_refused(value: Any) -> None:
    # 0 == 0.0 == False: a reuse keyed on Python equality would keep the int record.
    with pytest.raises(
        ObjectError, match=r"spec.devices\[1\].attributes.index.int: expected a 64-bit integer"
    ):
        reread(set_attribute({"int": value}))


def move(raw: Raw) -> None:
    devices = raw["spec"]["devices"]
    devices.insert(0, devices.pop())


KEPT: dict[str, tuple[Callable[[Raw], None], list[int]]] = {
    # change -> for each device now, the index of the previous record it must be.
    "resourceVersion only": (lambda raw: raw["metadata"].update(resourceVersion="2"), [0, 1, 2]),
    "labels and annotations": (lambda raw: raw["metadata"].update(labels={"a": "b"}), [0, 1, 2]),
    "a device moved": (move, [2, 0, 1]),
    "a device inserted first": (lambda raw: raw["spec"]["devices"].insert(0, gpu("new")), [-1, 0, 1, 2]),
    "a device removed first": (lambda raw: raw["spec"]["devices"].pop(0), [1, 2]),
    "the generation": (lambda raw: raw["spec"]["pool"].update(generation=2), [0, 1, 2]),
    "the node": (lambda raw: raw["spec"].update(nodeName="node-2"), [0, 1, 2]),
}


@pytest.mark.parametrize(("change", "kept"), KEPT.values(), ids=KEPT.keys())
def test_unchanged_devices_keep_their_records(change: Callable[[Raw], None], kept: list[int]) -> None:
    first, again = reread(change)
    assert [d.name for d in again.devices] == ["new" if i < 0 else first.devices[i].name for i in kept]
    for now, before in zip(again.devices, kept, strict=True):
        assert (now is first.devices[before]) == (before >= 0)


def test_same_content_only_when_nothing_allocation_reads_changed() -> None:
    first, again = reread(lambda raw: raw["metadata"].update(resourceVersion="7"))
    assert first.same_content(again) and again.resource_version == "7"
    for change in (
        lambda raw: raw["spec"]["pool"].update(generation=2),
        lambda raw: raw["spec"]["sharedCounters"][0]["counters"]["mem"].update(value="81Gi"),
        move,
    ):
        first, again = reread(change)
        assert not first.same_content(again)


@pytest.mark.parametrize(
    "spec", [{"driver": "driver-b"}, {"pool": {"name": "pool-2", "generation": 1}}], ids=["driver", "pool"]
)
def test_a_renamed_driver_or_pool_reads_every_device_again(spec: Raw) -> None:
    first, again = reread(lambda raw: raw["spec"].update(spec))
    assert not any(a is b for a, b in zip(first.devices, again.devices, strict=True))
    assert [d.id for d in again.devices] == [
        DeviceID(again.driver, again.pool, name) for name in ("d0", "d1", "d2")
    ]


def test_a_previous_record_serves_one_device_only() -> None:
    raw = resource_slice("s", [gpu("d0"), gpu("d1")])
    first = parse_resource_slice(raw)
    twice = copy.deepcopy(raw)
    twice["spec"]["devices"] = [gpu("x"), gpu("d0"), gpu("d0")]  # a duplicate (an invalid pool)
    again = parse_resource_slice(twice, first)
    assert again.devices[1] is first.devices[0] and again.devices[2] is not first.devices[0]


def test_v1beta1_and_v1_of_the_same_devices_share_records() -> None:
    beta = resource_slice("s", [{"name": "d", "basic": {"attributes": attrs(model="a")}}])
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    first = parse_resource_slice(beta)
    again = parse_resource_slice(resource_slice("s", [device("d", attributes=attrs(model="a"))]), first)
    assert again.devices[0] is first.devices[0]


def test_content_without_a_json_form_is_always_read_again() -> None:
    raw = resource_slice("s", [device("d", vendorSerial=2**70)])  # a field the extender does not read
    first = parse_resource_slice(raw)
    assert first.devices[0].fingerprint is None
    assert parse_resource_slice(copy.deepcopy(raw), first).devices[0] is not first.devices[0]
