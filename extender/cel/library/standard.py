"""CEL's standard definitions: operators, size, string tests, conversions, time values."""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable
from typing import Any

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.regex import compile_regex
from extender.cel.library.registry import Registry
from extender.cel.values import (
    INT64_MAX,
    INT64_MIN,
    UINT64_MAX,
    TypeValue,
    UInt,
    cel_compare,
    cel_equal,
    cel_in,
    check_int,
    check_uint,
    format_double,
    to_cel_string,
    type_name,
)

# --- arithmetic ---------------------------------------------------------------------------


def _div_int(a: int, b: int) -> int:
    if b == 0:
        raise CelEvalError("division by zero")
    if a == INT64_MIN and b == -1:
        raise CelEvalError("integer overflow")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _mod_int(a: int, b: int) -> int:
    if b == 0:
        raise CelEvalError("modulus by zero")
    if a == INT64_MIN and b == -1:
        raise CelEvalError("integer overflow")
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _div_uint(a: UInt, b: UInt) -> UInt:
    if b == 0:
        raise CelEvalError("division by zero")
    return UInt(int(a) // int(b))


def _mod_uint(a: UInt, b: UInt) -> UInt:
    if b == 0:
        raise CelEvalError("modulus by zero")
    return UInt(int(a) % int(b))


def _div_double(a: float, b: float) -> float:
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _add_time(a: Any, b: Any) -> Any:
    try:
        return a + b
    except OverflowError as exc:
        raise CelEvalError("timestamp overflow") from exc


def _sub_time(a: Any, b: Any) -> Any:
    try:
        return a - b
    except OverflowError as exc:
        raise CelEvalError("timestamp overflow") from exc


# --- conversions --------------------------------------------------------------------------


def _int_from_double(v: float) -> int:
    if math.isnan(v) or math.isinf(v) or v <= INT64_MIN - 1.0 or v >= float(INT64_MAX):
        raise CelEvalError("double out of range of int")
    return int(v)


def _uint_from_double(v: float) -> UInt:
    if math.isnan(v) or math.isinf(v) or v <= -1.0 or v >= float(UINT64_MAX):
        raise CelEvalError("double out of range of uint")
    return UInt(int(v))


def _int_from_string(s: str) -> int:
    try:
        return check_int(int(s, 10))
    except ValueError as exc:
        raise CelEvalError(f"cannot convert string '{s}' to int") from exc


def _uint_from_string(s: str) -> UInt:
    try:
        return check_uint(int(s, 10))
    except ValueError as exc:
        raise CelEvalError(f"cannot convert string '{s}' to uint") from exc


_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf(inity)?|nan)$", re.I)


def _double_from_string(s: str) -> float:
    if not _FLOAT_TEXT.match(s):
        raise CelEvalError(f"cannot convert string '{s}' to double")
    return float(s)


_BOOL_TEXT = {
    "1": True,
    "t": True,
    "T": True,
    "TRUE": True,
    "true": True,
    "True": True,
    "0": False,
    "f": False,
    "F": False,
    "FALSE": False,
    "false": False,
    "False": False,
}


def _bool_from_string(s: str) -> bool:
    if s not in _BOOL_TEXT:
        raise CelEvalError(f"type conversion error from 'string' to 'bool': {s}")
    return _BOOL_TEXT[s]


# --- durations and timestamps -----------------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
#: google.protobuf.Duration range: +-10000 years.
_MAX_DURATION_SECONDS = 315_576_000_000


def parse_duration(text: str) -> _dt.timedelta:
    """Go ``time.ParseDuration`` syntax (``1h30m``, ``-1.5s``, ``0``)."""
    s = text
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return _dt.timedelta(0)
    pos = 0
    total = 0.0
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            raise CelEvalError(f"invalid duration: {text!r}")
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not s:
        raise CelEvalError(f"invalid duration: {text!r}")
    if total > _MAX_DURATION_SECONDS:
        raise CelEvalError("duration out of range")
    return _dt.timedelta(seconds=sign * total)


