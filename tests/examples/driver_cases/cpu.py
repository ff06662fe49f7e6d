"""kubernetes-sigs/dra-driver-cpu (dra.cpu) v0.2.0: a NUMA-grouped node whose NUMA devices pods share by
consumable capacity, and an individual-mode node with one device per CPU.

On cpu-grouped-node the running pods default/app-a (8) and app-b (6) have used up cpudevnuma000 (14 CPUs)
and app-c holds 2 of cpudevnuma001's 16, so every capacity request lands on cpudevnuma001 or nowhere.

Every node here publishes dra.cpu devices, so a node where a fitting pod does not fit is written in
``not_on`` as "node: what its reason says". The shared test reads every ``not_on`` entry as a node that
publishes no devices; until it also reads this form, these three cases fail there."""

from __future__ import annotations

from tests.examples.driver_cases import Fits, FitsNowhere

GROUPED = "cpu-grouped-node"
INDIVIDUAL = "cpu-individual-node"
NUMA1 = f"dra.cpu/{GROUPED}/cpudevnuma001"


def cpus(first: int, last: int) -> list[str]:
    return [f"dra.cpu/{INDIVIDUAL}/cpudev{i:03d}" for i in range(first, last + 1)]


# A node in `not_on` that publishes devices is written "node: what its reason says" (see the module doc).
NO_CAPACITY = "needs 1 device; 10 match, 10 out of capacity"
FITS: list[Fits] = [
    (
        "cpu grouped mode: 10 CPUs, on the NUMA node with capacity left (cpudevnuma000 is used up)",
        "cpu",
        "grouped-mode/pod-cpu-dra-claim",
        {GROUPED: {"req-cpu-slice": [NUMA1]}},
        # Individual devices have no dra.cpu/cpu capacity: a request for it makes each of them unusable.
        [f"{INDIVIDUAL}: request req-cpu-slice: {NO_CAPACITY}"],
    ),
    (
        "cpu pod-level resources: 10 and 4 CPUs share cpudevnuma001 and take the 14 it has left",
        "cpu",
        "pod-level-resources/pod-with-pod-level-resources",
        {GROUPED: {"req-cpu-slice": [NUMA1], "req-cpu-slice-2": [NUMA1]}},
        [f"{INDIVIDUAL}: request req-cpu-slice: {NO_CAPACITY}"],
    ),
    (
        "cpu individual mode: 4 and 6 CPU devices, all 10 the node publishes",
        "cpu",
        "individual-mode/my-app-with-dra-cpu",
        {INDIVIDUAL: {"req-dummy": cpus(0, 3), "req-dummy-2": cpus(4, 9)}},
        # Class dra.cpu matches the NUMA devices too, but there are only 2 (and a request without a capacity
        # request takes a shared device's whole capacity, which neither has left).
        [f"{GROUPED}: request req-dummy: needs 4 devices; 2 match"],
    ),
]


FITS_NOWHERE: list[FitsNowhere] = [
    (
        "cpu 15 CPUs: more than any NUMA node has left (cpudevnuma001 has 14 of 16)",
        "cpu",
        "default/too-big",
        {
            GROUPED: "request cpus: needs 1 device; 2 match, 2 out of capacity",
            INDIVIDUAL: f"request cpus: {NO_CAPACITY}",
        },
    ),
    (
        "cpu README NUMA split: 10 CPUs on NUMA node 0, which app-a and app-b have used up",
        "cpu",
        "numa-split/numa-split",
        {
            GROUPED: "request numa0-cpus: needs 1 device; 1 match, 1 out of capacity",
            INDIVIDUAL: "request numa1-cpus: needs 1 device, no device matches on this node",
        },
    ),
]
