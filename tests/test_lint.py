"""``dra-extender lint`` on the driver catalogue (issue 53): every demo claim that can never match
is found, with a clear message and the published name that is close, and nothing else is: the
demos that fit get no hint."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from extender.cli import main
from tests.shared import REPO

DRIVERS = REPO / "examples" / "drivers"

#: (case, state, the objects found: (kind, namespace/name, check, did you mean, in the message)).
FOUND: list[tuple[str, str, list[tuple[str, str, str, str | None, str]]]] = [
    (
        "NVIDIA: index (gone since v25.8.0), MIG devices in a full-GPU cluster",
        "nvidia-gpu",
        [
            (
                "ResourceClaim",
                "gpu-test4/pod-0-mig-devices-u5i6o",
                "class",
                None,
                "DeviceClass mig.nvidia.com accepts none",
            ),
            (
                "ResourceClaim",
                "gpu-test6/pod-0-a100-f9g0h",
                "attribute",
                None,
                "reads attribute gpu.nvidia.com/index",
            ),
            (
                "ResourceClaim",
                "imex-test1/deployment0-imex-channel",
                "class",
                None,
                "DeviceClass imex.nvidia.com does not exist",
            ),
            (
                "ResourceClaimTemplate",
                "gpu-test4/mig-devices",
                "class",
                None,
                "DeviceClass mig.nvidia.com accepts none",
            ),
            (
                "ResourceClaimTemplate",
                "gpu-test6/a100",
                "attribute",
                None,
                "reads attribute gpu.nvidia.com/index",
            ),
        ],
    ),
    (
        "AMD: partitions constrained on deviceID, which only whole GPUs publish",
        "amd-gpu",
        [
            (
                "ResourceClaim",
                "gpu-test-distinct-parents/two-partitions-distinct-parents",
                "constraint",
                "gpu.amd.com/parentDeviceID",
                "distinctAttribute gpu.amd.com/deviceID",
            ),
            (
                "ResourceClaim",
                "gpu-test-same-parent/two-partitions-same-parent",
                "constraint",
                "gpu.amd.com/parentDeviceID",
                "matchAttribute gpu.amd.com/deviceID",
            ),
        ],
    ),
    (
        "dranet: cloudNetwork and name, which it does not publish; NVIDIA's index in its GPU demo",
        "dranet",
        [
            (
                "ResourceClaim",
                "dranet-multinetwork/dranet-network",
                "attribute",
                "gce.dra.net/networkName",
                "reads attribute dra.net/cloudNetwork",
            ),
            (
                "ResourceClaim",
                "dranet-multinetwork/server-deployment-7c9d8f6b5d-x2k4m-phy-interfaces-h6j7k",
                "attribute",
                "dra.net/ifName",
                "reads attribute dra.net/name",
            ),
            (
                "ResourceClaim",
                "dranet-nvidia/nccl-gib-test-0-gpu-m3n4b",
                "attribute",
                None,
                "reads attribute gpu.nvidia.com/index",
            ),
            (
                "ResourceClaim",
                "dranet-quickstart/cloud-network-dra-net-1",
                "class",
                None,
                "DeviceClass dranet-cloud accepts none",
            ),
            (
                "ResourceClaim",
                "dranet-quickstart/cloud-network-dra-net-1",
                "attribute",
                "gce.dra.net/networkName",
                "DeviceClass dranet-cloud's selector reads attribute dra.net/cloudNetwork",
            ),
            (
                "ResourceClaimTemplate",
                "dranet-multinetwork/phy-interfaces-template",
                "attribute",
                "dra.net/ifName",
                "reads attribute dra.net/name",
            ),
            (
                "ResourceClaimTemplate",
                "dranet-nvidia/2-gpu-nic-aligned",
                "attribute",
                None,
                "reads attribute gpu.nvidia.com/index",
            ),
        ],
    ),
    (
        "SR-IOV: a VF aligned with an example-driver GPU by pcieRoot, which that driver does not publish",
        "sriov",
        [
            (
                "ResourceClaim",
                "vf-test5/pod0-vf-m9n0p",
                "constraint",
                None,
                "matchAttribute resource.kubernetes.io/pcieRoot: no device of driver gpu.example.com",
            ),
            (
                "ResourceClaimTemplate",
                "vf-test5/resource-alignment",
                "constraint",
                None,
                "matchAttribute resource.kubernetes.io/pcieRoot",
            ),
        ],
    ),
    ("example driver: every demo fits", "example-driver", []),
    ("NVIDIA DynamicMIG: every demo fits", "nvidia-mig", []),
    ("CPU driver: every demo names what it publishes", "cpu", []),
    ("TPU: every demo fits", "google-tpu", []),
]


def lint(*argv: str) -> tuple[int, dict[str, object]]:
    out = io.StringIO()
    code = main(["lint", *argv, "-o", "json"], out)
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize(("state", "expected"), [c[1:] for c in FOUND], ids=[c[0] for c in FOUND])
def test_lint_finds_the_demo_claims_that_can_never_match(
    state: str, expected: list[tuple[str, str, str, str | None, str]]
) -> None:
    code, result = lint(str(DRIVERS / state))
    findings = result["findings"]
    assert isinstance(findings, list)
    got = sorted(
        {(f["kind"], f"{f['namespace']}/{f['name']}", f["check"], f["didYouMean"]) for f in findings}
    )
    assert got == sorted({e[:4] for e in expected})
    for kind, name, check, _, says in expected:
        assert any(
            says in f["message"]
            for f in findings
            if (f["kind"], f"{f['namespace']}/{f['name']}", f["check"]) == (kind, name, check)
        ), (name, says)
    assert code == (1 if expected else 0)
    assert result["problems"] == []


def test_every_driver_of_the_catalogue_is_linted() -> None:
    assert {c[1] for c in FOUND} == {p.name for p in DRIVERS.iterdir() if p.is_dir()}


def test_lint_checks_the_claims_of_files_against_a_cluster_and_says_so_in_text(tmp_path: Path) -> None:
    """``-f``: a user's claim before it is applied, against a snapshot of the cluster."""
    claim = tmp_path / "claim.yaml"
    claim.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: mine, namespace: ml}\n"
        "spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        deviceClassName: gpu.nvidia.com\n"
        '        selectors:\n        - cel: {expression: \'device.attributes["gpu.nvidia.com"].productname == "A100"\'}\n'
    )
    out = io.StringIO()
    code = main(["lint", str(DRIVERS / "nvidia-gpu"), "-f", str(claim)], out)
    assert code == 1
    assert out.getvalue().splitlines() == [
        "ResourceClaim ml/mine: request gpu: the request's selector reads attribute gpu.nvidia.com/productname, "
        "which no device of driver gpu.nvidia.com publishes; did you mean gpu.nvidia.com/productName?",
        "1 checked, 1 with hints",
    ]


def test_a_file_with_no_claim_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "node.yaml"
    other.write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\n")
    assert main(["lint", str(DRIVERS / "nvidia-gpu"), "-f", str(other)], io.StringIO()) == 2
    assert "no object the extender reads (ResourceClaim, ResourceClaimTemplate)" in capsys.readouterr().err
