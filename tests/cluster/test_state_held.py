"""extender/cluster/state.py ``held`` and ``as_list_json``: the cache's objects as read, every kind
(what /debug/snapshot and ``kubectl dra snapshot`` write, and ``simulate`` reads back)."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from extender.cluster.state import KINDS, ClusterState, as_list_json, object_key
from extender.model.core import parse_pod
from tests.builders import (
    allocated,
    claim,
    device,
    device_class,
    device_taint_rule,
    node,
    pod,
    pod_disruption_budget,
    resource_slice,
)

TAINT_RULE = device_taint_rule("drain-d0", device="d0")
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
    state = ClusterState.from_objects(copy.deepcopy(objects))  # reading them must not change them
    assert state.problems == []
    listed = json.loads(as_list_json(state.held()))
    assert listed["apiVersion"] == "v1" and listed["kind"] == "List"
    assert {identity(o): o for o in listed["items"]} == {identity(o): o for o in objects}


def secret_pod() -> dict[str, Any]:
    """A pod with everything a snapshot leaves out, and everything scheduling reads."""
    p = pod("p", claims=["c"], node_name="n", priority=7, labels={"app": "p"})
    p["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{...password...}"}
    p["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    p["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "db"}}]
    p["spec"]["imagePullSecrets"] = [{"name": "registry"}]
    for container in p["spec"]["containers"]:
        container.update(
            env=[{"name": "PASSWORD", "value": "hunter2"}],
            envFrom=[{"secretRef": {"name": "db"}}],
            command=["sh", "-c", "echo hunter2"],
            args=["--token=hunter2"],
            volumeMounts=[{"name": "s", "mountPath": "/s"}],
            livenessProbe={
                "httpGet": {"path": "/", "httpHeaders": [{"name": "X-Token", "value": "hunter2"}]}
            },
        )
    p["status"] = {
        "phase": "Running",
        "message": "hunter2",
        "containerStatuses": [
            {
                "name": "c",
                "state": {"terminated": {"message": "token hunter2"}},
                "lastState": {"terminated": {"message": "hunter2"}},
                "resources": {"requests": {"cpu": "2"}},
                "allocatedResources": {"cpu": "2"},
            }
        ],
        "resourceClaimStatuses": [{"name": "c", "resourceClaimName": "c"}],
    }
    p["spec"]["initContainers"] = [
        {"name": "init", "env": [{"name": "K", "value": "hunter2"}], "restartPolicy": "Always"}
    ]
    return p


def test_a_pod_is_shown_without_secrets_and_reads_as_the_same_pod() -> None:
    original = secret_pod()
    state = ClusterState.from_objects([copy.deepcopy(original)])
    (shown,) = json.loads(as_list_json(state.held()))["items"]
    assert "hunter2" not in json.dumps(shown) and "db" not in json.dumps(shown)
    assert "annotations" not in shown["metadata"] and "volumes" not in shown["spec"]
    assert shown["spec"]["containers"][0]["name"] == original["spec"]["containers"][0]["name"]
    # Everything the extender reads of it is the same: the parsed pod but for its raw form.
    read, again = parse_pod(original), parse_pod(shown)
    assert dataclasses.replace(read, raw={}) == dataclasses.replace(again, raw={})
    assert state.pods[("default", "p")].raw == original  # the cache keeps the pod as read


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
