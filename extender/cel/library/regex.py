"""RE2 regular expressions (cel-go uses Go's RE2), via google-re2, plus the K8s regex library."""

from __future__ import annotations

from typing import Any

import re2

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # errors become CEL errors; RE2 must not write to stderr
    return options


def compile_regex(pattern: Any) -> Any:
    """Compile a pattern (idempotent for already compiled ones)."""
    if not isinstance(pattern, str):
        return pattern
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise CelEvalError(f"error parsing regexp: {detail}") from None


def _find(s: str, pattern: Any) -> str:
    m = compile_regex(pattern).search(s)
    return "" if m is None else str(m.group(0))


def _find_all(s: str, pattern: Any, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    out: list[str] = []
    for m in compile_regex(pattern).finditer(s):
        out.append(str(m.group(0)))
        if 0 < limit <= len(out):
            break
    return out


#: Functions whose pattern argument (index) is compiled once at compile time when it is a literal.
REGEX_ARGUMENTS = {"matches": 1, "find": 1, "findAll": 1}


def register(reg: Registry) -> None:
    S = t.STRING
    reg.add("find", "string_find_string", (S, S), S, _find, member=True, linear_cost=True)
    reg.add(
        "findAll", "string_find_all_string", (S, S), t.list_of(S), _find_all, member=True, linear_cost=True
    )
    reg.add(
        "findAll",
        "string_find_all_string_int",
        (S, S, t.INT),
        t.list_of(S),
        _find_all,
        member=True,
        linear_cost=True,
    )
