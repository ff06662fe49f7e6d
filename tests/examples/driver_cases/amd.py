"""ROCm/k8s-gpu-dra-driver (gpu.amd.com) at commit 2622427: whole GPUs (SPX) and partitions (CPX)."""

from __future__ import annotations

from tests.examples.driver_cases import Fits, FitsNowhere

#: Both GPU nodes' first device by name is gpu-1-128: a whole GPU on the SPX node, the partition on the
#: PCI function of the first GPU on the CPX node (the class selects every device of the driver).
GPU_NODES = ["amd-node-spx", "amd-node-cpx"]
FITS: list[Fits] = [
    (
        f"amd-gpu {case}",
        "amd-gpu",
        pod,
        {node: {"gpu": [f"gpu.amd.com/{node}/gpu-1-128"]} for node in GPU_NODES},
        ["cpu-node"],
    )
    for case, pod in [
        ("example: one GPU from a template", "gpu-test/pod1"),
        ("same-pod-multiple-containers-share: one GPU, two containers", "gpu-test-containers/pod1"),
        ("multiple-pod-share pod1: a shared ResourceClaim", "gpu-test-pods/pod1"),
        ("multiple-pod-share pod2: the same shared ResourceClaim", "gpu-test-pods/pod2"),
    ]
]


def _partitions(constraint: str, claim: str) -> dict[str, str]:
    """What each node says about two partitions under a constraint on deviceID, which partitions lack."""
    return {
        # The 64 partitions match the selector; the constraint refuses each of them for p0.
        "amd-node-cpx": f"claim {claim}, request p0: needs 1 device; 64 match, 64 excluded by a constraint",
        # Whole GPUs only: the type selector wants "amdgpu-partition".
        "amd-node-spx": f"claim {claim}, request p0: needs 1 device, no device matches on this node",
        "cpu-node": f"claim {claim}, request p0: needs 1 device, no device matches (no devices published for this node)",
    }


FITS_NOWHERE: list[FitsNowhere] = [
    (
        f"amd-gpu partitions-{name}: {constraint} on gpu.amd.com/deviceID, which partitions do not publish",
        "amd-gpu",
        f"gpu-test-{name}/pod-two-partitions-{name}",
        _partitions(constraint, f"gpu-test-{name}/two-partitions-{name}"),
    )
    for name, constraint in [("same-parent", "matchAttribute"), ("distinct-parents", "distinctAttribute")]
]
