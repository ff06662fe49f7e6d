"""dra-extender: Kubernetes Dynamic Resource Allocation for any kube-scheduler, as an HTTP extender."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """``__version__`` is read from the installed metadata on first use (importlib.metadata
    costs milliseconds every command would pay)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import metadata

    try:
        version = metadata.version("dra-extender")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "0.0.0+unknown"
    globals()["__version__"] = version
    return version
