"""Kubernetes ``resource.Quantity`` and the CEL quantity library.

The parser follows apimachinery's ``ParseQuantity`` closely, including which values are kept as
an int64 amount with a decimal scale and which become arbitrary-precision decimals, because
``isInteger()`` / ``asInteger()`` depend on that representation (``1000m`` is not an integer).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry
from extender.cel.values import INT64_MAX, INT64_MIN, CelObject, no_such_overload

ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_SUFFIX = "unable to parse quantity's suffix"
ERR_NUMERIC = "unable to parse numeric part of quantity"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_MAX_INT64_FACTORS = 18
_NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """A string that is not a valid quantity (message as apimachinery's)."""


class Quantity(CelObject):
    """An exact quantity value plus apimachinery's internal representation flag."""

    __slots__ = ("_int_amount", "text", "value")
    cel_type_name = "kubernetes.Quantity"

    def __init__(self, value: Fraction, int_amount: tuple[int, int] | None, text: str = "") -> None:
        self.value = value
        #: ``(unscaled, scale)`` when apimachinery keeps an int64Amount, else ``None`` (inf.Dec).
        self._int_amount = int_amount
        self.text = text

    def __repr__(self) -> str:
        return f"quantity({self.text or str(self.value)!r})"

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.value == self.value

    def cel_equals(self, other: Any) -> bool:
        if not isinstance(other, Quantity):
            raise no_such_overload()
        return self.value == other.value

    def as_int64(self) -> int | None:
        """apimachinery's ``Quantity.AsInt64``: only int64 amounts with a non-negative scale."""
        if self._int_amount is None:
            return None
        unscaled, scale = self._int_amount
        if scale == 0:
            return unscaled
        if scale < 0:
            return None
        result: int = unscaled * 10**scale
        if result > INT64_MAX or result < INT64_MIN:
            return None
        return result

    def compare(self, other: Quantity) -> int:
        return (self.value > other.value) - (self.value < other.value)


def parse_quantity(text: str) -> Quantity:
    """Parse like apimachinery's ``ParseQuantity``; raises :class:`QuantityError`."""
    if not text:
        raise QuantityError(ERR_FORMAT)
    if text == "0":
        return Quantity(Fraction(0), (0, 0), text)
    positive, value_text, num, denom, suffix = _split(text)
    interpreted = _interpret_suffix(suffix)
    if interpreted is None:
        raise QuantityError(ERR_SUFFIX)
    base, exponent = interpreted

    precision = 0
    scale = 0
    mantissa = 1
    if base == 10:
        scale = exponent
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1

    if precision >= 0:
        scale -= len(denom)
        if scale >= -9:
            shifted = int(num + denom)
            if shifted > INT64_MAX:
                raise QuantityError(ERR_NUMERIC)
            result = shifted * mantissa
            if result <= INT64_MAX:
                if not positive:
                    result = -result
                return Quantity(Fraction(result) * Fraction(10) ** scale, (result, scale), text)

    # Arbitrary precision path (inf.Dec): exact value, rounded up (away from zero) to 1n.
    try:
        amount = Fraction(value_text.lstrip("+-") or "0")
    except (ValueError, ZeroDivisionError) as exc:
        raise QuantityError(ERR_NUMERIC) from exc
    amount *= Fraction(10) ** exponent if base == 10 else Fraction(2) ** exponent
    if amount != 0:
        scaled = amount / _NANO
        rounded = -(-scaled.numerator // scaled.denominator)  # ceiling of a positive number
        amount = rounded * _NANO
    if base == 2 and amount > INT64_MAX:
        amount = Fraction(INT64_MAX)
    return Quantity(amount if positive else -amount, None, text)


def _interpret_suffix(suffix: str) -> tuple[int, int] | None:
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix]
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        try:
            return 10, int(suffix[1:])
        except ValueError:
            return None
    return None


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """apimachinery's ``parseQuantityString``: sign, numeric text, numerator, denominator, suffix."""
    positive = True
    pos = 0
    end = len(text)
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        dstart = pos
        while pos < end and text[pos].isdigit() and text[pos].isascii():
            pos += 1
        denom = text[dstart:pos]
    value_text = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in "eEinumkKMGTP":
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos].isdigit() and text[pos].isascii():
        pos += 1
    if pos < end:
        raise QuantityError(ERR_FORMAT)
    return positive, value_text, num, denom, text[suffix_start:]


def _from_fraction(value: Fraction, a: Quantity, b: Quantity | None) -> Quantity:
    """The result of add/sub: int64 amount when both operands are and the result fits."""
    if a._int_amount is not None and (b is None or b._int_amount is not None):
        scale = min(
            a._int_amount[1], b._int_amount[1] if b is not None and b._int_amount else a._int_amount[1]
        )
        unscaled = value / Fraction(10) ** scale
        if unscaled.denominator == 1 and INT64_MIN <= unscaled.numerator <= INT64_MAX:
            return Quantity(value, (unscaled.numerator, scale))
    return Quantity(value, None)


# --- CEL functions ------------------------------------------------------------------------------


def cel_quantity(text: str) -> Quantity:
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        raise CelEvalError(str(exc)) from None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _as_integer(q: Quantity) -> int:
    value = q.as_int64()
    if value is None:
        raise CelEvalError("cannot convert value to integer")
    return value


def _sign(q: Quantity) -> int:
    return (q.value > 0) - (q.value < 0)


def _add(q: Quantity, other: Quantity | int) -> Quantity:
    if isinstance(other, Quantity):
        return _from_fraction(q.value + other.value, q, other)
    return _from_fraction(q.value + other, q, Quantity(Fraction(other), (other, 0)))


def _sub(q: Quantity, other: Quantity | int) -> Quantity:
    if isinstance(other, Quantity):
        return _from_fraction(q.value - other.value, q, other)
    return _from_fraction(q.value - other, q, Quantity(Fraction(other), (other, 0)))


def register(reg: Registry) -> None:
    Q, S, B, Int = t.QUANTITY, t.STRING, t.BOOL, t.INT
    reg.register_object(Quantity, Q)
    reg.add("quantity", "string_to_quantity", (S,), Q, cel_quantity)
    reg.add("isQuantity", "is_quantity_string", (S,), B, _is_quantity)
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
