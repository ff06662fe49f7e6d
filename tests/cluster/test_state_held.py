"""extender/cluster/state.py ``held`` and ``as_list_json``: the cache's objects as read, every kind
(what /debug/snapshot and ``kubectl dra snapshot`` write, and ``simulate`` reads back)."""

from __future__ import annotations

import json
from typing import Any

from extender.cluster.state import KINDS, ClusterState, as_list_json, object_key
from tests.builders import (
    allocated,
    claim,
    device,
    device_class,
    node,
    pod,
    pod_disruption_budget,
    resource_slice,
)

TAINT_RULE = {
    "apiVersion": "resource.k8s.io/v1beta2",
    "kind": "DeviceTaintRule",
    "metadata": {"name": "drain-d0"},
    "spec": {
        "deviceSelector": {"driver": "driver-a", "device": "d0"},
        "taint": {"key": "drain", "effect": "NoExecute"},
    },
}
POD_GROUP = {
    "apiVersion": "scheduling.k8s.io/v1alpha2",
    "kind": "PodGroup",
    "metadata": {"name": "g", "namespace": "default", "uid": "u"},
    "spec": {"resourceClaims": [{"name": "a", "resourceClaimName": "c"}]},
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "t", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "c"}}]}}},
}


def one_of_each() -> list[dict[str, Any]]:
    return [
        node("n"),
        resource_slice("s", [device("d0", attributes={"big": {"int": 2**40}})], pool="n", node="n"),
        device_class("c", "true"),
        TAINT_RULE,
        TEMPLATE,
        claim("c", allocation=allocated(("driver-a", "n", "d0"))),
        pod("p", claims=["c"]),
        pod_disruption_budget("b", {"app": "x"}, allowed=1),
        POD_GROUP,
    ]


def identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (str(obj["kind"]), *object_key(obj))


def test_every_kind_held_comes_back_as_it_was_read() -> None:
    objects = one_of_each()
    assert {o["kind"] for o in objects} == KINDS  # the case covers every kind the cache holds
    state = ClusterState.from_objects(objects)
    assert state.problems == []
    listed = json.loads(as_list_json(state.held()))
    assert listed["apiVersion"] == "v1" and listed["kind"] == "List"
    assert {identity(o): o for o in listed["items"]} == {identity(o): o for o in objects}


def test_a_replaced_object_is_held_as_read_the_second_time() -> None:
    state = ClusterState.from_objects([node("n"), resource_slice("s", [device("d0")], pool="n", node="n")])
    again = resource_slice("s", [device("d0"), device("d1")], pool="n", node="n")
    state.apply(again)
    (held,) = [o for o in json.loads(as_list_json(state.held()))["items"] if o["kind"] == "ResourceSlice"]
    assert held == again


def test_a_removed_object_is_no_longer_held() -> None:
    state = ClusterState.from_objects(one_of_each())
    state.remove(POD_GROUP)
    assert ("PodGroup", "default", "g") not in {
        identity(o) for o in json.loads(as_list_json(state.held()))["items"]
    }
