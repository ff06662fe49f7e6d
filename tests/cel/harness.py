"""Evaluate an expression the way the allocator does and describe the outcome."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from extender.cel import CelCompileError, CelDevice, CelEnvironment, CelEvalError, CelOptions, Mode
from tests.cel.builders import device

DEFAULT = CelOptions()
COMPILE_ERROR = "compile-error"
RUNTIME_ERROR = "runtime-error"


@lru_cache(maxsize=8)
def env(options: CelOptions = DEFAULT) -> CelEnvironment:
    return CelEnvironment(options)


def run(
    expression: str,
    dev: CelDevice | None = None,
    *,
    options: CelOptions = DEFAULT,
    mode: Mode = Mode.STORED,
) -> tuple[Any, str]:
    """(True | False | "compile-error" | "runtime-error", message)."""
    e = env(options)
    program = e.compile(expression, mode)
    if isinstance(program, CelCompileError):
        return COMPILE_ERROR, str(program)
    try:
        return e.matches(program, dev if dev is not None else device()), ""
    except CelEvalError as exc:
        return RUNTIME_ERROR, str(exc)


def check(
    expression: str, expected: Any, contains: str = "", dev: CelDevice | None = None, **kw: Any
) -> None:
    got, message = run(expression, dev, **kw)
    assert got == expected, f"{expression!r}: {message}"
    assert contains in message, f"{expression!r}: {message!r} lacks {contains!r}"
