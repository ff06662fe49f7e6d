"""Kubernetes ``resource.Quantity``: parsing, exact values, apimachinery's representation, formatting.

The parser follows apimachinery's ``ParseQuantity`` closely, including which values are kept as
an int64 amount with a decimal scale and which become arbitrary-precision decimals, because
CEL's ``isInteger()`` / ``asInteger()`` depend on that representation (``1000m`` is not an
integer). Values are exact :class:`fractions.Fraction` numbers.
"""

from __future__ import annotations

from fractions import Fraction

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_SUFFIX = "unable to parse quantity's suffix"
ERR_NUMERIC = "unable to parse numeric part of quantity"

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_MAX_INT64_FACTORS = 18
_NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """A string that is not a valid quantity (message as apimachinery's)."""


#: apimachinery's ``resource.Format`` values.
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"
BINARY_SI = "BinarySI"


class Quantity:
    """An exact quantity value plus apimachinery's internal representation and format."""

    __slots__ = ("_cached", "_int_amount", "format", "text", "value")

    def __init__(
        self,
        value: Fraction,
        int_amount: tuple[int, int] | None,
        text: str = "",
        *,
        format: str = DECIMAL_SI,
        cached: str = "",
    ) -> None:
        self.value = value
        #: ``(unscaled, scale)`` when apimachinery keeps an int64Amount, else ``None`` (inf.Dec).
        self._int_amount = int_amount
        self.text = text
        #: DecimalSI, DecimalExponent or BinarySI: how apimachinery writes the value back.
        self.format = format
        #: The original text when apimachinery keeps it (already canonical): written verbatim.
        self._cached = cached

    def __repr__(self) -> str:
        return f"quantity({self.text or str(self.value)!r})"

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and other.value == self.value

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

    def canonical(self) -> str:
        """The string apimachinery writes for this quantity (``Quantity.String()``).

        The original text when ParseQuantity kept it (``12e3`` stays ``12e3``), otherwise the
        canonical form in the quantity's format (``12000`` -> ``12k``, ``1024Mi`` -> ``1Gi``).
        """
        return self._cached or format_quantity(self.value, self.format)


def parse_quantity(text: str) -> Quantity:
    """Parse like apimachinery's ``ParseQuantity``; raises :class:`QuantityError`."""
    if not text:
        raise QuantityError(ERR_FORMAT)
    if text == "0":
        return Quantity(Fraction(0), (0, 0), text, cached=text)
    positive, value_text, num, denom, suffix = _split(text)
    interpreted = _interpret_suffix(suffix)
    if interpreted is None:
        raise QuantityError(ERR_SUFFIX)
    base, exponent = interpreted
    if base == 2:
        fmt = BINARY_SI
    elif suffix[:1] in ("e", "E"):
        fmt = DECIMAL_EXPONENT
    else:
        fmt = DECIMAL_SI

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
                # apimachinery keeps the text when it is already in canonical form.
                digits = num + denom
                if fmt == BINARY_SI:
                    keep = shifted & 0x07 != 0
                else:
                    keep = scale % 3 == 0 and not digits.endswith("000") and digits[0] != "0"
                return Quantity(
                    Fraction(result) * Fraction(10) ** scale,
                    (result, scale),
                    text,
                    format=fmt,
                    cached=text if keep else "",
                )

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
    if fmt == BINARY_SI and 0 < amount < 1:
        fmt = DECIMAL_SI  # "This avoids rounding and hopefully confusion, too."
    return Quantity(amount if positive else -amount, None, text, format=fmt)


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


def from_fraction(value: Fraction, a: Quantity, b: Quantity | None) -> Quantity:
    """The result of add/sub: int64 amount when both operands are and the result fits."""
    if a._int_amount is not None and (b is None or b._int_amount is not None):
        scale = min(
            a._int_amount[1], b._int_amount[1] if b is not None and b._int_amount else a._int_amount[1]
        )
        unscaled = value / Fraction(10) ** scale
        if unscaled.denominator == 1 and INT64_MIN <= unscaled.numerator <= INT64_MAX:
            return Quantity(value, (unscaled.numerator, scale))
    return Quantity(value, None)


def quantity_of(value: Fraction | int, binary: bool = False) -> Quantity:
    """A computed quantity (``resource.NewQuantity``): no kept text, canonical in its format."""
    value = Fraction(value)
    fmt = BINARY_SI if binary else DECIMAL_SI
    text = format_quantity(value, fmt)
    parsed = parse_quantity(text)
    return Quantity(value, parsed._int_amount, text, format=fmt)


def format_quantity(value: Fraction, fmt: str = DECIMAL_SI) -> str:
    """apimachinery's ``CanonicalizeBytes``: ``4Gi``, ``1500``, ``2k``, ``500m``, ``12e3``.

    BinarySI falls back to DecimalSI for magnitudes below 1024 and for fractions.
    """
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == BINARY_SI and magnitude.denominator == 1 and magnitude >= 1024:
        number = magnitude.numerator
        for suffix, exp in sorted(_BINARY_SUFFIXES.items(), key=lambda kv: -kv[1]):
            if number % (1 << exp) == 0:
                return f"{sign}{number >> exp}{suffix}"
        return f"{sign}{number}"
    # Decimal: the largest exponent (multiple of 3) that keeps an integer mantissa; values are
    # rounded up to nano units like apimachinery does.
    nanos = -(-magnitude.numerator * 10**9 // magnitude.denominator)
    for suffix, exp in sorted(_DECIMAL_SUFFIXES.items(), key=lambda kv: -kv[1]):
        scale = 10 ** (exp + 9)
        if nanos % scale == 0:
            mantissa = nanos // scale
            if exp > 0 and mantissa < 1:
                continue
            if fmt == DECIMAL_EXPONENT:
                return f"{sign}{mantissa}e{exp}" if exp else f"{sign}{mantissa}"
            return f"{sign}{mantissa}{suffix}"
    return f"{sign}{nanos}n"  # pragma: no cover - exp -9 always divides
