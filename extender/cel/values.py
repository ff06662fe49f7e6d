"""Runtime CEL values on plain Python objects, and CEL's equality and ordering rules.

Representation: int -> ``int``, uint -> :class:`UInt`, double -> ``float``, bool -> ``bool``,
string -> ``str``, bytes -> ``bytes``, null -> ``None``, list -> ``list``, map -> ``dict``,
timestamp -> aware ``datetime``, duration -> ``timedelta``, optional -> :class:`Optional`,
type -> :class:`TypeValue`; the Kubernetes library types are classes of their own modules.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from extender.cel.errors import CelEvalError
from extender.quantity import Quantity

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


class UInt(int):
    """A CEL ``uint`` (Python ints are unbounded; range checks happen in the operators)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class TypeValue:
    """A CEL type used as a value: ``type(x) == int``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TypeValue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("type", self.name))

    def __repr__(self) -> str:
        return self.name


class Optional:
    """A CEL ``optional_type`` value (``optional.of(x)``, ``m.?k``)."""

    __slots__ = ("has", "value")

    def __init__(self, has: bool, value: Any = None) -> None:
        self.has = has
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Optional):
            return NotImplemented
        if self.has != other.has:
            return False
        return not self.has or cel_equal(self.value, other.value)

    def __hash__(self) -> int:
        return hash(("optional", self.has))

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.has else "optional.none()"


NONE = Optional(False)


class CelObject:
    """Base of library value types (Quantity, Semver, IP, ...): named, with CEL equality."""

    __slots__ = ()
    cel_type_name = "object"

    def cel_equals(self, other: Any) -> bool:
        """CEL ``==`` with this value on the left; foreign right-hand types are no overload."""
        raise NotImplementedError


def no_such_overload(function: str = "", *args: Any) -> CelEvalError:
    if not function:
        return CelEvalError("no such overload")
    return CelEvalError(f"no such overload: {function}({', '.join(type_name(a) for a in args)})")


def type_name(value: Any) -> str:
    """The CEL type name of a runtime value (as in ``type(x)`` and in error messages)."""
    t = type(value)
    if t is bool:
        return "bool"
    if t is int:
        return "int"
    if t is UInt:
        return "uint"
    if t is float:
        return "double"
    if t is str:
        return "string"
    if t is bytes:
        return "bytes"
    if value is None:
        return "null_type"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, CelObject):
        return value.cel_type_name
    if isinstance(value, Quantity):
        return "kubernetes.Quantity"
    if isinstance(value, Optional):
        return "optional_type"
    if isinstance(value, TypeValue):
        return "type"
    if isinstance(value, _dt.datetime):
        return "google.protobuf.Timestamp"
    if isinstance(value, _dt.timedelta):
        return "google.protobuf.Duration"
    return t.__name__


_GO_TYPE_NAMES = {
    "bool": "types.Bool",
    "int": "types.Int",
    "uint": "types.Uint",
    "double": "types.Double",
    "string": "types.String",
    "bytes": "types.Bytes",
    "null_type": "types.Null",
}


def go_type_name(value: Any) -> str:
    """The cel-go implementation type name used in some upstream error texts."""
    name = type_name(value)
    return _GO_TYPE_NAMES.get(name, name)


def is_number(value: Any) -> bool:
    t = type(value)
    return t is int or t is float or t is UInt


def _numbers_equal(a: Any, b: Any) -> bool:
    # Exact comparison across int/uint/double, as cel-go's heterogeneous numeric equality.
    if type(a) is float or type(b) is float:
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return False
        if type(a) is float and type(b) is float:
            return fa == fb
        # int vs double: compare exactly without float rounding of the integer.
        f, i = (a, b) if type(a) is float else (b, a)
        if math.isinf(f):
            return False
        return f.is_integer() and int(f) == int(i)
    return int(a) == int(b)


def cel_equal(a: Any, b: Any) -> bool:
    """CEL ``==`` (heterogeneous equality: mismatched types are simply unequal).

    Library types on the *left* with a foreign right-hand side raise ``no such overload``,
    as their cel-go ``Equal`` does (``semver("1.0.0") == "1.0.0"`` is an error, the reverse false).
    """
    ta = type(a)
    if ta is str or ta is bool or ta is bytes:
        return type(b) is ta and a == b
    if ta is int or ta is float or ta is UInt:
        return is_number(b) and _numbers_equal(a, b)
    if a is None:
        return b is None
    if isinstance(a, CelObject):
        return a.cel_equals(b)
    if isinstance(a, Quantity):
        if not isinstance(b, Quantity):
            raise no_such_overload()
        return a.value == b.value
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return False
        return all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        if not isinstance(b, dict) or len(a) != len(b):
            return False
        for k, v in a.items():
            found, other = map_lookup(b, k)
            if not found or not cel_equal(v, other):
                return False
        return True
    if isinstance(a, Optional | TypeValue):
        return bool(a == b)
    if isinstance(a, _dt.datetime | _dt.timedelta):
        return type(b) is ta and a == b
    return False


def map_lookup(m: dict[Any, Any], key: Any) -> tuple[bool, Any]:
    """Look a key up in a CEL map, with numeric keys equal across int/uint/double."""
    tk = type(key)
    if tk is str:
        if key in m:
            return True, m[key]
        return False, None
    if tk is bool:
        for k, v in m.items():
            if type(k) is bool and k == key:
                return True, v
        return False, None
    if tk is float:
        if not key.is_integer():
            return False, None
        key = int(key)
    if tk is int or tk is UInt or tk is float:
        for k, v in m.items():
            if type(k) in (int, UInt) and int(k) == key:
                return True, v
    return False, None


def cel_in(value: Any, container: Any) -> bool:
    if isinstance(container, list):
        return any(cel_equal(value, e) for e in container)
    if isinstance(container, dict):
        return map_lookup(container, value)[0]
    raise no_such_overload("@in", value, container)


def _compare_numbers(a: Any, b: Any) -> int:
    if type(a) is float or type(b) is float:
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            raise CelEvalError("NaN values cannot be ordered")
        if type(a) is not float:
            # int/uint vs double: exact comparison via fractions of the float.
            from fractions import Fraction

            fra = Fraction(int(a))
            frb = Fraction(fb) if math.isfinite(fb) else None
            if frb is None:
                return -1 if fb > 0 else 1
            return (fra > frb) - (fra < frb)
        if type(b) is not float:
            return -_compare_numbers(b, a)
        return (fa > fb) - (fa < fb)
    ia, ib = int(a), int(b)
    return (ia > ib) - (ia < ib)


def cel_compare(a: Any, b: Any, op: str) -> int:
    """Three-way comparison for ``<``, ``<=``, ``>``, ``>=`` (cross-type numerics allowed)."""
    ta, tb = type(a), type(b)
    if (ta is int or ta is float or ta is UInt) and (tb is int or tb is float or tb is UInt):
        return _compare_numbers(a, b)
    if (ta is tb and ta in (str, bool, bytes, _dt.timedelta)) or (
        isinstance(a, _dt.datetime) and isinstance(b, _dt.datetime)
    ):
        return int(a > b) - int(a < b)
    raise no_such_overload(op, a, b)


def iterable(value: Any) -> list[Any]:
    """The iteration range of a comprehension: list elements or map keys."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        return list(value.keys())
    raise CelEvalError(f"got '{go_type_name(value)}', expected iterable type")


