"""What the cluster's drivers publish, as claim hints read it: every device with the node it
serves, the attribute and capacity names each driver's devices carry, and which devices a
DeviceClass and a request could ever get (:mod:`claim_hints`).

Pure: built from a :class:`ClusterState`'s slices and classes and a CEL environment; kept while
the state's ``inventory_version`` holds (slices, classes and taint rules unchanged). Taints,
allocations and node selectors are left out on purpose: a hint says what can *never* match, not
what is free now.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from extender.cel import CelCompileError, CelEnvironment, CelEvalError, CelInterruptedError
from extender.cel import ast as cel_ast
from extender.cel.device import split_qualified
from extender.cel.environment import Program
from extender.cel.reads import Path, device_path
from extender.cluster.state import ClusterState
from extender.model.dra import Device, DeviceClass, Selector


@dataclass(frozen=True, slots=True)
class PublishedDevice:
    """One device as published, and the node it serves (None: a pool for several nodes)."""

    device: Device
    node: str | None
    #: Its attributes' qualified names: one set shared by the devices of one shape, so that the
    #: names a request's devices publish are gathered per shape, not per device.
    attributes: frozenset[str] = frozenset()


@dataclass(slots=True)
class DriverNames:
    """The qualified names (``domain/id``) one driver's devices publish."""

    attributes: set[str] = field(default_factory=set)
    capacities: set[str] = field(default_factory=set)


def qualified(driver: str, name: str) -> str:
    """An attribute or capacity name as ``domain/id`` (a bare id is in the driver's domain)."""
    domain, ident = split_qualified(driver, name)
    return f"{domain}/{ident}"


def attribute_names(device: Device) -> set[str]:
    return {qualified(device.id.driver, name) for name in device.attributes}


def capacity_names(device: Device) -> set[str]:
    return {qualified(device.id.driver, name) for name in device.capacity}


class OutOfTime(Exception):
    """The hints of one claim ran past their budget (:attr:`Published.deadline`)."""


