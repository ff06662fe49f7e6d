"""Named case tables for the driver catalogue (examples/drivers/, issue 53), one module per driver.

Each module holds ``FITS`` (demo pods that fit: the nodes and, per request, the devices each gets) and
``FITS_NOWHERE`` (demo pods no node can take, and what each node says). Every module in this package is
collected, so a driver's tables live beside no other driver's.
"""

from __future__ import annotations

import importlib
import pkgutil

#: (case, state, pod, {node: {request: devices}} where it fits, nodes where it does not: "node" (it
#: publishes no devices) or "node: what its reason says").
Fits = tuple[str, str, str, dict[str, dict[str, list[str]]], list[str]]
#: (case, state, pod, {node: what its reason or error says}).
FitsNowhere = tuple[str, str, str, dict[str, str]]


def first_devices(
    state: str,
    driver: str,
    nodes: list[str],
    unfit: list[str],
    cases: list[tuple[str, str, list[str]]],
    prefix: str = "gpu",
) -> list[Fits]:
    """Cases where each request gets the next device of every node in ``nodes`` (``gpu-0``,
    ``gpu-1``, ... in the node's pool) and no node of ``unfit`` fits."""
    return [
        (
            f"{state} {case}",
            state,
            pod,
            {node: {r: [f"{driver}/{node}/{prefix}-{i}"] for i, r in enumerate(requests)} for node in nodes},
            unfit,
        )
        for case, pod, requests in cases
    ]


def collect() -> tuple[list[Fits], list[FitsNowhere]]:
    fits: list[Fits] = []
    nowhere: list[FitsNowhere] = []
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        tables = importlib.import_module(f"{__name__}.{module}")
        fits += getattr(tables, "FITS", [])
        nowhere += getattr(tables, "FITS_NOWHERE", [])
    return fits, nowhere
