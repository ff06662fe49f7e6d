"""cel-go's optional types library (``optional.of``, ``.orValue`` ...); ``.?``/``[?]`` are syntax."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry
from extender.cel.values import NONE, Optional


def _is_zero(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool | int | float | str | bytes | list | dict):
        return not value
    if isinstance(value, _dt.timedelta):
        return value == _dt.timedelta(0)
    return False


def _value(opt: Optional) -> Any:
    if not opt.has:
        raise CelEvalError("optional.none() dereference")
    return opt.value


def register(reg: Registry) -> None:
    A = t.A
    OA = t.optional_of(A)
    reg.add("optional.of", "optional_of", (A,), OA, lambda v: Optional(True, v))
    reg.add(
        "optional.ofNonZeroValue",
        "optional_ofNonZeroValue",
        (A,),
        OA,
        lambda v: NONE if _is_zero(v) else Optional(True, v),
    )
    reg.add("optional.none", "optional_none", (), t.optional_of(t.DYN), lambda: NONE)
    reg.add("hasValue", "optional_hasValue", (OA,), t.BOOL, lambda o: o.has, member=True)
    reg.add("value", "optional_value", (OA,), A, _value, member=True)
    reg.add(
        "orValue", "optional_orValue_value", (OA, A), A, lambda o, v: o.value if o.has else v, member=True
    )
    reg.add("or", "optional_or_optional", (OA, OA), OA, lambda o, other: o if o.has else other, member=True)
