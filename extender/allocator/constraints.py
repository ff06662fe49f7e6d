"""Claim constraints: ``matchAttribute`` and ``distinctAttribute`` (with upstream's quirks).

A constraint asks ``value_of(attribute)`` for the device being added, and only when it covers
the device's request: a derived attribute (DRADerivedAttributes) is evaluated lazily, as
upstream's ``lookupAttribute`` is, and its errors propagate to the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: An attribute's value for the device being added, None when it has none.
ValueOf = Callable[[str], "tuple[str, Any] | None"]


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

    def _narrowed(self, value: tuple[str, Any] | None) -> tuple[str, frozenset[Any]] | None:
        """The intersection after adding a device of ``value`` (list semantics), None if it does not fit."""
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

    def admits(self, value: tuple[str, Any] | None) -> bool:
        """Whether :meth:`add` would accept a device of ``value`` now (for a request it covers),
        changing nothing."""
        if self.list_values:
            return self._narrowed(value) is not None
        if value is None:
            return False
        if self.count == 0:
            return True  # the first device can always be picked
        # Versions compare as exact strings (SemVer requires minimal forms).
        return value[0] in ("int", "bool", "string", "version") and value == self.value

    def add(self, request: str, subrequest: str, value_of: ValueOf) -> bool:
        if not self.covers(request, subrequest):
            return True
        value = value_of(self.attribute)
        if self.list_values:
            narrowed = self._narrowed(value)
            if narrowed is None:
                return False
            self._intersections.append(narrowed)
        elif not self.admits(value):
            return False
        elif self.count == 0:
            self.value = value
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if self.covers(request, subrequest):
            self.count -= 1
            if self._intersections:
                self._intersections.pop()


class DistinctAttribute(_Scoped):
    """Covered devices have pairwise different values.

    ``every_device`` (1.37+): each added device's value is remembered, and undoing a device
    forgets the last one (kubernetes#140600, in v1.37.0: a request of several devices could
    repeat a value). Before, upstream remembered values per *request name*, so two devices of
    one request overwrote each other's remembered value, and the first device was always
    accepted; reproduced for 1.34-1.36 (read at v1.36.3, structured/internal/incubating
    ``distinctAttributeConstraint``).
    """

    def __init__(
        self,
        requests: tuple[str, ...],
        attribute: str,
        *,
        list_values: bool = False,
        every_device: bool = True,
    ) -> None:
        super().__init__(requests, attribute)
        self.list_values = list_values
        self.every_device = every_device
        self.values: dict[str, tuple[str, Any]] = {}
        self.added: list[tuple[str, Any]] = []

    def add(self, request: str, subrequest: str, value_of: ValueOf) -> bool:
        if not self.covers(request, subrequest):
            return True
        value = value_of(self.attribute)
        if value is None:
            return False
        if self.every_device:
            if not self._distinct(value, self.added, first_free=False):
                return False
            self.added.append(value)
            return True
        if self.values and not self._distinct(value, list(self.values.values()), first_free=True):
            return False
        self.values[request] = value
        return True

    def _distinct(self, value: tuple[str, Any], seen: list[tuple[str, Any]], *, first_free: bool) -> bool:
        if not self.list_values:
            # Upstream's scalar switch: an unknown (list) kind never matches an earlier value.
            return not seen or (
                value[0] in ("int", "bool", "string", "version") and all(value != s for s in seen)
            )
        # DRAListTypeAttributes: pairwise disjoint sets (upstream matchesAttribute, experimental);
        # 1.37 refuses a value that is no set even for the first device.
        values = _as_set(value)
        if values is None:
            return first_free and not seen
        for earlier in seen:
            other = _as_set(earlier)
            if other is not None and other[0] == values[0] and other[1] & values[1]:
                return False
        return True

    def remove(self, request: str, subrequest: str) -> None:
        if not self.covers(request, subrequest):
            return
        if self.every_device:
            self.added.pop()
        else:
            self.values.pop(request, None)


Constraint = MatchAttribute | DistinctAttribute
