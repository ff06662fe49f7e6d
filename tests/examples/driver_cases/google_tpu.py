"""kubernetes-sigs/dra-driver-google-tpu (tpu.google.com) v0.2.0: every demo fits on both v6e hosts."""

from __future__ import annotations

from tests.examples.driver_cases import Fits

#: TPU host -> its chips (device names are IOMMU group numbers: 0 .. n-1 here).
CHIPS = {"tpu-v6e-8": 8, "tpu-v6e-16-host-0": 4}


def _chips(node: str, count: int) -> list[str]:
    return [f"tpu.google.com/{node}/{i}" for i in range(count)]


FITS: list[Fits] = [
    (
        f"google-tpu {case}",
        "google-tpu",
        pod,
        {node: {"tpus": _chips(node, chips if count is None else count)} for node, chips in CHIPS.items()},
        ["cpu-node"],
    )
    for case, pod, count in [
        ("tpu-test: allocationMode All takes every chip of the host", "tpu-test/tpu-pod0", None),
        ("tpu-jax-test: every chip", "tpu-jax-test/tpu-jax-pod", None),
        ("vllm-tpu: every chip", "vllm-tpu/vllm-tpu-7c9d8f6b5-x2z4w", None),
        ("README: every chip whose accelerator is tpu-v6e-slice", "tpu-readme/v6e-pod", None),
        (
            "multi-tpu-pod: count 4, all of the 4-chip host, half of the 8-chip one",
            "tpu-test/multi-tpu-pod",
            4,
        ),
    ]
]
