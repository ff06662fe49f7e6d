"""The structured DRA allocator: upstream Kubernetes semantics, pure and per node.

Entry points: :class:`Allocator` (``allocate(node, claims)``), :class:`Inventory` (indexed
slices and classes), :class:`AllocatedState` (devices in use) and :class:`Features`.
"""

from extender.allocator.errors import AllocationError, AllocationTimeout, AllocatorError, NodeAllocationError
from extender.allocator.features import FeatureGateError, Features, parse_feature_gates
from extender.allocator.inventory import Inventory, Pool
from extender.allocator.search import Allocator, NodeInfo, Unsatisfiable
from extender.allocator.state import AllocatedState

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
