"""google/dranet (dra.net) v1.0.1 with NVIDIA (gpu.nvidia.com) v25.12.0 GPUs on the same GKE A4-like nodes.

Each node has 4 PCIe roots, each with 2 GPUs and the 2 RDMA NICs named after them (gpu<i>rdma0), plus the
gVNIC eth1 on the first root. dranet names a NIC ``pci-<address>`` and sorts its slice by name, so eth1
(0000:05:00.0) comes first, then gpu0rdma0 (0c), gpu1rdma0 (1c), gpu2rdma0 (4c), ... gpu4rdma0 (8c).
A pod's ``nvidia.com/gpu: 1`` limit is served by the gpu.nvidia.com class's extendedResourceName: the
scheduler's in-memory claim, request ``container-0-request-0``.
"""

from __future__ import annotations

from tests.examples.driver_cases import Fits, FitsNowhere

NODES = ["gke-a4-node-0", "gke-a4-node-1"]
EXTENDED_GPU = "container-0-request-0"


def nic(node: str, bus: str) -> str:
    return f"dra.net/{node}/pci-0000-{bus}-00-0"


def gpu(node: str, i: int) -> str:
    return f"gpu.nvidia.com/{node}/gpu-{i}"


def rdma_nic_and_gpu(case: str, pod: str, request: str, bus: str) -> Fits:
    """A NIC picked by ifName, and the first GPU through the extended resource, on every node."""
    return (
        f"dranet {case}",
        "dranet",
        pod,
        {n: {request: [nic(n, bus)], EXTENDED_GPU: [gpu(n, 0)]} for n in NODES},
        [],
    )


FITS: list[Fits] = [
    rdma_nic_and_gpu(
        "demo_gke_rdma rdma-perftest: the RDMA NIC gpu4rdma0, and a GPU for nvidia.com/gpu: 1",
        "dranet-rdma-perftest/rdma-perftest-0",
        "rdma-net-interface",
        "8c",
    ),
    rdma_nic_and_gpu(
        "demo_gke_rdma nccl-gib-test: the RDMA NIC gpu1rdma0, and a GPU for nvidia.com/gpu: 1",
        "dranet-nccl-gib/nccl-gib-test-0",
        "rdma-net-interface",
        "1c",
    ),
    rdma_nic_and_gpu(
        "mpi_operator worker: the RDMA NIC gpu2rdma0 (class dranet-rdma-for-mpi), and a GPU",
        "dranet-mpi/nccl-test-dranet-1gpu-1nic-worker-0",
        "rdma-nic-for-mpi",
        "4c",
    ),
    (
        # Ours: demo_nvidia_dranet without its `index` selector. First fit takes gpu-0 and gpu-1 (root
        # pci0000:00); the NICs must then share that root: eth1 is on it but not RDMA, so gpu0rdma0, gpu1rdma0.
        "dranet our variant of demo_nvidia_dranet: 2 GPUs and 2 RDMA NICs under one PCIe root",
        "dranet",
        "dranet-nvidia-aligned/nccl-gib-test-0",
        {n: {"gpu": [gpu(n, 0), gpu(n, 1)], "nic": [nic(n, "0c"), nic(n, "1c")]} for n in NODES},
        [],
    ),
]


def everywhere(says: str) -> dict[str, str]:
    return dict.fromkeys(NODES, says)


FITS_NOWHERE: list[FitsNowhere] = [
    (
        # The class tests has(...cloudNetwork): false on every device, so the claim's own selector never runs.
        "dranet quick-start: class dranet-cloud wants dra.net/cloudNetwork, which dranet does not publish",
        "dranet",
        "dranet-quickstart/pod-dra-net1",
        everywhere("request req-cloud-net-1: needs 1 device, no device matches on this node"),
    ),
    (
        "dranet demo_gke_multinetwork resourceclaim: cloudNetwork.contains(...) with no has() guard",
        "dranet",
        "dranet-multinetwork/pod1",
        {n: f"on device {nic(n, '05')}: CEL runtime error: no such key: cloudNetwork" for n in NODES},
    ),
    (
        "dranet demo_gke_multinetwork resourceclaimtemplate: `name` == 'eth1', but the name is ifName",
        "dranet",
        "dranet-multinetwork/server-deployment-7c9d8f6b5d-x2k4m",
        {n: f"on device {nic(n, '05')}: CEL runtime error: no such key: name" for n in NODES},
    ),
    (
        "dranet demo_nvidia_dranet: GPUs by `index`, which NVIDIA v25.12.0 no longer publishes",
        "dranet",
        "dranet-nvidia/nccl-gib-test-0",
        {n: f"on device {gpu(n, 0)}: CEL runtime error: no such key: index" for n in NODES},
    ),
]
