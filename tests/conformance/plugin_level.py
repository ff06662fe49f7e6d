"""Sample cases whose answer at the plugin level differs from the allocator-level expectation.

The shared cases describe what upstream's *allocator* returns. ``simulate`` and ``filter``
answer what kube-scheduler's DynamicResources plugin reports, which wraps the allocator: where
the plugin turns an allocator error into "unschedulable", the case's expectation is replaced
here (the copy in tests/shared_cases stays byte-identical to ../shared), and the original
allocator-level expectation is still checked against the allocator itself.
"""

from __future__ import annotations

from typing import Any

#: case name -> (plugin-level expectation, upstream code path that decides it)
PLUGIN_LEVEL: dict[str, tuple[dict[str, Any], str]] = {
    "unknown-class": (
        {
            "outcome": "unsatisfiable",
            "reasonContains": "request req-0: device class unknown-class does not exist",
        },
        "PreFilter -> validateDeviceClass: a missing DeviceClass is statusUnschedulable (the pod "
        "waits for a DeviceClass event); the allocator never runs",
    ),
    "prioritized-list-disabled": (
        {
            "outcome": "unsatisfiable",
            "reasonContains": "resource claim default/claim-0, request req-0: has subrequests, "
            "but the DRAPrioritizedList feature is disabled",
        },
        "PreFilter: a firstAvailable request with DRAPrioritizedList off is statusUnschedulable",
    ),
    "partitionable-devices-device-counter-consumption-references-unknown-counter-set": (
        {"outcome": "unsatisfiable", "reasonContains": "invalid resource pools were encountered"},
        "Filter: Allocate's error wraps structured.ErrFailedAllocationOnNode, which Filter reports "
        "as statusUnschedulable for this node (not an error for the pod)",
    ),
}
