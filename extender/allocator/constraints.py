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


class MatchAttribute(_Scoped):
    """All covered devices have the attribute, with one type and one value."""

    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.value: tuple[str, Any] | None = None
        self.count = 0

    def add(self, request: str, subrequest: str, device: Device) -> bool:
        if not self.covers(request, subrequest):
            return True
        value = device.attribute(self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value = value  # the first device can always be picked
        elif value[0] not in ("int", "bool", "string", "version") or value != self.value:
            return False  # versions compare as exact strings (SemVer requires minimal forms)
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str, device: Device) -> None:
        if self.covers(request, subrequest):
            self.count -= 1


class DistinctAttribute(_Scoped):
    """Covered devices have pairwise different values.

    Upstream remembers values per *request name*, so two devices of one request overwrite each
    other's remembered value; reproduced here.
    """

    def __init__(self, requests: tuple[str, ...], attribute: str) -> None:
        super().__init__(requests, attribute)
        self.values: dict[str, tuple[str, Any]] = {}

    def add(self, request: str, subrequest: str, device: Device) -> bool:
        if not self.covers(request, subrequest):
            return True
        value = device.attribute(self.attribute)
        if value is None:
            return False
        if any(value == seen for seen in self.values.values()):
            return False
        self.values[request] = value
        return True

    def remove(self, request: str, subrequest: str, device: Device) -> None:
        if self.covers(request, subrequest):
            self.values.pop(request, None)


Constraint = MatchAttribute | DistinctAttribute
