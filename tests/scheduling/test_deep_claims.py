"""Claims nested deeper than the extender carries (opaque parameters, drivers' status data): a pod
using one gets the reason, a device such a claim holds is never given to another pod, and what
the extender reads it can always write back, however deep its allocation copies the config."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from extender.allocator.releases import release_of
from extender.model import nesting
from tests.builders import allocated, claim, device, device_class, node, pod, reserve, resource_slice
from tests.scheduling.on_store import engine_on_store

RELEASE = release_of(36)


def parameters(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def depth_of(value: Any) -> int:
    """Levels of containers (a scalar: 0, an empty object: 1)."""
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list):
        return 0
    return 1 + max(map(depth_of, value), default=0)


def with_config(obj: dict[str, Any], depth: int) -> dict[str, Any]:
    obj["spec"]["devices"]["config"] = [{"opaque": {"driver": "driver-a", "parameters": parameters(depth)}}]
    return obj


def tenant_claim(deep: str) -> dict[str, Any]:
    """Allocated d0 (by the in-tree plugin, say) and in use by a bound pod; too deep to read where
    ``deep`` says, but not too deep for the in-memory API server (orjson) to hold."""
    for depth in range(200, 260):
        held = reserve(claim("tenant", allocation=allocated(("driver-a", "pool-1", "d0"))), "tenant-pod")
        if deep == "parameters":
            with_config(held, depth)
        else:  # a driver's status data
            held["status"]["devices"] = [
                {"driver": "driver-a", "pool": "pool-1", "device": "d0", "data": parameters(depth)}
            ]
        if nesting.unreadable(held) is not None:
            assert depth_of(held) <= nesting.MAX_DEPTH
            return held
    raise AssertionError("no depth between readable and unencodable")


@pytest.mark.parametrize("deep", ["parameters", "driver status data"])
def test_a_device_held_by_a_claim_too_deep_to_read_is_not_given_again(deep: str) -> None:
    objects = [
        device_class(),
        node("node-1"),
        resource_slice("s", [device("d0")]),
        tenant_claim(deep),
        pod("tenant-pod", ["tenant"], node_name="node-1", scheduler="default-scheduler"),
        claim("mine"),
        pod("mine-pod", ["mine"]),
    ]
    engine, store = engine_on_store(objects, "", RELEASE)
    assert nesting.REASON in engine.state.broken_claims[("default", "tenant")]
    mine = engine.state.pods[("default", "mine-pod")]
    result = engine.filter(mine, ["node-1"])
    assert result.passed == [] and "node-1" in result.unresolvable, result
    assert asyncio.run(engine.bind("default", "mine-pod", "uid-mine-pod", "node-1")) != ""
    assert not (store.get("ResourceClaim", "default", "mine").get("status") or {}).get("allocation")
    # A pod using the deep claim itself is told why.
    user = engine.state.pods[("default", "tenant-pod")]
    assert nesting.REASON in engine.filter(user, ["node-1"]).error


def test_what_is_read_can_be_written_back_with_the_config_copied_deeper() -> None:
    """The allocation copies a class's config two levels deeper than the class has it, a claim's
    one level: an object readable at the limit still encodes once allocated."""
    # Find the deepest parameters a class may have: the class is then READABLE_DEPTH deep.
    klass = device_class()
    depth = 1
    while True:
        klass["spec"]["config"] = [{"opaque": {"driver": "driver-a", "parameters": parameters(depth + 1)}}]
        if nesting.unreadable(klass) is not None:
            break
        depth += 1
    klass["spec"]["config"] = [{"opaque": {"driver": "driver-a", "parameters": parameters(depth)}}]
    assert depth_of(klass) == nesting.READABLE_DEPTH
    objects = [klass, node("node-1"), resource_slice("s", [device("d0")]), claim("c"), pod("p", ["c"])]
    engine, store = engine_on_store(objects, "", RELEASE)
    assert asyncio.run(engine.bind("default", "p", "uid-p", "node-1")) == ""
    written = store.get("ResourceClaim", "default", "c")
    assert written["status"]["allocation"]["devices"]["results"][0]["device"] == "d0"
    assert depth_of(written) == nesting.MAX_DEPTH  # the most orjson encodes
