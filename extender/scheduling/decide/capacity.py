"""Free devices per node, driver, class and product, and how many pods of a shape still fit.

What GPU operators ask of HAMi and gpushare, from one snapshot: per node and driver the
devices the node can allocate and how many are held; per DeviceClass and product (the
``productName``, ``model`` or ``type`` attribute) the distinct devices the class selects and
how many of them are free; and, per class, the free matching devices of every node, from which
"how many pods asking for N devices of class C still fit" is counted.

A device is *free for a class* when the allocator would hand it to a one-device request of
that class: its selectors select it, it is not in use (:meth:`Allocator.matching`) and no
NoSchedule or NoExecute taint keeps it (a class's request has no tolerations). The fit count is an
estimate by counts: sum over nodes of ``free // N``. It ignores constraints (matchAttribute,
distinctAttribute), counters and capacity, and counts a device that several nodes can reach
(network-attached) on each of them: an upper bound for plain requests.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

from extender.allocator.tolerations import taints_tolerated
from extender.cel import CelCompileError
from extender.model.dra import Device, DeviceID, ResourceClaim, parse_resource_claim
from extender.scheduling.decide.decision import node_info
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.decide.stepwise import to_the_end

#: Device attributes read as the product name, first found.
PRODUCT_ATTRIBUTES = ("productName", "model", "type")
#: Claims looked at per step when gathering the devices the cache's claims hold.
CLAIMS_PER_STEP = 5000
#: Request sizes the fit counts are given for when none is asked.
SHAPE_COUNTS = (1, 2, 4, 8)


@dataclass(frozen=True)
class NodeDrivers:
    node: str
    driver: str
    total: int
    allocated: int
    #: Not allocated, but kept from requests without tolerations by a NoSchedule or NoExecute taint.
    tainted: int = 0

    @property
    def free(self) -> int:
        return self.total - self.allocated - self.tainted


@dataclass(frozen=True)
class ClassProduct:
    device_class: str
    product: str
    total: int
    free: int


@dataclass(frozen=True)
class DeviceStates:
    """A class's devices on one node (or summed over nodes), by what holds them back.

    ``free``: the allocator would hand it to a one-device request of the class; ``allocated``: a
    claim in the cache holds it; ``in_flight``: only a write of the extender's own holds it (a
    bind in progress, or an allocation the cache does not show yet); ``tainted``: not held, but
    a NoSchedule or NoExecute taint (the device's own or a DeviceTaintRule's) keeps it from a
    request without tolerations."""

    free: int = 0
    allocated: int = 0
    in_flight: int = 0
    tainted: int = 0

    @property
    def total(self) -> int:
        return self.free + self.allocated + self.in_flight + self.tainted

    def __add__(self, other: DeviceStates) -> DeviceStates:
        return DeviceStates(
            self.free + other.free,
            self.allocated + other.allocated,
            self.in_flight + other.in_flight,
            self.tainted + other.tainted,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "free": self.free,
            "allocated": self.allocated,
            "inFlight": self.in_flight,
            "tainted": self.tainted,
        }


@dataclass(frozen=True)
class Capacity:
    nodes: tuple[NodeDrivers, ...] = ()
    classes: tuple[ClassProduct, ...] = ()
    #: class -> node -> devices free for a one-device request of the class.
    free_by_class: dict[str, dict[str, int]] = field(default_factory=dict)
    #: class -> why no device can be judged for it (a selector that does not compile...).
    class_errors: dict[str, str] = field(default_factory=dict)
    #: class -> node -> the class's devices there by state (nodes with none are left out).
    states_by_class: dict[str, dict[str, DeviceStates]] = field(default_factory=dict)

    def class_states(self, device_class: str) -> DeviceStates:
        """The class's devices summed over nodes (one reachable from several nodes counts on each)."""
        return sum(self.states_by_class.get(device_class, {}).values(), DeviceStates())

    def stranded(self, device_class: str, count: int) -> int:
        """Free devices of the class that no pod asking for ``count`` of them can use: the
        remainders ``free % count`` of every node (fragmentation, as counts see it)."""
        return sum(free % count for free in self.free_by_class.get(device_class, {}).values())

    def pods_that_fit(self, device_class: str, count: int) -> int:
        """Pods asking for ``count`` devices of ``device_class`` that still fit (an estimate)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        return sum(free // count for free in self.free_by_class.get(device_class, {}).values())


def product_of(attributes: dict[str, tuple[str, object]]) -> str:
    for name in PRODUCT_ATTRIBUTES:
        if name in attributes:
            return str(attributes[name][1])
    return ""


def one_device_of(device_class: str) -> ResourceClaim:
    """The claim a pod asking for one device of the class would have."""
    return parse_resource_claim(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "capacity", "namespace": "default", "uid": "capacity"},
            "spec": {
                "devices": {"requests": [{"name": "device", "exactly": {"deviceClassName": device_class}}]}
            },
        }
    )


def capacity(snapshot: Snapshot) -> Capacity:
    """The whole computation at once (the debug view)."""
    return to_the_end(capacity_steps(snapshot))


def capacity_steps(snapshot: Snapshot) -> Generator[None, None, Capacity]:
    """The computation one node at a time: it yields after each node, so a caller on an event
    loop can let other work run in between (a first computation evaluates every class's
    selectors on every device: 400 ms at 2000 nodes, much more with costly selectors), and
    returns the :class:`Capacity`. Between steps the snapshot's devices in use may change: the
    figures are a gauge, not a transaction."""
    state, inventory, allocated = snapshot.state, snapshot.inventory, snapshot.allocated
    per_node: list[NodeDrivers] = []
    free_by_class: dict[str, dict[str, int]] = {}
    states_by_class: dict[str, dict[str, DeviceStates]] = {}
    class_errors: dict[str, str] = {}
    #: (class, product) -> device -> free (distinct devices, whichever node reaches them).
    seen: dict[tuple[str, str], dict[object, bool]] = {}
    claims = {name: one_device_of(name) for name in sorted(state.classes)}
    #: Devices claims in the cache hold: the rest of what is in use is the extender's own writes.
    #: Gathered a slice at a time, like the nodes below (tens of thousands of claims).
    in_cache: set[DeviceID] = set()
    allocations = [c.allocation for c in state.claims.values() if c.allocation is not None]
    for start in range(0, len(allocations), CLAIMS_PER_STEP):
        in_cache.update(r.id for a in allocations[start : start + CLAIMS_PER_STEP] for r in a.devices)
        yield
    check_taints = snapshot.features.device_taints

    def tainted(device: Device) -> bool:
        """An untolerated NoSchedule or NoExecute taint keeps it from a class's request."""
        return check_taints and not taints_tolerated(inventory.taints(device), ())

    def state_of(device: Device, free: bool) -> int:
        """0 free, 1 allocated, 2 in flight, 3 tainted (see :class:`DeviceStates`)."""
        if not free:
            return 1 if device.id in in_cache else 2
        return 3 if tainted(device) else 0

    for class_name, device_class in state.classes.items():
        for i, selector in enumerate(device_class.selectors):
            program = snapshot.cel.compile(selector.expression or "")
            if isinstance(program, CelCompileError):
                class_errors[class_name] = f"selector #{i}: CEL compile error: {program}"
                break
    for name in sorted(state.nodes):
        node = state.nodes.get(name)
        if node is None:
            continue  # deleted while the computation paused
        counts: dict[str, list[int]] = {}
        for device in inventory.node_devices(name, node.labels):
            tally = counts.setdefault(device.id.driver, [0, 0, 0])
            tally[0] += 1
            if allocated.holds(device.id):
                tally[1] += 1
            elif tainted(device):
                tally[2] += 1
        per_node.extend(NodeDrivers(name, d, t, h, x) for d, (t, h, x) in sorted(counts.items()))
        info = node_info(node)
        for class_name, claim in claims.items():
            if class_name in class_errors:
                continue
            tally = [0, 0, 0, 0]
            for device, free in snapshot.allocator.matching(info, [claim]):
                state_now = state_of(device, free)
                tally[state_now] += 1
                devices = seen.setdefault((class_name, product_of(device.attributes)), {})
                devices[device.id] = devices.get(device.id, False) or state_now == 0
            free_by_class.setdefault(class_name, {})[name] = tally[0]
            if any(tally):
                states_by_class.setdefault(class_name, {})[name] = DeviceStates(*tally)
        yield
    classes = tuple(
        ClassProduct(c, p, len(devices), sum(devices.values())) for (c, p), devices in sorted(seen.items())
    )
    return Capacity(tuple(per_node), classes, free_by_class, class_errors, states_by_class)
