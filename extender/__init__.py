"""dra-extender: Kubernetes Dynamic Resource Allocation for any kube-scheduler, as an HTTP extender."""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("dra-extender")
except _metadata.PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0.0.0+unknown"
