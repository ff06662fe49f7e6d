"""cel-go's ext.Strings (version 2, as Kubernetes configures it) and ``strings.quote``."""

from __future__ import annotations

import math
from typing import Any

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry
from extender.cel.values import UInt, debug_repr, format_double, to_cel_string, type_name


def _index_error(i: int) -> CelEvalError:
    return CelEvalError(f"index out of range: {i}")


def _char_at(s: str, i: int) -> str:
    if i < 0 or i > len(s):
        raise _index_error(i)
    return s[i : i + 1]


def _index_of(s: str, sub: str, offset: int = 0) -> int:
    if offset < 0 or offset > len(s):
        raise _index_error(offset)
    return s.find(sub, offset)


def _last_index_of(s: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return s.rfind(sub)
    if (offset < 0 or offset >= len(s)) and not (offset == 0 and not s):
        raise _index_error(offset)
    return s.rfind(sub, 0, offset + len(sub))


def _ascii(s: str, upper: bool) -> str:
    table = str.maketrans(
        "abcdefghijklmnopqrstuvwxyz" if upper else "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if upper else "abcdefghijklmnopqrstuvwxyz",
    )
    return s.translate(table)


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    if n == 0:
        return s
    return s.replace(old, new, n if n > 0 else -1)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        if n > 0 and len(chars) > n:
            return [*chars[: n - 1], "".join(chars[n - 1 :])]
        return chars
    return s.split(sep, n - 1) if n > 0 else s.split(sep)


def _substring(s: str, start: int, end: int | None = None) -> str:
    stop = len(s) if end is None else end
    if start < 0 or start > len(s):
        raise _index_error(start)
    if stop < 0 or stop > len(s):
        raise _index_error(stop)
    if start > stop:
        raise CelEvalError(f"invalid substring range. start: {start}, end: {stop}")
    return s[start:stop]


#: Go's unicode.IsSpace set, which strings.TrimSpace (ext.Strings ``trim``) removes.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _join(items: list[Any], sep: str = "") -> str:
    for item in items:
        if type(item) is not str:
            raise CelEvalError(f"join: list contains a non-string element of type {type_name(item)}")
    return sep.join(items)


def quote(s: str) -> str:
    """``strings.quote``: a double-quoted CEL string literal for ``s``."""
    out = ['"']
    escapes = {
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
        "\\": "\\\\",
        '"': '\\"',
    }
    for ch in s:
        out.append(escapes.get(ch, ch))
    out.append('"')
    return "".join(out)


def _clause_error(what: str, value: Any) -> CelEvalError:
    return CelEvalError(f"error during formatting: {what}, was given {type_name(value)}")


def _format_value(spec: str, precision: int | None, value: Any) -> str:
    tv = type(value)
    if spec == "s":
        if tv is str:
            return str(value)
        if isinstance(value, list):
            return "[" + ", ".join(_format_value("s", None, v) for v in value) + "]"
        if isinstance(value, dict):
            items = sorted(
                ((_format_value("s", None, k), _format_value("s", None, v)) for k, v in value.items())
            )
            return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
        if value is None:
            return "null"
        if tv in (int, UInt, float, bool, bytes):
            return to_cel_string(value)
        return debug_repr(value)
    if spec == "d":
        if tv in (int, UInt):
            return str(int(value))
        if tv is float and (math.isnan(value) or math.isinf(value)):
            return format_double(value)
        raise _clause_error("decimal clause can only be used on integers", value)
    if spec in ("f", "e"):
        if tv not in (int, UInt, float):
            raise _clause_error(
                ("fixed-point" if spec == "f" else "scientific") + " clause can only be used on doubles",
                value,
            )
        f = float(value)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return f"{f:.{6 if precision is None else precision}{spec}}"
    if spec in ("x", "X"):
        if tv in (int, UInt):
            text = format(int(value), "x")
        elif tv is str:
            text = value.encode("utf-8").hex()
        elif tv is bytes:
            text = value.hex()
        else:
            raise _clause_error("only integers, byte buffers, and strings can be formatted as hex", value)
        return text.upper() if spec == "X" else text
    if spec == "o":
        if tv not in (int, UInt):
            raise _clause_error("octal clause can only be used on integers", value)
        return format(int(value), "o")
    if spec == "b":
        if tv is bool:
            return "1" if value else "0"
        if tv not in (int, UInt):
            raise _clause_error("only integers and bools can be formatted as binary", value)
        return format(int(value), "b")
    raise CelEvalError(f'could not parse formatting clause: unrecognized formatting clause "{spec}"')


def _format(fmt: str, args: list[Any]) -> str:
    out: list[str] = []
    i = 0
    arg = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        i += 1
        if i < len(fmt) and fmt[i] == "%":
            out.append("%")
            i += 1
            continue
        precision = None
        if i < len(fmt) and fmt[i] == ".":
            j = i + 1
            while j < len(fmt) and fmt[j].isdigit():
                j += 1
            precision = int(fmt[i + 1 : j] or "0")
            i = j
        if i >= len(fmt):
            raise CelEvalError("could not parse formatting clause: unexpected end of string")
        spec = fmt[i]
        i += 1
        if arg >= len(args):
            raise CelEvalError(f"index {arg} out of range")
        out.append(_format_value(spec, precision, args[arg]))
        arg += 1
    return "".join(out)


def register(reg: Registry) -> None:
    S, Int = t.STRING, t.INT
    reg.add("charAt", "string_char_at_int", (S, Int), S, _char_at, member=True)
    reg.add("indexOf", "string_index_of_string", (S, S), Int, _index_of, member=True, linear_cost=True)
    reg.add(
        "indexOf", "string_index_of_string_int", (S, S, Int), Int, _index_of, member=True, linear_cost=True
    )
    reg.add(
        "lastIndexOf",
        "string_last_index_of_string",
        (S, S),
        Int,
        _last_index_of,
        member=True,
        linear_cost=True,
    )
    reg.add(
        "lastIndexOf",
        "string_last_index_of_string_int",
        (S, S, Int),
        Int,
        _last_index_of,
        member=True,
        linear_cost=True,
    )
    reg.add(
        "lowerAscii", "string_lower_ascii", (S,), S, lambda s: _ascii(s, False), member=True, linear_cost=True
    )
    reg.add(
        "upperAscii", "string_upper_ascii", (S,), S, lambda s: _ascii(s, True), member=True, linear_cost=True
    )
    reg.add("replace", "string_replace_string_string", (S, S, S), S, _replace, member=True, linear_cost=True)
    reg.add(
        "replace",
        "string_replace_string_string_int",
        (S, S, S, Int),
        S,
        _replace,
        member=True,
        linear_cost=True,
    )
    reg.add("split", "string_split_string", (S, S), t.list_of(S), _split, member=True, linear_cost=True)
    reg.add(
        "split", "string_split_string_int", (S, S, Int), t.list_of(S), _split, member=True, linear_cost=True
    )
    reg.add("substring", "string_substring_int", (S, Int), S, _substring, member=True, linear_cost=True)
    reg.add(
        "substring", "string_substring_int_int", (S, Int, Int), S, _substring, member=True, linear_cost=True
    )
    reg.add("trim", "string_trim", (S,), S, lambda s: s.strip(_GO_SPACE), member=True, linear_cost=True)
    reg.add("join", "list_join", (t.list_of(S),), S, _join, member=True, linear_cost=True)
    reg.add("join", "list_join_string", (t.list_of(S), S), S, _join, member=True, linear_cost=True)
    reg.add("format", "string_format", (S, t.list_of(t.DYN)), S, _format, member=True, linear_cost=True)
    reg.add("strings.quote", "strings_quote", (S,), S, quote, linear_cost=True)
