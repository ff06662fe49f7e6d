"""The CEL quantity library (``quantity()``, ``isGreaterThan`` ...) over :mod:`extender.quantity`."""

from __future__ import annotations

from fractions import Fraction

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry, parses
from extender.quantity import Quantity, QuantityError, from_fraction, parse_quantity

# --- CEL functions ------------------------------------------------------------------------------


def cel_quantity(text: str) -> Quantity:
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        raise CelEvalError(str(exc)) from None


def _as_integer(q: Quantity) -> int:
    value = q.as_int64()
    if value is None:
        raise CelEvalError("cannot convert value to integer")
    return value


def _sign(q: Quantity) -> int:
    return (q.value > 0) - (q.value < 0)


def _add(q: Quantity, other: Quantity | int) -> Quantity:
    if isinstance(other, Quantity):
        return from_fraction(q.value + other.value, q, other)
    return from_fraction(q.value + other, q, Quantity(Fraction(other), (other, 0)))


def _sub(q: Quantity, other: Quantity | int) -> Quantity:
    if isinstance(other, Quantity):
        return from_fraction(q.value - other.value, q, other)
    return from_fraction(q.value - other, q, Quantity(Fraction(other), (other, 0)))


def register(reg: Registry) -> None:
    Q, S, B, Int = t.QUANTITY, t.STRING, t.BOOL, t.INT
    reg.register_object(Quantity, Q)
    reg.add("quantity", "string_to_quantity", (S,), Q, cel_quantity)
    reg.add("isQuantity", "is_quantity_string", (S,), B, parses(parse_quantity, QuantityError))
    reg.add("sign", "quantity_sign", (Q,), Int, _sign)
    reg.add(
        "isGreaterThan", "quantity_is_greater_than", (Q, Q), B, lambda a, b: a.compare(b) > 0, member=True
    )
    reg.add("isLessThan", "quantity_is_less_than", (Q, Q), B, lambda a, b: a.compare(b) < 0, member=True)
    reg.add("compareTo", "quantity_compare_to", (Q, Q), Int, lambda a, b: a.compare(b), member=True)
    reg.add("asApproximateFloat", "quantity_get_float", (Q,), t.DOUBLE, lambda q: float(q.value), member=True)
    reg.add("asInteger", "quantity_get_int", (Q,), Int, _as_integer, member=True)
    reg.add("isInteger", "quantity_is_integer", (Q,), B, lambda q: q.as_int64() is not None, member=True)
    reg.add("add", "quantity_add", (Q, Q), Q, _add, member=True)
    reg.add("add", "quantity_add_int", (Q, Int), Q, _add, member=True)
    reg.add("sub", "quantity_sub", (Q, Q), Q, _sub, member=True)
    reg.add("sub", "quantity_sub_int", (Q, Int), Q, _sub, member=True)
