"""Seeded DRA workloads for the differential test and the real-cluster benchmark.

A workload is a small cluster (GPU nodes with NICs on the same PCIe roots, some with a
partitionable card, some GPUs tainted) and pods whose claims cover what the allocator decides:
device classes with CEL selectors, counts, allocation mode All, matchAttribute constraints,
prioritized lists, partitions that share counters, taints and tolerations, claims shared by two
pods and claims from templates, and pods that fit nowhere by construction.

Capacity is ample on purpose (demand is well under what the nodes hold), so whether a pod fits
does not depend on where earlier pods went: the in-tree plugin and the extender, whose scores
differ, must still schedule exactly the same pods. Each selector is written twice, as the CEL the
API objects carry and as a Python predicate, so that allocations are checked without the
extender's own CEL engine.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

GPU, NIC, PART = "gpu.example.com", "nic.example.com", "part.example.com"
TAINT_KEY = "example.com/degraded"
GI = 1024**3


@dataclass(frozen=True)
class Selector:
    """One selector, as CEL and as a predicate on a device (its driver and attribute values)."""

    cel: str
    check: Callable[[str, dict[str, Any], dict[str, int]], bool]


def attr_is(driver: str, name: str, value: str | int) -> Selector:
    """``name``: an attribute of the driver's own domain (``model``) or a qualified one
    (``resource.kubernetes.io/pcieRoot``), as the slice names it."""
    literal = f'"{value}"' if isinstance(value, str) else str(value)
    domain, _, short = name.rpartition("/")
    return Selector(
        f'device.attributes["{domain or driver}"].{short} == {literal}',
        lambda d, attrs, caps: d == driver and attrs.get(name) == value,
    )


def memory_at_least(driver: str, gib: int) -> Selector:
    return Selector(
        f'device.capacity["{driver}"].memory.compareTo(quantity("{gib}Gi")) >= 0',
        lambda d, attrs, caps: d == driver and caps.get("memory", 0) >= gib * GI,
    )


def driver_is(driver: str) -> Selector:
    return Selector(f'device.driver == "{driver}"', lambda d, attrs, caps: d == driver)


CLASSES: dict[str, Selector] = {
    "gpu": driver_is(GPU),
    "gpu-h100": Selector(
        f'device.driver == "{GPU}" && device.attributes["{GPU}"].model == "h100"',
        lambda d, attrs, caps: d == GPU and attrs.get("model") == "h100",
    ),
    "nic": driver_is(NIC),
    "part": driver_is(PART),
}


@dataclass
class Request:
    name: str
    device_class: str
    count: int | None = 1  # None: allocation mode All
    selectors: tuple[Selector, ...] = ()
    tolerates: bool = False

    def spec(self) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": self.device_class}
        if self.count is None:
            exactly["allocationMode"] = "All"
        else:
            exactly.update(allocationMode="ExactCount", count=self.count)
        if self.selectors:
            exactly["selectors"] = [{"cel": {"expression": s.cel}} for s in self.selectors]
        if self.tolerates:
            exactly["tolerations"] = [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
        return exactly


@dataclass
class ClaimShape:
    name: str
    #: Each entry: one request, or a prioritized list (several subrequests, first that fits).
    requests: list[Request | list[Request]]
    match_attribute: str | None = None

    def spec(self) -> dict[str, Any]:
        requests: list[dict[str, Any]] = []
        for r in self.requests:
            if isinstance(r, list):
                requests.append(
                    {
                        "name": r[0].name.split("/")[0],
                        "firstAvailable": [{"name": s.name.split("/")[1], **s.spec()} for s in r],
                    }
                )
            else:
                requests.append({"name": r.name, "exactly": r.spec()})
        devices: dict[str, Any] = {"requests": requests}
        if self.match_attribute:
            devices["constraints"] = [{"matchAttribute": self.match_attribute}]
        return {"devices": devices}


@dataclass
class PodShape:
    name: str
    claims: list[str] = field(default_factory=list)
    templates: dict[str, str] = field(default_factory=dict)
    #: True: no node can ever satisfy it (by construction).
    impossible: bool = False


@dataclass
class Workload:
    seed: int
    nodes: list[str]
    slices: list[dict[str, Any]]
    claims: dict[str, ClaimShape]
    templates: dict[str, ClaimShape]
    pods: list[PodShape]

    def device_classes(self) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": s.cel}}]},
            }
            for name, s in CLASSES.items()
        ]

    def fittable(self) -> set[str]:
        return {p.name for p in self.pods if not p.impossible}


def _gpu_slice(node: str, rng: random.Random, model: str) -> dict[str, Any]:
    devices = []
    for i in range(4):
        device: dict[str, Any] = {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": model},
                "numa": {"int": i // 2},
                "resource.kubernetes.io/pcieRoot": {"string": f"pci{i // 2}"},
            },
            "capacity": {"memory": {"value": "80Gi" if model == "h100" else "40Gi"}},
        }
        if i == 3 and rng.random() < 0.5:
            device["taints"] = [{"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}]
        devices.append(device)
    return _slice(f"{node}-gpus", GPU, node, devices)


def _nic_slice(node: str) -> dict[str, Any]:
    devices = [
        {"name": f"nic-{i}", "attributes": {"resource.kubernetes.io/pcieRoot": {"string": f"pci{i}"}}}
        for i in range(2)
    ]
    return _slice(f"{node}-nics", NIC, node, devices)


#: From 1.35 on, a pool's shared counters are in a slice of their own, without devices; 1.34's
#: alpha API wants them in the slice whose devices consume them (its validation: "must
#: reference a counterSet defined in the ResourceSlice sharedCounters").
COUNTERS_APART_SINCE = 35


def _partition_slices(node: str, minor: int) -> list[dict[str, Any]]:
    """One card with 40Gi shared by its partitions: 4 x 10Gi, 2 x 20Gi or 1 x 40Gi; the counters
    in a slice of their own, or (before :data:`COUNTERS_APART_SINCE`) beside the devices."""
    parts = []
    for profile, size, n in (("1g", 10, 4), ("2g", 20, 2), ("4g", 40, 1)):
        for i in range(n):
            parts.append(
                {
                    "name": f"card-{profile}-{i}",
                    "attributes": {"profile": {"string": profile}},
                    "capacity": {"memory": {"value": f"{size}Gi"}},
                    "consumesCounters": [
                        {"counterSet": "card", "counters": {"memory": {"value": f"{size}Gi"}}}
                    ],
                }
            )
    shared = [{"name": "card", "counters": {"memory": {"value": "40Gi"}}}]
    if minor < COUNTERS_APART_SINCE:
        together = _slice(f"{node}-card", PART, node, parts)
        together["spec"]["sharedCounters"] = shared
        return [together]
    devices = _slice(f"{node}-card", PART, node, parts, count=2)
    counters = _slice(f"{node}-card-counters", PART, node, None, count=2)
    counters["spec"]["sharedCounters"] = shared
    return [devices, counters]


def _slice(
    name: str, driver: str, node: str, devices: list[dict[str, Any]] | None, count: int = 1
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": node, "generation": 1, "resourceSliceCount": count},
        "nodeName": node,
    }
    if devices is not None:
        spec["devices"] = devices
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": spec,
    }


def generate(seed: int, *, nodes: int = 8, pods: int = 16, minor: int = 36) -> Workload:
    """``minor``: the release whose API the slices are written for (the binaries')."""
    rng = random.Random(seed)
    names = [f"node-{i}" for i in range(nodes)]
    slices: list[dict[str, Any]] = []
    for i, node in enumerate(names):
        slices.append(_gpu_slice(node, rng, "h100" if i % 3 == 0 else "a100"))
        slices.append(_nic_slice(node))
        if i % 2 == 1:
            slices += _partition_slices(node, minor)
    claims: dict[str, ClaimShape] = {}
    templates: dict[str, ClaimShape] = {}
    shapes: list[PodShape] = []

    def one(name: str, shape: ClaimShape, impossible: bool = False, template: bool = False) -> None:
        if template:
            templates[f"t-{name}"] = shape
            shapes.append(PodShape(name, templates={"devices": f"t-{name}"}, impossible=impossible))
        else:
            claims[shape.name] = shape
            shapes.append(PodShape(name, claims=[shape.name], impossible=impossible))

    # What each kind takes at most: (GPUs, of which H100, NICs, partition GiB). Demand stays
    # under half of each, so every fittable pod fits wherever the earlier ones went.
    demand = {
        "one-gpu": (1, 0, 0, 0),
        "two-gpus-numa": (2, 0, 0, 0),
        "gpu-nic-pcie": (1, 0, 1, 0),
        "prioritized": (2, 1, 0, 0),
        "nics-all": (0, 0, 1, 0),
        "partition": (0, 0, 0, 20),
        "tolerating": (1, 0, 0, 0),
        "big-memory": (1, 1, 0, 0),
        "shared": (1, 0, 0, 0),
        "template": (1, 0, 0, 0),
    }
    h100_nodes = sum(1 for i in range(nodes) if i % 3 == 0)
    budget = [nodes * 4 // 2, h100_nodes * 4 // 2, nodes * 2 // 2, (nodes // 2) * 40 // 2]
    kinds = list(demand)
    for i in range(pods):
        kind = rng.choice(kinds)
        if any(d > left for d, left in zip(demand[kind], budget, strict=True)):
            continue
        budget = [left - d for d, left in zip(demand[kind], budget, strict=True)]
        name = f"p{i}-{kind}"
        c = f"c{i}"
        if kind == "one-gpu":
            one(name, ClaimShape(c, [Request("gpu", "gpu")]))
        elif kind == "two-gpus-numa":
            one(name, ClaimShape(c, [Request("gpu", "gpu", 2)], match_attribute=f"{GPU}/numa"))
        elif kind == "gpu-nic-pcie":
            one(
                name,
                ClaimShape(
                    c,
                    [Request("gpu", "gpu"), Request("nic", "nic")],
                    match_attribute="resource.kubernetes.io/pcieRoot",
                ),
            )
        elif kind == "prioritized":
            one(name, ClaimShape(c, [[Request("gpu/h100", "gpu-h100"), Request("gpu/a100", "gpu", 2)]]))
        elif kind == "nics-all":
            one(
                name,
                ClaimShape(
                    c,
                    [
                        Request(
                            "nics", "nic", None, (attr_is(NIC, "resource.kubernetes.io/pcieRoot", "pci1"),)
                        )
                    ],
                ),
            )
        elif kind == "partition":
            profile = rng.choice(["1g", "2g"])
            one(name, ClaimShape(c, [Request("part", "part", 1, (attr_is(PART, "profile", profile),))]))
        elif kind == "tolerating":
            one(name, ClaimShape(c, [Request("gpu", "gpu", 1, tolerates=True)]))
        elif kind == "big-memory":
            one(name, ClaimShape(c, [Request("gpu", "gpu", 1, (memory_at_least(GPU, 80),))]))
        elif kind == "shared":
            claims[c] = ClaimShape(c, [Request("gpu", "gpu")])
            shapes.append(PodShape(f"{name}-a", claims=[c]))
            shapes.append(PodShape(f"{name}-b", claims=[c]))
        else:
            one(name, ClaimShape(c, [Request("gpu", "gpu")]), template=True)
    # Pods that fit nowhere, each for a different reason.
    n = pods
    one(f"p{n}-too-many", ClaimShape(f"c{n}", [Request("gpu", "gpu", 5)]), impossible=True)
    one(
        f"p{n + 1}-no-match",
        ClaimShape(f"c{n + 1}", [Request("gpu", "gpu", 1, (attr_is(GPU, "model", "v100"),))]),
        impossible=True,
    )
    one(
        f"p{n + 2}-numa-three",
        ClaimShape(f"c{n + 2}", [Request("gpu", "gpu", 3)], match_attribute=f"{GPU}/numa"),
        impossible=True,
    )
    one(
        f"p{n + 3}-whole-card-and-part",
        ClaimShape(
            f"c{n + 3}",
            [
                Request("big", "part", 1, (attr_is(PART, "profile", "4g"),)),
                Request("small", "part", 1, (attr_is(PART, "profile", "1g"),)),
            ],
        ),
        impossible=True,
    )
    return Workload(seed, names, slices, claims, templates, shapes)
