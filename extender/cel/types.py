"""Static CEL types, as the type checker sees them, and their assignability rules."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class CelType:
    """A CEL type: a name plus type parameters (``list(int)``, ``map(string, dyn)``).

    ``is_param`` marks an overload's type variable (``A`` in ``size(list(A))``).
    """

    name: str
    params: tuple[CelType, ...] = ()
    is_param: bool = field(default=False, compare=True)

    def __str__(self) -> str:
        if not self.params:
            return self.name
        return f"{self.name}({', '.join(str(p) for p in self.params)})"


INT = CelType("int")
UINT = CelType("uint")
DOUBLE = CelType("double")
BOOL = CelType("bool")
STRING = CelType("string")
BYTES = CelType("bytes")
NULL = CelType("null_type")
DYN = CelType("dyn")
ANY = CelType("any")  # google.protobuf.Any: DRA attribute values; behaves like dyn
DURATION = CelType("google.protobuf.Duration")
TIMESTAMP = CelType("google.protobuf.Timestamp")
QUANTITY = CelType("kubernetes.Quantity")
SEMVER = CelType("kubernetes.Semver")
IP = CelType("net.IP")
CIDR = CelType("net.CIDR")
URL = CelType("kubernetes.URL")
FORMAT = CelType("kubernetes.NamedFormat")
DRA_DEVICE = CelType("kubernetes.DRADevice")
ERROR = CelType("*error*")

A = CelType("A", is_param=True)
B = CelType("B", is_param=True)
K = CelType("K", is_param=True)
V = CelType("V", is_param=True)


def list_of(elem: CelType) -> CelType:
    return CelType("list", (elem,))


def map_of(key: CelType, value: CelType) -> CelType:
    return CelType("map", (key, value))


def optional_of(elem: CelType) -> CelType:
    return CelType("optional_type", (elem,))


def type_of(elem: CelType) -> CelType:
    return CelType("type", (elem,))


NUMERIC = (INT, UINT, DOUBLE)
#: Types with no type parameters whose values may be compared with ``<`` among themselves.
ORDERABLE = (BOOL, INT, UINT, DOUBLE, STRING, BYTES, DURATION, TIMESTAMP)


def is_dyn(t: CelType) -> bool:
    return t.name in ("dyn", "any", "*error*")


Bindings = dict[str, CelType]


def substitute(t: CelType, bindings: Bindings) -> CelType:
    """Replace bound type parameters; unbound ones become dyn."""
    if t.is_param:
        bound = bindings.get(t.name)
        return DYN if bound is None else substitute(bound, bindings)
    if not t.params:
        return t
    return CelType(t.name, tuple(substitute(p, bindings) for p in t.params))


def assignable(param: CelType, arg: CelType, bindings: Bindings) -> bool:
    """Whether a value of static type ``arg`` may be passed where ``param`` is declared.

    Binds type parameters in ``bindings`` on success (callers pass a scratch copy).
    """
    if param.is_param:
        bound = bindings.get(param.name)
        if bound is None:
            bindings[param.name] = arg
            return True
        if is_dyn(bound) or is_dyn(arg):
            return True
        if assignable(bound, arg, bindings):
            return True
        # A later, more general argument widens the binding (e.g. list(dyn) after list(int)).
        if assignable(arg, bound, {}):
            bindings[param.name] = arg
            return True
        return False
    if is_dyn(param) or is_dyn(arg):
        return True
    if param.name == "type" and arg.name == "type":
        return True  # type values compare among themselves whatever type they denote
    if param.name != arg.name or len(param.params) != len(arg.params):
        # null is assignable to the wrapper-like and optional types only; nothing here needs it.
        return False
    return all(assignable(p, a, bindings) for p, a in zip(param.params, arg.params, strict=True))


def common_type(types: list[CelType]) -> CelType:
    """The type of a list literal's elements or a ternary's branches: equal types, else dyn."""
    if not types:
        return DYN
    first = types[0]
    for t in types[1:]:
        if is_dyn(t) or is_dyn(first):
            return DYN
        if t != first:
            return DYN
    return first
