"""Claim constraints: ``matchAttribute`` and ``distinctAttribute`` (with upstream's quirks)."""

from __future__ import annotations

from typing import Any

from extender.model.dra import Device


class _Scoped:
    """The requests a constraint covers: empty = all; ``req`` or ``req/sub`` entries."""

    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute

    def covers(self, request: str, subrequest: str) -> bool:
        if not self.requests:
            return True
        if request in self.requests:
            return True
        return bool(subrequest) and f"{request}/{subrequest}" in self.requests


#: Attribute kinds and the family their values compare within (scalars and lists alike).
_FAMILY = {
    "int": "int",
    "ints": "int",
    "bool": "bool",
    "bools": "bool",
    "string": "string",
    "strings": "string",
    "version": "version",
    "versions": "version",
}


def _as_set(value: tuple[str, Any]) -> tuple[str, frozenset[Any]] | None:
    """Upstream ``attributeAsSet`` (DRAListTypeAttributes): a value as (family, set), None if unusable.

    Scalars become one-element sets; an empty list is no value (upstream's switch falls
    through to "unknown type"). Versions compare as exact strings (SemVer's minimal forms).
    """
    kind, raw = value
    family = _FAMILY.get(kind)
    if family is None:
        return None
    if kind == family:
        return family, frozenset((raw,))
    return (family, frozenset(raw)) if raw else None


class MatchAttribute(_Scoped):
    """All covered devices have the attribute, with one type and one value.

    With DRAListTypeAttributes (``list_values``) values are sets: each device's set must meet
    the intersection of the devices before it, which then narrows to the common values. The
    intersections form a stack, so undoing a device restores the one before it
    (kubernetes#140325, v1.37.0; 1.36 kept the narrowed set after a backtrack).
    """

    def __init__(self, requests: tuple[str, ...], attribute: str, *, list_values: bool = False) -> None:
        super().__init__(requests, attribute)
        self.list_values = list_values
        self.value: tuple[str, Any] | None = None
        self.count = 0
        self._intersections: list[tuple[str, frozenset[Any]]] = []

    def _narrowed(self, device: Device) -> tuple[str, frozenset[Any]] | None:
        """The intersection after adding ``device`` (list semantics), None if it does not fit."""
        value = device.attribute(self.attribute)
        if value is None:
            return None
        values = _as_set(value)
        if values is None:
            return None
        if not self._intersections:
            return values
        family, current = self._intersections[-1]
        if values[0] != family or not (current & values[1]):
            return None
        return family, current & values[1]

    def admits(self, device: Device) -> bool:
        """Whether :meth:`add` would accept ``device`` now (for a request it covers), changing nothing."""
        if self.list_values:
            return self._narrowed(device) is not None
        value = device.attribute(self.attribute)
        if value is None:
            return False
        if self.count == 0:
            return True  # the first device can always be picked
        # Versions compare as exact strings (SemVer requires minimal forms).
        return value[0] in ("int", "bool", "string", "version") and value == self.value

    def add(self, request: str, subrequest: str, device: Device) -> bool:
        if not self.covers(request, subrequest):
            return True
        if self.list_values:
            narrowed = self._narrowed(device)
            if narrowed is None:
                return False
            self._intersections.append(narrowed)
        elif not self.admits(device):
            return False
        elif self.count == 0:
            self.value = device.attribute(self.attribute)
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str, device: Device) -> None:
        if self.covers(request, subrequest):
            self.count -= 1
            if self._intersections:
                self._intersections.pop()


class DistinctAttribute(_Scoped):
    """Covered devices have pairwise different values.

    Upstream remembers values per *request name*, so two devices of one request overwrite each
    other's remembered value; reproduced here.
    """

    def __init__(self, requests: tuple[str, ...], attribute: str, *, list_values: bool = False) -> None:
        super().__init__(requests, attribute)
        self.list_values = list_values
        self.values: dict[str, tuple[str, Any]] = {}

    def add(self, request: str, subrequest: str, device: Device) -> bool:
        if not self.covers(request, subrequest):
            return True
        value = device.attribute(self.attribute)
        if value is None:
            return False
        if self.values and not self._distinct(value):
            return False
        self.values[request] = value
        return True

    def _distinct(self, value: tuple[str, Any]) -> bool:
        if not self.list_values:
            # Upstream's scalar switch: an unknown (list) kind never matches.
            return value[0] in ("int", "bool", "string", "version") and all(
                value != seen for seen in self.values.values()
            )
        # DRAListTypeAttributes: pairwise disjoint sets (upstream matchesAttribute, experimental).
        values = _as_set(value)
        if values is None:
            return False
        for seen in self.values.values():
            other = _as_set(seen)
            if other is not None and other[0] == values[0] and other[1] & values[1]:
                return False
        return True

    def remove(self, request: str, subrequest: str, device: Device) -> None:
        if self.covers(request, subrequest):
            self.values.pop(request, None)


Constraint = MatchAttribute | DistinctAttribute
