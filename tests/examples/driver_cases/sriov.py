"""k8snetworkplumbingwg/dra-driver-sriov (sriovnetwork.k8snetworkplumbingwg.io) at cd9404f, with
dra-example-driver (gpu.example.com) v0.2.1 GPUs on the same nodes for the resource-alignment demo.

Each node publishes 8 VFs, ordered by PCI address: the Intel E810's 0000:17:01.0-3, then the ConnectX-6 Dx's
0000:af:00.2-5. First fit takes the E810's VFs first.
"""

from __future__ import annotations

from tests.examples.driver_cases import Fits, FitsNowhere

NODES = ["sriov-worker-0", "sriov-worker-1"]


def vfs(node: str, *functions: int) -> list[str]:
    return [f"sriovnetwork.k8snetworkplumbingwg.io/{node}/0000-17-01-{f}" for f in functions]


def first_vfs(case: str, pod: str, count: int = 1) -> Fits:
    return (f"sriov {case}", "sriov", pod, {n: {"vf": vfs(n, *range(count))} for n in NODES}, [])


FITS: list[Fits] = [
    first_vfs("single-vf-claim: one VF from a template", "vf-test1/pod0"),
    first_vfs("vfio-driver: one VF of class vf-test2", "vf-test2/pod0"),
    first_vfs("multiple-vf-claim: two VFs in one request (count 2)", "vf-test3/pod0", 2),
    first_vfs("claim-for-deployment: a Deployment replica's VF", "vf-test6/pod0-5d8f7c9b6d-q2r3s"),
    first_vfs("resourceclaim: a ResourceClaim of its own", "vf-test7/pod0"),
]

FITS_NOWHERE: list[FitsNowhere] = [
    (
        # The VF has a pcieRoot; no gpu.example.com device publishes one, and a device without the attribute
        # can never join a matchAttribute constraint.
        "sriov resource-alignment: a VF and a gpu.example.com GPU on one pcieRoot, which the GPU lacks",
        "sriov",
        "vf-test5/pod0",
        dict.fromkeys(NODES, "request gpu: needs 1 device; 8 match, 8 excluded by a constraint"),
    ),
]