def parse_timestamp(text: str) -> _dt.datetime:
    """RFC 3339 timestamps (``2024-01-02T03:04:05Z``, fractional seconds, offsets)."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", text)
    if m is None:
        raise CelEvalError(f"invalid timestamp: {text!r}")
    frac = (m.group(3) or "")[:7]
    zone = "+00:00" if m.group(4) in ("Z", "z") else m.group(4)
    try:
        return _dt.datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{frac}{zone}").astimezone(_dt.UTC)
    except ValueError as exc:
        raise CelEvalError(f"invalid timestamp: {text!r}") from exc


def format_timestamp(ts: _dt.datetime) -> str:
    ts = ts.astimezone(_dt.UTC)
    base = ts.strftime("%Y-%m-%dT%H:%M:%S")
    if ts.microsecond:
        base += ("." + f"{ts.microsecond:06d}").rstrip("0")
    return base + "Z"


def format_duration(d: _dt.timedelta) -> str:
    micros = d // _dt.timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    secs, frac = divmod(micros, 1_000_000)
    return f"{sign}{secs}" + (("." + f"{frac:06d}").rstrip("0") if frac else "") + "s"


def _zone(tz: str) -> _dt.tzinfo:
    m = re.fullmatch(r"([+-])(\d{2}):(\d{2})", tz)
    if m:
        offset = _dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return _dt.timezone(-offset if m.group(1) == "-" else offset)
    if tz in ("UTC", "Z", ""):
        return _dt.UTC
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(tz)
    except Exception as exc:
        raise CelEvalError(f"unknown time zone {tz!r}") from exc


def _ts_getter(fn: Callable[[_dt.datetime], int]) -> tuple[Callable[[Any], int], Callable[[Any, str], int]]:
    def utc(ts: _dt.datetime) -> int:
        return fn(ts.astimezone(_dt.UTC))

    def zoned(ts: _dt.datetime, tz: str) -> int:
        return fn(ts.astimezone(_zone(tz)))

    return utc, zoned


_TIMESTAMP_GETTERS: dict[str, Callable[[_dt.datetime], int]] = {
    "getFullYear": lambda d: d.year,
    "getMonth": lambda d: d.month - 1,
    "getDayOfYear": lambda d: d.timetuple().tm_yday - 1,
    "getDayOfMonth": lambda d: d.day - 1,
    "getDate": lambda d: d.day,
    "getDayOfWeek": lambda d: (d.weekday() + 1) % 7,
    "getHours": lambda d: d.hour,
    "getMinutes": lambda d: d.minute,
    "getSeconds": lambda d: d.second,
    "getMilliseconds": lambda d: d.microsecond // 1000,
}

_DURATION_GETTERS: dict[str, Callable[[_dt.timedelta], int]] = {
    "getHours": lambda d: (
        int(d.total_seconds() // 3600) if d >= _dt.timedelta(0) else -int(-d.total_seconds() // 3600)
    ),
    "getMinutes": lambda d: int(d.total_seconds() / 60),
    "getSeconds": lambda d: int(d.total_seconds()),
    "getMilliseconds": lambda d: (d // _dt.timedelta(milliseconds=1)) % 1000,
}


# --- registration -----------------------------------------------------------------------------

_TYPE_IDENTS = ("int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type")


def _compare(op: str, test: Callable[[int], bool]) -> Callable[[Any, Any], bool]:
    def impl(a: Any, b: Any) -> bool:
        return test(cel_compare(a, b, op))

    return impl


def register(reg: Registry) -> None:
    for name in _TYPE_IDENTS:
        reg.type_idents[name] = TypeValue(name)

    A, K, V = t.A, t.K, t.V
    reg.add("_==_", "equals", (A, A), t.BOOL, cel_equal)
    reg.add("_!=_", "not_equals", (A, A), t.BOOL, lambda a, b: not cel_equal(a, b))
    reg.add("@in", "in_list", (A, t.list_of(A)), t.BOOL, cel_in, linear_cost=True)
    reg.add("@in", "in_map", (A, t.map_of(A, t.B)), t.BOOL, cel_in)
    reg.add("!_", "logical_not", (t.BOOL,), t.BOOL, lambda a: not a)
    reg.add("-_", "negate_int", (t.INT,), t.INT, lambda a: check_int(-a))
    reg.add("-_", "negate_double", (t.DOUBLE,), t.DOUBLE, lambda a: -a)

    for sym, name, test in (
        ("_<_", "less", lambda c: c < 0),
        ("_<=_", "less_equals", lambda c: c <= 0),
        ("_>_", "greater", lambda c: c > 0),
        ("_>=_", "greater_equals", lambda c: c >= 0),
    ):
        impl = _compare(sym, test)
        for ct in t.ORDERABLE:
            reg.add(sym, f"{name}_{ct.name}", (ct, ct), t.BOOL, impl)
        for a in t.NUMERIC:
            for b in t.NUMERIC:
                if a != b:
                    reg.add(sym, f"{name}_{a.name}_{b.name}", (a, b), t.BOOL, impl)

    reg.add("_+_", "add_int64", (t.INT, t.INT), t.INT, lambda a, b: check_int(a + b))
    reg.add("_+_", "add_uint64", (t.UINT, t.UINT), t.UINT, lambda a, b: check_uint(a + b))
    reg.add("_+_", "add_double", (t.DOUBLE, t.DOUBLE), t.DOUBLE, lambda a, b: a + b)
    reg.add("_+_", "add_string", (t.STRING, t.STRING), t.STRING, lambda a, b: a + b, linear_cost=True)
    reg.add("_+_", "add_bytes", (t.BYTES, t.BYTES), t.BYTES, lambda a, b: a + b, linear_cost=True)
    reg.add(
        "_+_", "add_list", (t.list_of(A), t.list_of(A)), t.list_of(A), lambda a, b: a + b, linear_cost=True
    )
    reg.add("_+_", "add_timestamp_duration", (t.TIMESTAMP, t.DURATION), t.TIMESTAMP, _add_time)
    reg.add("_+_", "add_duration_timestamp", (t.DURATION, t.TIMESTAMP), t.TIMESTAMP, _add_time)
    reg.add("_+_", "add_duration_duration", (t.DURATION, t.DURATION), t.DURATION, _add_time)
    reg.add("_-_", "subtract_int64", (t.INT, t.INT), t.INT, lambda a, b: check_int(a - b))
    reg.add("_-_", "subtract_uint64", (t.UINT, t.UINT), t.UINT, lambda a, b: check_uint(a - b))
    reg.add("_-_", "subtract_double", (t.DOUBLE, t.DOUBLE), t.DOUBLE, lambda a, b: a - b)
    reg.add("_-_", "subtract_timestamp_timestamp", (t.TIMESTAMP, t.TIMESTAMP), t.DURATION, _sub_time)
    reg.add("_-_", "subtract_timestamp_duration", (t.TIMESTAMP, t.DURATION), t.TIMESTAMP, _sub_time)
    reg.add("_-_", "subtract_duration_duration", (t.DURATION, t.DURATION), t.DURATION, _sub_time)
    reg.add("_*_", "multiply_int64", (t.INT, t.INT), t.INT, lambda a, b: check_int(a * b))
    reg.add("_*_", "multiply_uint64", (t.UINT, t.UINT), t.UINT, lambda a, b: check_uint(a * b))
    reg.add("_*_", "multiply_double", (t.DOUBLE, t.DOUBLE), t.DOUBLE, lambda a, b: a * b)
    reg.add("_/_", "divide_int64", (t.INT, t.INT), t.INT, _div_int)
    reg.add("_/_", "divide_uint64", (t.UINT, t.UINT), t.UINT, _div_uint)
    reg.add("_/_", "divide_double", (t.DOUBLE, t.DOUBLE), t.DOUBLE, _div_double)
    reg.add("_%_", "modulo_int64", (t.INT, t.INT), t.INT, _mod_int)
    reg.add("_%_", "modulo_uint64", (t.UINT, t.UINT), t.UINT, _mod_uint)

    for ct in (t.STRING, t.BYTES):
        reg.global_and_member("size", f"size_{ct.name}", (ct,), t.INT, len)
    reg.global_and_member("size", "size_list", (t.list_of(A),), t.INT, len)
    reg.global_and_member("size", "size_map", (t.map_of(K, V),), t.INT, len)

    S, B = t.STRING, t.BOOL
    reg.add("contains", "contains_string", (S, S), B, lambda s, x: x in s, member=True, linear_cost=True)
    reg.add("startsWith", "starts_with_string", (S, S), B, lambda s, x: s.startswith(x), member=True)
    reg.add("endsWith", "ends_with_string", (S, S), B, lambda s, x: s.endswith(x), member=True)
    reg.global_and_member(
        "matches", "matches", (S, S), B, lambda s, p: compile_regex(p).search(s) is not None, linear_cost=True
    )

    reg.add("int", "int64_to_int64", (t.INT,), t.INT, lambda v: v)
    reg.add("int", "uint64_to_int64", (t.UINT,), t.INT, lambda v: check_int(int(v)))
    reg.add("int", "double_to_int64", (t.DOUBLE,), t.INT, _int_from_double)
    reg.add("int", "string_to_int64", (S,), t.INT, _int_from_string)
    reg.add("int", "timestamp_to_int64", (t.TIMESTAMP,), t.INT, lambda ts: int(ts.timestamp()))
    reg.add("uint", "uint64_to_uint64", (t.UINT,), t.UINT, lambda v: v)
    reg.add("uint", "int64_to_uint64", (t.INT,), t.UINT, check_uint)
    reg.add("uint", "double_to_uint64", (t.DOUBLE,), t.UINT, _uint_from_double)
    reg.add("uint", "string_to_uint64", (S,), t.UINT, _uint_from_string)
    reg.add("double", "double_to_double", (t.DOUBLE,), t.DOUBLE, lambda v: v)
    reg.add("double", "int64_to_double", (t.INT,), t.DOUBLE, float)
    reg.add("double", "uint64_to_double", (t.UINT,), t.DOUBLE, float)
    reg.add("double", "string_to_double", (S,), t.DOUBLE, _double_from_string)
    for ct in (t.STRING, t.INT, t.UINT, t.BOOL, t.BYTES):
        reg.add("string", f"{ct.name}_to_string", (ct,), S, to_cel_string)
    reg.add("string", "double_to_string", (t.DOUBLE,), S, format_double)
    reg.add("string", "timestamp_to_string", (t.TIMESTAMP,), S, format_timestamp)
    reg.add("string", "duration_to_string", (t.DURATION,), S, format_duration)
    reg.add("bytes", "bytes_to_bytes", (t.BYTES,), t.BYTES, lambda v: v)
    reg.add("bytes", "string_to_bytes", (S,), t.BYTES, lambda v: v.encode("utf-8"))
    reg.add("bool", "bool_to_bool", (B,), B, lambda v: v)
    reg.add("bool", "string_to_bool", (S,), B, _bool_from_string)
    reg.add("dyn", "to_dyn", (A,), t.DYN, lambda v: v)
    reg.add("type", "type", (A,), t.type_of(A), lambda v: TypeValue(type_name(v)))
    reg.add("duration", "string_to_duration", (S,), t.DURATION, parse_duration)
    reg.add("duration", "duration_to_duration", (t.DURATION,), t.DURATION, lambda v: v)
    reg.add("timestamp", "string_to_timestamp", (S,), t.TIMESTAMP, parse_timestamp)
    reg.add("timestamp", "timestamp_to_timestamp", (t.TIMESTAMP,), t.TIMESTAMP, lambda v: v)
    reg.add(
        "timestamp",
        "int64_to_timestamp",
        (t.INT,),
        t.TIMESTAMP,
        lambda v: _dt.datetime.fromtimestamp(v, _dt.UTC),
    )

    for name, fn in _TIMESTAMP_GETTERS.items():
        utc, zoned = _ts_getter(fn)
        reg.add(name, f"timestamp_to_{name}", (t.TIMESTAMP,), t.INT, utc, member=True)
        reg.add(name, f"timestamp_to_{name}_with_tz", (t.TIMESTAMP, S), t.INT, zoned, member=True)
    for name, dfn in _DURATION_GETTERS.items():
        reg.add(name, f"duration_to_{name}", (t.DURATION,), t.INT, dfn, member=True)
