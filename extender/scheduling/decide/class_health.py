"""DeviceClasses whose selectors do not compile: every pod asking for such a class fails to
schedule with the compile message (as in-tree), so operators want to know while it lasts, not
only when the first compile error is counted."""

from __future__ import annotations

from extender.cel import CelCompileError, CelEnvironment
from extender.cluster.state import ClusterState


def classes_not_compiling(state: ClusterState, cel: CelEnvironment) -> list[str]:
    """Names of the cached DeviceClasses with a selector that does not compile (compiled as the
    allocator compiles them: through the environment's cache)."""
    return sorted(
        name
        for name, device_class in state.classes.items()
        if any(
            isinstance(cel.compile(selector.expression), CelCompileError)
            for selector in device_class.selectors
            if selector.expression is not None
        )
    )