def format_double(value: float) -> str:
    """Format a double like Go's ``strconv.FormatFloat(f, 'g', -1, 64)`` (cel-go ``string()``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, exp = _shortest_digits(value)
    # Go's %g with shortest precision uses the exponent form when exp < -4 || exp >= 6.
    eprec = 6
    sign = "-" if value < 0 else ""
    if exp < -4 or exp >= eprec:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    if exp >= len(digits) - 1:
        return sign + digits + "0" * (exp - len(digits) + 1)
    if exp >= 0:
        return sign + digits[: exp + 1] + "." + digits[exp + 1 :]
    return sign + "0." + "0" * (-exp - 1) + digits


def _shortest_digits(value: float) -> tuple[str, int]:
    text = repr(abs(value))
    if "e" in text:
        mant, exp_s = text.split("e")
        exp = int(exp_s)
    else:
        mant, exp = text, 0
    if "." in mant:
        whole, frac = mant.split(".")
    else:
        whole, frac = mant, ""
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    # Position of the decimal point relative to the first significant digit.
    lead_zeros = len(whole + frac) - len((whole + frac).lstrip("0"))
    exp10 = len(whole) - 1 - lead_zeros + exp
    digits = digits.rstrip("0") or "0"
    return digits, exp10


def to_cel_string(value: Any) -> str:
    """CEL ``string(x)`` for the standard scalar types."""
    t = type(value)
    if t is str:
        return str(value)
    if t is bool:
        return "true" if value else "false"
    if t is int or t is UInt:
        return str(int(value))
    if t is float:
        return format_double(value)
    if t is bytes:
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CelEvalError("invalid UTF-8 in bytes, cannot convert to string") from exc
    raise no_such_overload("string", value)


def check_int(value: int) -> int:
    if value < INT64_MIN or value > INT64_MAX:
        raise CelEvalError("integer overflow")
    return value


def check_uint(value: int) -> UInt:
    if value < 0 or value > UINT64_MAX:
        raise CelEvalError("unsigned integer overflow")
    return UInt(value)


def debug_repr(value: Any) -> str:
    """A short CEL-like rendering of a value, for error messages."""
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(debug_repr(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{debug_repr(k)}: {debug_repr(v)}" for k, v in value.items()) + "}"
    if value is None:
        return "null"
    return repr(value) if not isinstance(value, float) else format_double(value)
