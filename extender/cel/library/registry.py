"""Function declarations: overloads with static signatures (for the checker) and implementations.

One :class:`Registry` is built per environment by :func:`extender.cel.library.standard_registry`;
nothing here is global.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from extender.cel import types as t
from extender.cel.values import Optional, TypeValue, UInt

Guard = Callable[[Any], bool]


def parses(
    parse: Callable[[str], Any], errors: type[Exception] | tuple[type[Exception], ...] = ValueError
) -> Callable[[str], bool]:
    """``isX(string)`` for a parser: whether ``parse`` accepts the text."""

    def check(text: str) -> bool:
        try:
            parse(text)
        except errors:
            return False
        return True

    return check


def _any(_v: Any) -> bool:
    return True


def guard_for(ct: t.CelType, objects: dict[str, type]) -> Guard:
    """A runtime check that a value belongs to a static type (type parameters accept anything)."""
    if ct.is_param or t.is_dyn(ct):
        return _any
    name = ct.name
    simple: dict[str, Guard] = {
        "int": lambda v: type(v) is int,
        "uint": lambda v: type(v) is UInt,
        "double": lambda v: type(v) is float,
        "bool": lambda v: type(v) is bool,
        "string": lambda v: type(v) is str,
        "bytes": lambda v: type(v) is bytes,
        "null_type": lambda v: v is None,
        "list": lambda v: isinstance(v, list),
        "map": lambda v: isinstance(v, dict),
        "optional_type": lambda v: isinstance(v, Optional),
        "type": lambda v: isinstance(v, TypeValue),
        "google.protobuf.Timestamp": lambda v: isinstance(v, _dt.datetime),
        "google.protobuf.Duration": lambda v: isinstance(v, _dt.timedelta),
    }
    if name in simple:
        return simple[name]
    cls = objects.get(name)
    if cls is None:
        return _any
    return lambda v: isinstance(v, cls)


@dataclass(slots=True)
class Overload:
    id: str
    #: Parameter types; for member overloads the receiver comes first.
    params: tuple[t.CelType, ...]
    result: t.CelType
    impl: Callable[..., Any]
    member: bool = False
    #: Cost charged per call in addition to 1: proportional to the size of list/string arguments.
    linear_cost: bool = False
    guards: tuple[Guard, ...] = field(default=(), init=False)


@dataclass(slots=True)
class Function:
    name: str
    overloads: list[Overload] = field(default_factory=list)


class Registry:
    """All functions of an environment, plus the object types library values use."""

    def __init__(self) -> None:
        self.functions: dict[str, Function] = {}
        #: CEL type name -> Python class, for runtime guards of library types.
        self.objects: dict[str, type] = {}
        #: Identifiers that are types (``int``, ``string`` ...) -> their type value.
        self.type_idents: dict[str, TypeValue] = {}
        #: Field types of object types the checker knows (kubernetes.DRADevice).
        self.object_fields: dict[str, dict[str, t.CelType]] = {}

    def register_object(self, cls: type, ct: t.CelType) -> None:
        self.objects[ct.name] = cls

    def add(
        self,
        name: str,
        overload_id: str,
        params: tuple[t.CelType, ...],
        result: t.CelType,
        impl: Callable[..., Any],
        *,
        member: bool = False,
        linear_cost: bool = False,
    ) -> None:
        fn = self.functions.setdefault(name, Function(name))
        fn.overloads.append(Overload(overload_id, params, result, impl, member, linear_cost))

    def global_and_member(
        self,
        name: str,
        overload_id: str,
        params: tuple[t.CelType, ...],
        result: t.CelType,
        impl: Callable[..., Any],
        *,
        linear_cost: bool = False,
    ) -> None:
        self.add(name, overload_id, params, result, impl, linear_cost=linear_cost)
        self.add(name, overload_id + "_member", params, result, impl, member=True, linear_cost=linear_cost)

    def finalize(self) -> None:
        for fn in self.functions.values():
            for ov in fn.overloads:
                ov.guards = tuple(guard_for(p, self.objects) for p in ov.params)

    def qualified_names(self) -> set[str]:
        return {name for name in self.functions if "." in name}
