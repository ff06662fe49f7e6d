"""Allocate claims from raw objects, in process: the allocator core with its real CEL engine."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from extender.allocator import (
    AllocatedState,
    AllocationError,
    AllocationTimeout,
    Allocator,
    Features,
    Inventory,
    NodeAllocationError,
    NodeInfo,
    Unsatisfiable,
)
from extender.allocator.releases import release_of
from extender.cel import CelEnvironment, CelOptions
from extender.cluster.state import ClusterState

#: All newer gates off, as upstream's stable test table runs.
NO_GATES = "DRAAdminAccess=false,DRAPrioritizedList=false,DRAPartitionableDevices=false,DRADeviceTaints=false,DRAConsumableCapacity=false,DRADeviceBindingConditions=false"


@lru_cache(maxsize=4)
def cel_env(list_attributes: bool = False) -> CelEnvironment:
    return CelEnvironment(CelOptions(list_type_attributes=list_attributes))


@dataclass
class Outcome:
    allocations: list[dict[str, Any]] | None = None
    unsatisfiable: str | None = None
    error: str | None = None
    node_error: str | None = None
    timeout: str | None = None

    def devices(self, index: int = 0) -> list[tuple[str, str]]:
        """(request, device) pairs of claim ``index``."""
        assert self.allocations is not None, self
        return [(r["request"], r["device"]) for r in self.allocations[index]["devices"]["results"]]

    def results(self, index: int = 0) -> list[dict[str, Any]]:
        assert self.allocations is not None, self
        results: list[dict[str, Any]] = self.allocations[index]["devices"]["results"]
        return results


def allocate(
    objects: list[dict[str, Any]],
    claims: list[str] | None = None,
    *,
    node: str = "node-1",
    labels: dict[str, str] | None = None,
    declares_optional_node_operations: bool = False,
    gates: str = "",
    timeout: float | None = None,
    clock: Callable[[], float] | None = None,
    release: int | None = None,
) -> Outcome:
    """``release``: decide as this minor (default 1.37)."""
    features = Features.parse(gates, allow_locked=True, release=release_of(release) if release else None)
    state = ClusterState.from_objects(objects)
    assert not state.problems, state.problems
    inventory = Inventory(state.slices.values(), state.classes, features, state.taint_rules.values())
    in_use = AllocatedState.from_allocations(
        [c.allocation for c in state.claims.values() if c.allocation is not None], features
    )
    ids = itertools.count()
    allocator = Allocator(
        inventory,
        in_use,
        cel_env(features.list_type_attributes),
        new_share_id=lambda: f"share-{next(ids)}",
        **({"clock": clock} if clock else {}),
    )
    wanted = [state.claims[("default", name)] for name in (claims or ["claim-0"])]
    try:
        result = allocator.allocate(
            NodeInfo(node, labels or {}, declares_optional_node_operations), wanted, timeout=timeout
        )
    except AllocationError as exc:
        return Outcome(error=str(exc))
    except NodeAllocationError as exc:
        return Outcome(node_error=str(exc))
    except AllocationTimeout as exc:
        return Outcome(timeout=str(exc))
    if isinstance(result, Unsatisfiable):
        return Outcome(unsatisfiable=result.reason)
    return Outcome(allocations=result)
