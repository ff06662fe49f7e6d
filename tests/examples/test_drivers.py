"""The driver catalogue (examples/drivers/, issue 53): each driver's demo claims, simulated on the slices
and classes the same driver publishes. Per demo pod: the nodes it fits on and the devices it gets on
each, or why it fits nowhere."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from extender.cli import main
from extender.statefile import expand
from tests.shared import REPO

DRIVERS = REPO / "examples" / "drivers"


def simulate(state: Path, pod: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main(["simulate", str(state), "--pod", pod, "-o", "json"], out)
    result = json.loads(out.getvalue())
    assert result["problems"] == []
    [decided] = result["pods"]
    return code, decided["nodes"]


def devices(decision: dict[str, Any]) -> dict[str, list[str]]:
    """request -> devices (driver/pool/device), over the pod's claims."""
    got: dict[str, list[str]] = {}
    for allocation in decision["allocations"].values():
        for r in allocation["devices"]["results"]:
            got.setdefault(r["request"], []).append(f"{r['driver']}/{r['pool']}/{r['device']}")
    return got


#: (case, state, pod, {node: {request: devices}} where it fits, nodes where it does not).
Fits = tuple[str, str, str, dict[str, dict[str, list[str]]], list[str]]


def first_gpus(
    state: str, driver: str, nodes: list[str], unfit: list[str], cases: list[tuple[str, str, list[str]]]
) -> list[Fits]:
    """Cases where each request gets the next GPU of every node in ``nodes`` (gpu-0, gpu-1, ...)
    and no node of ``unfit`` fits."""
    return [
        (
            f"{state} {case}",
            state,
            pod,
            {node: {r: [f"{driver}/{node}/gpu-{i}"] for i, r in enumerate(requests)} for node in nodes},
            unfit,
        )
        for case, pod, requests in cases
    ]


WORKERS = ["kind-worker", "kind-worker2"]
GPU_NODES = ["gpu-node-a100", "gpu-node-h100"]
FITS: list[Fits] = first_gpus(
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
) + first_gpus(
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


@pytest.mark.parametrize(("state", "pod", "fits", "not_on"), [c[1:] for c in FITS], ids=[c[0] for c in FITS])
def test_a_demo_claim_fits_where_the_driver_publishes_devices(
    state: str, pod: str, fits: dict[str, dict[str, list[str]]], not_on: list[str]
) -> None:
    code, nodes = simulate(DRIVERS / state, pod)
    assert code == 0
    assert sorted(nodes) == sorted([*fits, *not_on])
    for node, expected in fits.items():
        assert nodes[node]["fits"] and nodes[node]["error"] is None, node
        assert devices(nodes[node]) == expected, node
    for node in not_on:
        assert not nodes[node]["fits"]
        assert nodes[node]["reason"].endswith("no device matches (no devices published for this node)")


#: (case, state, pod, {node: what its reason or error says}).
FITS_NOWHERE: list[tuple[str, str, str, dict[str, str]]] = [
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


@pytest.mark.parametrize(
    ("state", "pod", "why"), [c[1:] for c in FITS_NOWHERE], ids=[c[0] for c in FITS_NOWHERE]
)
def test_a_demo_claim_that_fits_nowhere_says_why(state: str, pod: str, why: dict[str, str]) -> None:
    code, nodes = simulate(DRIVERS / state, pod)
    assert code == 1
    assert sorted(nodes) == sorted(why)
    for node, says in why.items():
        assert not nodes[node]["fits"]
        assert says in (nodes[node]["reason"] or nodes[node]["error"]), node


def test_every_pending_demo_pod_is_in_a_case_table() -> None:
    cases = {(c[1], c[2]) for c in FITS} | {(c[1], c[2]) for c in FITS_NOWHERE}
    for state in sorted(p for p in DRIVERS.iterdir() if p.is_dir()):
        out = io.StringIO()
        main(["simulate", str(state), "-o", "json"], out)
        pods = {(state.name, f"{p['namespace']}/{p['name']}") for p in json.loads(out.getvalue())["pods"]}
        assert pods == {c for c in cases if c[0] == state.name}, state.name


def test_the_catalogue_is_not_part_of_the_default_examples_state() -> None:
    """``examples/`` (the embedded default) reads only its own top-level files; the driver catalogue
    under examples/drivers/ is loaded only when named."""
    assert not any("drivers" in p.parts for p in expand([REPO / "examples"]))


@pytest.mark.parametrize("state", sorted(p.name for p in DRIVERS.iterdir() if p.is_dir()))
def test_each_file_cites_its_upstream_tag(state: str) -> None:
    for path in sorted((DRIVERS / state).glob("*.yaml")):
        head = path.read_text().split("\napiVersion:", 1)[0]
        assert "https://github.com/" in head and " at tag v" in head, path
