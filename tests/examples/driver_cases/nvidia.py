"""NVIDIA/k8s-dra-driver-gpu (gpu.nvidia.com) v25.12.0: full GPUs (nvidia-gpu) and DynamicMIG (nvidia-mig)."""

from __future__ import annotations

from tests.examples.driver_cases import Fits, FitsNowhere, first_devices

GPU_NODES = ["gpu-node-a100", "gpu-node-h100"]
FITS: list[Fits] = first_devices(
    "nvidia-gpu",
    "gpu.nvidia.com",
    GPU_NODES,
    ["cpu-node"],
    [
        ("gpu-test1 pod1: one GPU from a template", "gpu-test1/pod1", ["gpu"]),
        ("gpu-test1 pod2: its own claim", "gpu-test1/pod2", ["gpu"]),
        ("gpu-test2: one GPU shared by two containers", "gpu-test2/pod", ["gpu"]),
        ("gpu-test3 pod1: a shared ResourceClaim", "gpu-test3/pod1", ["gpu"]),
        ("gpu-test3 pod2: the same shared ResourceClaim", "gpu-test3/pod2", ["gpu"]),
        ("gpu-test5: time-sliced and MPS GPUs", "gpu-test5/pod0", ["ts-gpu", "mps-gpu"]),
    ],
)


# DynamicMIG: default/holder runs on gpu-0's 1g.5gb partition at memory slice 6, so the shared counters
# leave gpu-0 nothing that needs all of its memory slices.
MIG = "gpu.nvidia.com/gpu-node-mig/gpu-1"
FITS += [
    (
        f"nvidia-mig gpu-test1 {pod}: a full GPU, on the GPU none of whose counters are in use",
        "nvidia-mig",
        f"gpu-test1/{pod}",
        {"gpu-node-mig": {"gpu": [MIG]}},
        [],
    )
    for pod in ["pod1", "pod2"]
] + [
    (
        "nvidia-mig gpu-test4: 1g.5gb x2, 2g.10gb, 3g.20gb on one parent take all 8 memory slices of gpu-1",
        "nvidia-mig",
        "gpu-test4/pod-0",
        {
            "gpu-node-mig": {
                "mig-1g-5gb-0": [f"{MIG}-mig-1g5gb-19-0"],
                "mig-1g-5gb-1": [f"{MIG}-mig-1g5gb-19-1"],
                "mig-2g-10gb": [f"{MIG}-mig-2g10gb-14-2"],
                "mig-3g-20gb": [f"{MIG}-mig-3g20gb-9-4"],
            }
        },
        [],
    )
]


FITS_NOWHERE: list[FitsNowhere] = [
    (
        "nvidia-gpu gpu-test4: MIG devices on one parent, but only full GPUs are published",
        "nvidia-gpu",
        "gpu-test4/pod-0",
        {
            "cpu-node": "request mig-1g-5gb-0: needs 1 device, no device matches (no devices published for this node)",
            "gpu-node-a100": "request mig-3g-20gb: needs 1 device, no device matches on this node",
            "gpu-node-h100": "request mig-2g-10gb: needs 1 device, no device matches on this node",
        },
    ),
    (
        "nvidia-gpu gpu-test6: a selector on `index`, which v25.12.0 no longer publishes",
        "nvidia-gpu",
        "gpu-test6/pod-0",
        {
            "cpu-node": "no devices published for this node",
            # An A100: productName matches, then the selector reads the missing attribute.
            "gpu-node-a100": "on device gpu.nvidia.com/gpu-node-a100/gpu-0: CEL runtime error: no such key: index",
            # Not an A100: `&&` stops before `index` is read.
            "gpu-node-h100": "request gpu: needs 1 device, no device matches on this node",
        },
    ),
]

FITS_NOWHERE += [
    (
        "nvidia-gpu imex-test1: a claim of class imex.nvidia.com, which v25.12.0 does not ship",
        "nvidia-gpu",
        "imex-test1/deployment0-6d5f7c8b9-k2m4p",
        {
            node: "request channel: device class imex.nvidia.com does not exist"
            for node in ["cpu-node", *GPU_NODES]
        },
    ),
]
