"""Derived attributes (DRADerivedAttributes, 1.37): a CEL result as a device attribute.

A request's ``derivedAttributes`` give constraints a value computed per device by a CEL
expression over the same ``device`` variable as selectors. The checks mirror upstream's
``cel`` package (kubernetes/kubernetes staging/src/k8s.io/dynamic-resource-allocation/cel:
``validateOutputType`` for derived attributes and ``valToDeviceAttribute``; read in the
1.37-era blobs the index holds, no file was stored at the v1.37.0 tag):

- at compile time the result must be bool, int, string, semver, dyn, or a list of one of
  them (the scheduler compiles stored expressions, so lists are accepted whatever
  DRAListTypeAttributes says);
- at run time bools, ints, strings and semvers become scalar attributes, a list becomes a list
  attribute typed by its first element, and an empty list an empty string list (which no
  list-aware constraint accepts).
"""

from __future__ import annotations

from typing import Any

from extender.cel import types as t
from extender.cel.device import RawAttribute
from extender.cel.errors import CelEvalError
from extender.cel.library.semver import Semver
from extender.cel.values import UInt, type_name

_SCALARS = (t.BOOL, t.INT, t.STRING, t.SEMVER)

#: Go's ``%T`` of cel-go's native values, as upstream's messages print them.
_GO_NATIVE = {
    "bool": "bool",
    "int": "int64",
    "uint": "uint64",
    "double": "float64",
    "string": "string",
    "bytes": "[]uint8",
    "null_type": "structpb.NullValue",
    "map": "map[ref.Val]ref.Val",
    "list": "[]ref.Val",
    "kubernetes.Semver": "semver.Version",
    "kubernetes.Quantity": "*resource.Quantity",
}


def output_type_error(result: t.CelType) -> str | None:
    """Why an expression of static type ``result`` cannot be a derived attribute, or None."""

    def allowed(typ: t.CelType) -> bool:
        return t.is_dyn(typ) or typ in _SCALARS

    if allowed(result) or (result.name == "list" and allowed(result.params[0])):
        return None
    return (
        "must evaluate to a primitive scalar (string, integer, boolean, semver) or a list of these "
        f"scalars, not {result}"
    )


def _native(value: Any) -> str:
    name = type_name(value)
    return _GO_NATIVE.get(name, name)


def _scalar(value: Any) -> RawAttribute | None:
    kind = type(value)
    if kind is bool:
        return ("bool", value)
    if kind is int:
        return ("int", value)
    if kind is str:
        return ("string", value)
    if isinstance(value, Semver):
        return ("version", repr(value))
    return None


def to_attribute(value: Any) -> RawAttribute | CelEvalError:
    """Upstream ``valToDeviceAttribute``: the attribute, or the error as a value."""
    if isinstance(value, UInt):
        return CelEvalError(f"unsupported CEL return type: {_native(value)}")
    scalar = _scalar(value)
    if scalar is not None:
        return scalar
    if not isinstance(value, list):
        return CelEvalError(f"unsupported CEL return type: {_native(value)}")
    if not value:
        return ("strings", ())
    first = _scalar(value[0]) if not isinstance(value[0], UInt) else None
    if first is None:
        return CelEvalError(f"unsupported list element type: {_native(value[0])}")
    kind, word = {
        "bool": ("bools", "bool"),
        "int": ("ints", "int"),
        "string": ("strings", "string"),
        "version": ("versions", "semver"),
    }[first[0]]
    out = []
    for index, element in enumerate(value):
        converted = None if isinstance(element, UInt) else _scalar(element)
        if converted is None or converted[0] != first[0]:
            return CelEvalError(
                f"expected list element at index {index} to be {word}, got {_native(element)}"
            )
        out.append(converted[1])
    return (kind, tuple(out))