class Published:
    """The cluster's published devices, indexed for claim hints; memoizes per class."""

    def __init__(
        self, state: ClusterState, cel: CelEnvironment, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cel = cel
        self.clock = clock
        #: On ``clock``: evaluating past it raises :class:`OutOfTime` (the caller's budget).
        self.deadline = math.inf
        self.classes = state.classes
        self.inventory_version = state.inventory_version
        #: Selector evaluations that raised a CEL runtime error (the decision's error: fatal).
        self.errors = 0
        self.devices: list[PublishedDevice] = []
        self.drivers: dict[str, DriverNames] = {}
        # Devices of one shape name alike.
        shapes: dict[tuple[str, tuple[str, ...], tuple[str, ...]], frozenset[str]] = {}
        for s in state.slices.values():
            for device in s.devices:
                node = s.node_name if s.node_name else device.node_name
                shape = (device.id.driver, tuple(device.attributes), tuple(device.capacity))
                attributes = shapes.get(shape)
                if attributes is None:
                    attributes = shapes[shape] = frozenset(attribute_names(device))
                    names = self.drivers.setdefault(device.id.driver, DriverNames())
                    names.attributes |= attributes
                    names.capacities |= capacity_names(device)
                self.devices.append(PublishedDevice(device, node, attributes))
        self._of_class: dict[str, list[PublishedDevice]] = {}

    def names_of(self, drivers: Iterable[str]) -> DriverNames:
        out = DriverNames()
        for driver in drivers:
            names = self.drivers.get(driver)
            if names is not None:
                out.attributes |= names.attributes
                out.capacities |= names.capacities
        return out

    def of_class(self, device_class: DeviceClass) -> list[PublishedDevice]:
        """The devices the class's selectors accept (a runtime error: not accepted)."""
        found = self._of_class.get(device_class.name)
        if found is None:
            found = self.matching(self.devices, device_class.selectors)
            self._of_class[device_class.name] = found
        return found

    def matching(
        self, devices: list[PublishedDevice], selectors: Iterable[Selector]
    ) -> list[PublishedDevice]:
        """The devices every selector accepts. Each program runs once per distinct value of what
        it reads (:func:`read_key`): 40,000 GPUs of two models are two evaluations, not 40,000
        (a device whose other attributes could not be converted to CEL values is judged as the
        first device of its group: a hint may miss that error, which the decision reports)."""
        for selector in selectors:
            program = self.program(selector)
            if program is None:
                continue
            key = read_key(program.reads)
            if key is None:
                devices = [d for d in devices if self._accepts(program, d.device)]
                continue
            verdicts: dict[Hashable, bool] = {}
            kept = []
            for d in devices:
                k = key(d.device)
                verdict = verdicts.get(k)
                if verdict is None:
                    verdict = verdicts[k] = self._accepts(program, d.device)
                if verdict:
                    kept.append(d)
            devices = kept
        return devices

    def program(self, selector: Selector) -> Program | None:
        """The selector's program; None when it has no expression or does not compile (the
        decision reports the compile error itself)."""
        if selector.expression is None:
            return None
        compiled = self.cel.compile(selector.expression)
        return None if isinstance(compiled, CelCompileError) else compiled

    def check_time(self) -> None:
        """Raises :class:`OutOfTime` once :attr:`deadline` has passed."""
        if self.deadline != math.inf and self.clock() > self.deadline:
            raise OutOfTime

    def _accepts(self, program: Program, device: Device) -> bool:
        self.check_time()
        try:
            return self.cel.matches(
                program, device.cel(), self.deadline if self.deadline != math.inf else None
            )
        except CelInterruptedError:
            raise OutOfTime from None
        except CelEvalError:
            self.errors += 1
            return False

    def class_drivers(self, device_class: DeviceClass) -> set[str]:
        """The drivers a class is for: those of the devices it accepts; where it accepts none,
        those its selectors name (``device.driver == "..."``); else every driver."""
        accepted = {d.device.id.driver for d in self.of_class(device_class)}
        if accepted:
            return accepted
        named: set[str] = set()
        for selector in device_class.selectors:
            program = self.program(selector)
            if program is not None:
                named |= drivers_named(program.root)
        return named or set(self.drivers)


def drivers_named(root: cel_ast.Node) -> set[str]:
    """String literals an expression compares ``device.driver`` with (``==``)."""
    out: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, cel_ast.Call) and node.function == "_==_" and len(node.args) == 2:
            left, right = node.args
            for path, literal in ((left, right), (right, left)):
                if (
                    device_path(path) == ("driver",)
                    and isinstance(literal, cel_ast.Literal)
                    and isinstance(literal.value, str)
                ):
                    out.add(literal.value)
        stack.extend(cel_ast.children(node))
    return out


def read_key(reads: frozenset[Path]) -> Callable[[Device], Hashable] | None:
    """A key from a published device to the values a program reads (None: it reads the whole
    device, or a whole map: no grouping). :func:`extender.cel.reads.key_function` keys the CEL
    view of a device the same way; this one reads the model's :class:`Device`, so that devices
    never evaluated (look-alike nodes the allocator skipped) need no CEL values built to be
    grouped (building them was most of the cost at 5,000 nodes)."""
    getters: list[Callable[[Device], Hashable]] = []
    for path in sorted(reads):
        if path == ("driver",):
            getters.append(_driver)
        elif path == ("allowMultipleAllocations",):
            getters.append(_allow_multiple)
        elif len(path) == 3 and path[0] in ("attributes", "capacity"):
            getters.append(_value_of(path[0], f"{path[1]}/{path[2]}"))
        else:
            return None
    return lambda d: tuple(g(d) for g in getters)


def _driver(device: Device) -> Hashable:
    return device.id.driver


def _allow_multiple(device: Device) -> Hashable:
    return device.allow_multiple_allocations


def _value_of(kind: str, name: str) -> Callable[[Device], Hashable]:
    domain, _, ident = name.partition("/")

    def attribute(device: Device) -> Hashable:
        return device.attribute(name)

    def capacity(device: Device) -> Hashable:
        found = device.capacity.get(name)
        if found is None and domain == device.id.driver:
            found = device.capacity.get(ident)
        return None if found is None else (found.value.text or str(found.value.value))

    return attribute if kind == "attributes" else capacity
