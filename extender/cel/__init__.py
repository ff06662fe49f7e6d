"""CEL for DRA device selectors, faithful to Kubernetes' environment.

Public surface: :class:`CelEnvironment` (compile and evaluate), :class:`CelDevice` (the device
input), :class:`CelOptions`, :class:`Mode` and the errors in :mod:`extender.cel.errors`.
"""

from extender.cel.device import CelDevice
from extender.cel.environment import CelEnvironment, CelOptions, CompileResult, Mode, Program
from extender.cel.errors import (
    CelCompileError,
    CelCostLimitError,
    CelError,
    CelEvalError,
    CelInterruptedError,
)
from extender.quantity import Quantity, QuantityError, parse_quantity

__all__ = [
    "CelCompileError",
    "CelCostLimitError",
    "CelDevice",
    "CelEnvironment",
    "CelError",
    "CelEvalError",
    "CelInterruptedError",
    "CelOptions",
    "CompileResult",
    "Mode",
    "Program",
    "Quantity",
    "QuantityError",
    "parse_quantity",
]
