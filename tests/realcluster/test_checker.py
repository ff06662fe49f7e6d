"""The differential test's judge catches what it must (runs without the binaries): allocations
that break a request's count, class, selectors, taints or matchAttribute, and a device twice."""

from __future__ import annotations

from typing import Any

import pytest

from tests.realcluster.differential import Outcome, allocation_problems
from tests.realcluster.generator import GPU, ClaimShape, PodShape, Request, Workload, attr_is, generate

NODE = "node-0"


def workload_with(shape: ClaimShape) -> Workload:
    base = generate(0)
    for s in base.slices:  # node-0's gpu-3: tainted, for the taint case
        if s["metadata"]["name"] == f"{NODE}-gpus":
            s["spec"]["devices"][3]["taints"] = [{"key": "example.com/degraded", "effect": "NoSchedule"}]
            # node-0's GPUs are H100s (i % 3 == 0); gpu-2 an A100, for the class cases.
            s["spec"]["devices"][2]["attributes"]["model"] = {"string": "a100"}
    return Workload(0, base.nodes, base.slices, {shape.name: shape}, {}, [PodShape("p", claims=[shape.name])])


def outcome(
    workload: Workload, *devices: tuple[str, str], extra_claims: tuple[dict[str, Any], ...] = ()
) -> Outcome:
    results = [{"request": r, "driver": GPU, "pool": NODE, "device": d} for r, d in devices]
    claim = {
        "metadata": {"name": "c", "namespace": "default"},
        "status": {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}],
        },
    }
    pod = {
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {"nodeName": NODE, "resourceClaims": [{"name": "claim-0", "resourceClaimName": "c"}]},
    }
    return Outcome({"p": NODE}, set(), [pod], [claim, *extra_claims], workload.slices, 0.0)


CASES = {
    "valid": (
        ClaimShape("c", [Request("gpu", "gpu", 2)], f"{GPU}/numa"),
        [("gpu", "gpu-0"), ("gpu", "gpu-1")],
        None,
    ),
    "too few": (ClaimShape("c", [Request("gpu", "gpu", 2)]), [("gpu", "gpu-0")], "has 1 devices, wants 2"),
    "numa differs": (
        ClaimShape("c", [Request("gpu", "gpu", 2)], f"{GPU}/numa"),
        [("gpu", "gpu-1"), ("gpu", "gpu-2")],
        "differs",
    ),
    "tainted, not tolerated": (ClaimShape("c", [Request("gpu", "gpu")]), [("gpu", "gpu-3")], "tainted"),
    "tainted, tolerated": (
        ClaimShape("c", [Request("gpu", "gpu", tolerates=True)]),
        [("gpu", "gpu-3")],
        None,
    ),
    "selector not matched": (
        ClaimShape("c", [Request("gpu", "gpu", 1, (attr_is(GPU, "model", "a100"),))]),
        [("gpu", "gpu-0")],  # node-0's GPUs are H100s
        "does not match",
    ),
    # The request's DeviceClass is judged too, not only its own selectors: gpu-h100 selects the
    # driver's H100s, so an A100 of the same driver, or another driver's device, is not of it.
    "right class": (ClaimShape("c", [Request("gpu", "gpu-h100")]), [("gpu", "gpu-0")], None),
    "wrong class": (
        ClaimShape("c", [Request("gpu", "gpu-h100")]),
        [("gpu", "gpu-2")],
        "gpu-2 does not match request gpu",
    ),
    "another driver's class": (
        ClaimShape("c", [Request("nic", "nic")]),
        [("nic", "gpu-0")],
        "gpu-0 does not match request nic",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_judge(case: str) -> None:
    shape, devices, expected = CASES[case]
    workload = workload_with(shape)
    problems = allocation_problems(workload, outcome(workload, *devices))
    if expected is None:
        assert problems == []
    else:
        assert any(expected in p for p in problems), problems


def test_a_device_twice_is_caught() -> None:
    shape = ClaimShape("c", [Request("gpu", "gpu")])
    workload = workload_with(shape)
    other = {
        "metadata": {"name": "other", "namespace": "default"},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": GPU, "pool": NODE, "device": "gpu-0"}]}
            }
        },
    }
    problems = allocation_problems(workload, outcome(workload, ("gpu", "gpu-0"), extra_claims=(other,)))
    assert any("is allocated to" in p for p in problems), problems
