"""The CEL boundary's exceptions.

Compile errors and evaluation errors are *values* for callers that ask for them (the allocator
reports them per claim); inside the evaluator they travel as exceptions.
"""

from __future__ import annotations


class CelError(Exception):
    """Base class of every error raised by the CEL environment."""


class CelCompileError(CelError):
    """The expression does not parse or does not type-check (upstream: ``compilation failed``)."""


class CelEvalError(CelError):
    """Evaluating a program against a device failed (upstream: ``CEL runtime error``).

    Inside an expression such errors behave like CEL error values: ``&&`` and ``||`` absorb them
    when the other side decides the result.
    """


class CelCostLimitError(CelEvalError):
    """The runtime cost budget of one evaluation was exhausted. Never absorbed by ``&&``/``||``."""


class CelInterruptedError(CelEvalError):
    """The caller's deadline passed during evaluation. Never absorbed and never memoized."""
