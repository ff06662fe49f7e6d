"""A device's attributes as a ResourceSlice publishes them: ``{name: {kind: value}}``, read
into ``{name: (kind, value)}`` (:data:`extender.cel.device.RawAttribute`).

A value of the wrong JSON type for its kind is an :class:`ObjectError`: kube-apiserver refuses
such a slice, and a state file must not carry one past it (a version that was a number made
CEL's conversion raise in every filter that looked at the device).
"""

from __future__ import annotations

from typing import Any

from extender.model.errors import ObjectError
from extender.model.reader import Reader

#: The JSON type of each kind's value (kube-apiserver refuses any other; a state file may not).
_SCALAR_TYPE: dict[str, type] = {"int": int, "bool": bool, "string": str, "version": str}
#: The kinds (the keys of an attribute's value) and the JSON type each holds.
_KIND_TEXT = {
    "int": "a 64-bit integer",
    "bool": "a boolean",
    "string": "a string",
    "version": "a string",
    "ints": "a list of 64-bit integers",
    "bools": "a list of booleans",
    "strings": "a list of strings",
    "versions": "a list of strings",
}


def _list_of(raw: Any, kind: str) -> bool:
    element = _SCALAR_TYPE[kind[:-1]]
    return isinstance(raw, list) and all(type(v) is element and _fits(v) for v in raw)


def _fits(value: Any) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


def parse_attributes(reader: Reader) -> dict[str, tuple[str, Any]]:
    """``{name: {kind: value}}`` -> ``{name: (kind, value)}`` (list values as tuples); hot on sync."""
    out: dict[str, tuple[str, Any]] = {}
    for name, typed in reader.data.items():
        if not isinstance(typed, dict):
            raise ObjectError(f"{reader.path}.{name}: expected a mapping, got {type(typed).__name__}")
        for key, raw in typed.items():  # the first kind set is the value
            if raw is None or key not in _KIND_TEXT:
                continue
            scalar = _SCALAR_TYPE.get(key)
            # type(), not isinstance: True is an int in Python, not in JSON.
            if scalar is not None and type(raw) is scalar and (scalar is not int or _fits(raw)):
                out[name] = (key, raw)
            elif scalar is None and _list_of(raw, key):
                out[name] = (key, tuple(raw))
            else:
                raise ObjectError(f"{reader.path}.{name}.{key}: expected {_KIND_TEXT[key]}")
            break
        else:
            out[name] = ("unknown", None)
    return out
