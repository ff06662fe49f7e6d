"""The allocator's answers other than success.

Upstream has three outcomes per node: success, "unsatisfiable" (no error, no result) and an
error. Errors split into fatal ones (the pod's scheduling attempt fails: bad class, CEL error,
size limits, "All" over an incomplete pool ...) and node-local ones (invalid pools), which make
only this node unschedulable.
"""

from __future__ import annotations


class AllocatorError(Exception):
    """Base class of allocator errors."""


class AllocationError(AllocatorError):
    """Fatal for the attempt (upstream: Filter returns Error)."""


class NodeAllocationError(AllocatorError):
    """Only this node cannot be used (upstream: wraps ErrFailedAllocationOnNode)."""


class AllocationTimeout(AllocatorError):
    """The per-call time budget ran out (upstream: "timed out trying to allocate devices")."""
