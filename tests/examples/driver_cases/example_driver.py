"""kubernetes-sigs/dra-example-driver (gpu.example.com): every demo of v0.2.1 fits."""

from __future__ import annotations

from tests.examples.driver_cases import Fits, first_devices

WORKERS = ["kind-worker", "kind-worker2"]
FITS: list[Fits] = first_devices(
    "example-driver",
    "gpu.example.com",
    WORKERS,
    ["kind-control-plane"],
    [
        ("gpu-test1 pod0: one GPU from a template", "gpu-test1/pod0", ["gpu"]),
        ("gpu-test1 pod1: its own claim, the same first GPU", "gpu-test1/pod1", ["gpu"]),
        ("gpu-test2: two requests, two GPUs", "gpu-test2/pod0", ["gpu-1", "gpu-2"]),
        ("gpu-test3: one GPU shared by two containers", "gpu-test3/pod0", ["gpu"]),
        ("gpu-test4 pod0: a shared ResourceClaim", "gpu-test4/pod0", ["gpu"]),
        ("gpu-test4 pod1: the same shared ResourceClaim", "gpu-test4/pod1", ["gpu"]),
        ("gpu-test5: time-sliced and space-partitioned GPUs", "gpu-test5/pod0", ["ts-gpu", "sp-gpu"]),
        ("gpu-test6: an init container and a container share a GPU", "gpu-test6/pod0", ["gpu"]),
    ],
)
