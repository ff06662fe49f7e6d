"""Inventory: node signatures, the ids the service's memo keys are built from."""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from extender.allocator import Features, inventory
from extender.allocator.inventory import Inventory
from extender.cluster.state import ClusterState
from extender.model.dra import Device
from tests.builders import attrs, device, resource_slice


class ModelProjection:
    """Devices as a selector on ``model`` sees them."""

    key: Hashable = "model"

    def of(self, d: Device) -> Hashable:
        return d.attribute("driver-a/model")


def node_inventory(models: dict[str, str]) -> Inventory:
    objects = [
        resource_slice(f"s-{n}", [device("d0", attributes=attrs(model=m))], pool=n, node=n)
        for n, m in models.items()
    ]
    state = ClusterState.from_objects(objects)
    return Inventory(state.slices.values(), {}, Features())


def test_look_alike_nodes_share_a_signature() -> None:
    inv = node_inventory({"n1": "a", "n2": "a", "n3": "b"})
    sig = {n: inv.node_signature(n, {}, ModelProjection()) for n in ("n1", "n2", "n3")}
    assert sig["n1"] == sig["n2"] != sig["n3"]


def test_signature_ids_are_never_reused_after_the_cache_is_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory, "MAX_CACHED_SIGNATURES", 1)
    inv = node_inventory({"n1": "a", "n2": "b", "n3": "c", "n4": "d"})
    ids = [inv.node_signature(n, {}, ModelProjection()) for n in ("n1", "n2", "n3", "n4")]
    assert len(set(ids)) == 4  # four different devices: four ids, whatever was cleared in between
