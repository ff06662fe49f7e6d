"""The ``device`` variable: a device's driver, attributes and capacities as CEL values.

A :class:`CelDevice` is built once per published device (by whoever owns the inventory) and
reused by every expression: it converts the device to CEL values at most once and carries the
per-device memo of selector results.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from extender.cel.errors import CelEvalError
from extender.cel.library.semver import STRICT as _SEMVER
from extender.cel.library.semver import SemverError, parse_semver
from extender.quantity import Quantity

#: An attribute as published: ``(kind, value)`` with kind one of int, bool, string, version
#: (scalars) or ints, bools, strings, versions (list values, DRAListTypeAttributes); list values
#: are tuples so that attributes stay hashable.
RawAttribute = tuple[str, Any]

SCALAR_KINDS = ("int", "bool", "string", "version")
_PLAIN_KINDS = frozenset({"int", "bool", "string"})
LIST_KINDS = ("ints", "bools", "strings", "versions")

DEVICE_FIELDS = ("driver", "attributes", "capacity", "allowMultipleAllocations")


class DefaultingMap(dict[str, Any]):
    """The outer ``attributes``/``capacity`` maps: an unknown domain reads as an empty map."""

    def __missing__(self, key: str) -> dict[str, Any]:
        return {}


class DeviceValue:
    """The runtime value of the ``device`` variable (type ``kubernetes.DRADevice``)."""

    __slots__ = DEVICE_FIELDS

    def __init__(
        self, driver: str, attributes: DefaultingMap, capacity: DefaultingMap, allow_multiple: bool
    ) -> None:
        self.driver = driver
        self.attributes = attributes
        self.capacity = capacity
        self.allowMultipleAllocations = allow_multiple

    def field(self, name: str) -> Any:
        return getattr(self, name)


def split_qualified(driver: str, name: str) -> tuple[str, str]:
    """``domain/id`` -> (domain, id); a bare id belongs to the driver's domain."""
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def group_by_domain(driver: str, flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``flat`` by domain (:func:`split_qualified`), domains in no particular order. Most names
    are bare (the driver's domain): they go in without being split, which was three quarters
    of this at 5,000 x 8 (done once per device, for 40,000 devices; issue 54)."""
    own: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {driver: own}
    for name, value in flat.items():
        if "/" in name:
            domain, ident = split_qualified(driver, name)
            grouped.setdefault(domain, {})[ident] = value
        else:
            own[name] = value
    if not own:
        del grouped[driver]
    return grouped


def kinds_convert(raw: Iterable[RawAttribute], list_attributes: bool) -> bool:
    """Whether every attribute converts to a CEL value, as far as its kind and (versions) its
    text tell: True means :meth:`CelDevice.value` succeeds; False is checked by converting (two
    names of one attribute, of which grouping by domain keeps one, can only make this False)."""
    for kind, value in raw:
        if kind in _PLAIN_KINDS:
            continue
        if kind == "version":
            if not _semver_valid(value):
                return False
        elif kind == "versions":
            if not list_attributes or not all(map(_semver_valid, value)):
                return False
        elif kind not in SCALAR_KINDS and not (list_attributes and kind in LIST_KINDS):
            return False
    return True


@functools.lru_cache(maxsize=4096)
def _semver_valid(text: str) -> bool:
    """Memoized: a cluster's devices publish a few version texts, each on thousands of them."""
    return _SEMVER.fullmatch(text) is not None


_Grouped = tuple[Mapping[str, Mapping[str, RawAttribute]], Mapping[str, Mapping[str, Quantity]]]


class CelDevice:
    """One device as CEL input, with its memoized conversion and selector results.

    Built from the slice's flat maps (:meth:`from_flat`), it groups them by domain only when an
    expression reads them: a claim's projection of a device (what decides which nodes look
    alike) reads the driver and checks the attributes' kinds, and at 5,000 x 8 the grouping
    of 50,000 devices, most never evaluated, was a sixth of the first filter (issue 54)."""

    __slots__ = (
        "_flat",
        "_grouped",
        "_signature",
        "_valid",
        "_value",
        "allow_multiple",
        "driver",
        "memo",
    )

    def __init__(
        self,
        driver: str,
        attributes: Mapping[str, Mapping[str, RawAttribute]],
        capacity: Mapping[str, Mapping[str, Quantity]],
        allow_multiple: bool = False,
    ) -> None:
        self.driver = driver
        #: (attributes, capacity) by domain, once grouped; set in one store, never unset (the
        #: make-room planner's thread reads the same devices as the event loop).
        self._grouped: _Grouped | None = (attributes, capacity)
        #: The flat maps this was built from (from_flat), kept: they are the Device's own.
        self._flat: tuple[Mapping[str, RawAttribute], Mapping[str, Quantity]] | None = None
        self.allow_multiple = allow_multiple
        #: program -> True | False | CelEvalError, filled by the environment.
        self.memo: dict[Any, Any] = {}
        self._value: dict[bool, DeviceValue | CelEvalError] = {}
        self._signature: tuple[Any, ...] | None = None
        self._valid: dict[bool, bool] = {}

    @classmethod
    def from_flat(
        cls,
        driver: str,
        attributes: Mapping[str, RawAttribute],
        capacity: Mapping[str, Quantity],
        allow_multiple: bool = False,
    ) -> CelDevice:
        """From ResourceSlice-style maps keyed by (possibly qualified) names."""
        device = cls(driver, {}, {}, allow_multiple)
        device._grouped = None
        device._flat = (attributes, capacity)
        return device

    @property
    def attributes(self) -> Mapping[str, Mapping[str, RawAttribute]]:
        """domain -> id -> (kind, value)"""
        return (self._grouped or self._group())[0]

    @property
    def capacity(self) -> Mapping[str, Mapping[str, Quantity]]:
        """domain -> id -> Quantity"""
        return (self._grouped or self._group())[1]

    def _group(self) -> _Grouped:
        # Two threads may both group: equal maps, either kept.
        assert self._flat is not None  # only from_flat leaves _grouped None
        attributes, capacity = self._flat
        grouped = self._grouped = (
            group_by_domain(self.driver, attributes),
            group_by_domain(self.driver, capacity),
        )
        return grouped

    def value(self, list_attributes: bool) -> DeviceValue:
        """The CEL value; conversion errors (bad versions, list values when unsupported) raise."""
        cached = self._value.get(list_attributes)
        if cached is None:
            cached = self._convert(list_attributes)
            self._value[list_attributes] = cached
        if isinstance(cached, CelEvalError):
            raise cached
        return cached

    def conversion_error(self, list_attributes: bool) -> CelEvalError | None:
        """Why this device cannot be converted (every expression fails on it), or ``None``."""
        valid = self._valid.get(list_attributes)
        if valid is None:
            valid = self._valid[list_attributes] = self._cheap_valid(list_attributes)
        if valid:
            return None
        try:
            self.value(list_attributes)
        except CelEvalError as exc:
            return exc
        return None

    def _cheap_valid(self, list_attributes: bool) -> bool:
        flat = self._flat
        if flat is not None:
            return kinds_convert(flat[0].values(), list_attributes)
        return kinds_convert((r for e in self.attributes.values() for r in e.values()), list_attributes)

    def _convert(self, list_attributes: bool) -> DeviceValue | CelEvalError:
        attributes = DefaultingMap()
        for domain, entries in self.attributes.items():
            converted: dict[str, Any] = {}
            for ident, raw in entries.items():
                kind = raw[0]
                if kind == "string" or kind == "int" or kind == "bool":
                    converted[ident] = raw[1]
                    continue
                try:
                    converted[ident] = convert_attribute(raw, list_attributes)
                except CelEvalError as exc:
                    name = ident if domain == self.driver else f"{domain}/{ident}"
                    return CelEvalError(f"attribute {name}: {exc}")
            attributes[domain] = converted
        capacity = DefaultingMap({domain: dict(entries) for domain, entries in self.capacity.items()})
        return DeviceValue(self.driver, attributes, capacity, self.allow_multiple)

    def signature(self) -> tuple[Any, ...]:
        """Everything CEL can observe of this device, as a hashable value."""
        if self._signature is None:
            self._signature = (
                self.driver,
                self.allow_multiple,
                tuple(sorted((d, tuple(sorted(e.items()))) for d, e in self.attributes.items())),
                tuple(
                    sorted(
                        (d, tuple(sorted((k, q.text or str(q.value)) for k, q in e.items())))
                        for d, e in self.capacity.items()
                    )
                ),
            )
        return self._signature


def convert_attribute(raw: RawAttribute, list_attributes: bool) -> Any:
    kind, value = raw
    if kind in ("int", "bool", "string"):
        return value
    if kind == "version":
        return _version(value)
    if kind in LIST_KINDS and list_attributes:
        if kind == "versions":
            return [_version(v) for v in value]
        return list(value)
    raise CelEvalError("unsupported attribute value")


def _version(text: str) -> Any:
    try:
        return parse_semver(text)
    except SemverError as exc:
        raise CelEvalError(f"parse semantic version: {exc}") from None
