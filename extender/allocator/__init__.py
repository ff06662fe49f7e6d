"""The structured DRA allocator: upstream Kubernetes semantics, pure and per node.

Entry points: :class:`Allocator` (``allocate(node, claims)``), :class:`Inventory` (indexed
slices and classes), :class:`AllocatedState` (devices in use) and :class:`Features`.

The names load on first use (PEP 562), so that reading the release and gate tables
(``extender.allocator.releases``, ``.features``) does not import the allocator and CEL: the
command line answers ``--help`` without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from extender.allocator.errors import (
        AllocationError,
        AllocationTimeout,
        AllocatorError,
        NodeAllocationError,
    )
    from extender.allocator.features import FeatureGateError, Features, parse_feature_gates
    from extender.allocator.inventory import Inventory, Pool
    from extender.allocator.search import Allocator, NodeInfo, Unsatisfiable
    from extender.allocator.state import AllocatedState

#: Public name -> the module that defines it.
_HOMES = {
    "AllocatedState": "state",
    "AllocationError": "errors",
    "AllocationTimeout": "errors",
    "Allocator": "search",
    "AllocatorError": "errors",
    "FeatureGateError": "features",
    "Features": "features",
    "Inventory": "inventory",
    "NodeAllocationError": "errors",
    "NodeInfo": "search",
    "Pool": "inventory",
    "Unsatisfiable": "search",
    "parse_feature_gates": "features",
}

__all__ = [
    "AllocatedState",
    "AllocationError",
    "AllocationTimeout",
    "Allocator",
    "AllocatorError",
    "FeatureGateError",
    "Features",
    "Inventory",
    "NodeAllocationError",
    "NodeInfo",
    "Pool",
    "Unsatisfiable",
    "parse_feature_gates",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
