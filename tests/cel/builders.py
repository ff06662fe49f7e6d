"""Tiny builders for CEL tests: devices from ResourceSlice-style attribute maps."""

from __future__ import annotations

from typing import Any

from extender.cel import CelDevice, parse_quantity


def attribute(value: Any) -> tuple[str, Any]:
    """Python value -> published attribute: str, int, bool; ``v"1.2.3"`` via :func:`version`."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    return ("string", str(value))


def version(text: str) -> tuple[str, str]:
    return ("version", text)


def device(
    driver: str = "gpu.example.com",
    *,
    capacity: dict[str, str] | None = None,
    allow_multiple: bool = False,
    qualified: dict[str, Any] | None = None,
    **attributes: Any,
) -> CelDevice:
    """A device; ``qualified`` holds attributes with ``domain/name`` keys."""
    flat = {name: attribute(v) for name, v in {**attributes, **(qualified or {})}.items()}
    caps = {name: parse_quantity(q) for name, q in (capacity or {}).items()}
    return CelDevice.from_flat(driver, flat, caps, allow_multiple)


def yaml_device(spec: dict[str, Any]) -> CelDevice:
    """A device in the shared cases' format (``{name: {string: "x"}}``, ``{name: {value: "1Gi"}}``)."""
    attrs: dict[str, tuple[str, Any]] = {}
    for name, typed in (spec.get("attributes") or {}).items():
        ((kind, value),) = typed.items()
        attrs[name] = (kind, tuple(value) if isinstance(value, list) else value)
    caps = {name: parse_quantity(str(c["value"])) for name, c in (spec.get("capacity") or {}).items()}
    return CelDevice.from_flat(
        spec.get("driver", ""), attrs, caps, bool(spec.get("allowMultipleAllocations"))
    )
