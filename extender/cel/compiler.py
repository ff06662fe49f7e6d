"""Compiling checked CEL ASTs into Python closures.

Each node becomes a function ``f(frame) -> value``. CEL errors travel as :class:`CelEvalError`
exceptions; ``&&``, ``||`` and the comprehension macros absorb them where CEL says so. The
runtime cost meter charges comprehension iterations and size-dependent library calls, and
checks the caller's deadline, so a runaway expression ends with an error, never a stall.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from extender.cel import ast
from extender.cel import types as t
from extender.cel.device import DEVICE_FIELDS, DefaultingMap, DeviceValue
from extender.cel.errors import CelCostLimitError, CelEvalError, CelInterruptedError
from extender.cel.library.regex import REGEX_ARGUMENTS, compile_regex
from extender.cel.library.registry import Overload, Registry
from extender.cel.values import (
    NONE,
    Optional,
    UInt,
    cel_compare,
    debug_repr,
    iterable,
    map_lookup,
    no_such_overload,
    type_name,
)

Eval = Callable[["Frame"], Any]

#: Cost units between two deadline checks.
DEADLINE_CHECK_INTERVAL = 2048


class Frame:
    """The state of one evaluation: variables, cost spent, limit and deadline."""

    __slots__ = ("clock", "cost", "deadline", "limit", "next_check", "vars")

    def __init__(
        self,
        variables: dict[str, Any],
        limit: int,
        deadline: float | None,
        clock: Callable[[], float] | None,
    ) -> None:
        self.vars = variables
        self.cost = 0
        self.limit = limit
        self.deadline = deadline
        self.clock = clock
        self.next_check = DEADLINE_CHECK_INTERVAL

    def charge(self, units: int) -> None:
        self.cost += units
        if self.cost > self.limit:
            raise CelCostLimitError("operation cancelled: actual cost limit exceeded")
        if self.cost >= self.next_check:
            self.next_check = self.cost + DEADLINE_CHECK_INTERVAL
            if self.deadline is not None and self.clock is not None and self.clock() > self.deadline:
                raise CelInterruptedError("operation interrupted: the evaluation deadline passed")


_FATAL = (CelCostLimitError, CelInterruptedError)


def _size(value: Any) -> int:
    if isinstance(value, str | bytes | list | dict):
        return len(value)
    return 0


# --- runtime helpers for member access ----------------------------------------------------------


def select(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        try:
            return value[name]
        except KeyError:
            raise CelEvalError(f"no such key: {name}") from None
    if isinstance(value, DeviceValue) and name in DEVICE_FIELDS:
        return getattr(value, name)
    raise CelEvalError(f"no such overload: field selection '{name}' on {type_name(value)}")


def has_field(value: Any, name: str) -> bool:
    if isinstance(value, DefaultingMap):
        return True  # upstream quirk: presence tests use the defaulting lookup
    if isinstance(value, dict):
        return name in value
    if isinstance(value, DeviceValue):
        return name in DEVICE_FIELDS
    raise CelEvalError(f"no such overload: has() on {type_name(value)}")


def optional_select(value: Any, name: str) -> Optional:
    if isinstance(value, Optional):
        if not value.has:
            return NONE
        value = value.value
    if isinstance(value, DefaultingMap):
        return Optional(True, value[name])
    if isinstance(value, dict):
        return Optional(True, value[name]) if name in value else NONE
    if isinstance(value, DeviceValue) and name in DEVICE_FIELDS:
        return Optional(True, getattr(value, name))
    raise CelEvalError(f"no such overload: optional field selection '{name}' on {type_name(value)}")


def index(container: Any, key: Any) -> Any:
    if isinstance(container, list):
        tk = type(key)
        if tk is int or tk is UInt or (tk is float and key.is_integer()):
            i = int(key)
            if 0 <= i < len(container):
                return container[i]
            raise CelEvalError(f"index out of range: {i}")
        raise no_such_overload("_[_]", container, key)
    if isinstance(container, dict):
        if type(key) is str:
            try:
                return container[key]
            except KeyError:
                raise CelEvalError(f"no such key: {key}") from None
        found, value = map_lookup(container, key)
        if found:
            return value
        raise CelEvalError(f"no such key: {debug_repr(key)}")
    raise no_such_overload("_[_]", container, key)


def optional_index(container: Any, key: Any) -> Optional:
    if isinstance(container, Optional):
        if not container.has:
            return NONE
        container = container.value
    if isinstance(container, DefaultingMap) and type(key) is str:
        return Optional(True, container[key])
    if isinstance(container, list | dict):
        try:
            return Optional(True, index(container, key))
        except CelEvalError:
            if isinstance(container, list) and type(key) not in (int, UInt, float):
                raise
            return NONE
    raise no_such_overload("_[?_]", container, key)


# --- the compiler ---------------------------------------------------------------------------------


class Compiler:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def compile(self, node: ast.Node) -> Eval:
        method = getattr(self, "_" + type(node).__name__)
        fn: Eval = method(node)
        return fn

    def _Literal(self, node: ast.Literal) -> Eval:
        value = node.value
        return lambda fr: value

    def _Ident(self, node: ast.Ident) -> Eval:
        name = node.name
        if node.type.name == "type" and name in self.registry.type_idents:
            value = self.registry.type_idents[name]
            return lambda fr: fr.vars.get(name, value)
        return lambda fr: fr.vars[name]

    def _Select(self, node: ast.Select) -> Eval:
        operand = self.compile(node.operand)
        name = node.field_name
        if node.test_only:
            return lambda fr: has_field(operand(fr), name)
        if node.optional:
            return lambda fr: optional_select(operand(fr), name)
        if node.operand.type == t.DRA_DEVICE:
            return lambda fr: getattr(operand(fr), name)
        return lambda fr: select(operand(fr), name)

    def _Index(self, node: ast.Index) -> Eval:
        operand = self.compile(node.operand)
        if node.optional:
            key_fn = self.compile(node.index)
            return lambda fr: optional_index(operand(fr), key_fn(fr))
        if isinstance(node.index, ast.Literal) and isinstance(node.index.value, str):
            key = node.index.value
            return lambda fr: select(operand(fr), key)
        key_fn = self.compile(node.index)
        return lambda fr: index(operand(fr), key_fn(fr))

    def _ListLiteral(self, node: ast.ListLiteral) -> Eval:
        elems = [self.compile(e) for e in node.elements]
        if all(isinstance(e, ast.Literal) for e in node.elements):
            constant = [e.value for e in node.elements]  # type: ignore[attr-defined]
            return lambda fr: list(constant)
        if not node.optional:
            return lambda fr: [e(fr) for e in elems]
        optional = [i in node.optional for i in range(len(elems))]

        def build(fr: Frame) -> list[Any]:
            out = []
            for elem, is_optional in zip(elems, optional, strict=True):
                value = elem(fr)
                if not is_optional:
                    out.append(value)
                elif not isinstance(value, Optional):
                    raise CelEvalError(
                        f"cannot initialize optional list element from non-optional value {debug_repr(value)}"
                    )
                elif value.has:
                    out.append(value.value)
            return out

        return build

    def _MapLiteral(self, node: ast.MapLiteral) -> Eval:
        entries = [
            (self.compile(k), self.compile(v), i in node.optional) for i, (k, v) in enumerate(node.entries)
        ]

        def build(fr: Frame) -> dict[Any, Any]:
            out: dict[Any, Any] = {}
            for kf, vf, is_optional in entries:
                key = kf(fr)
                if type(key) not in (str, int, UInt, bool):
                    raise CelEvalError(f"unsupported key type: {type_name(key)}")
                if map_lookup(out, key)[0]:
                    raise CelEvalError(f"Failed with repeated key: {debug_repr(key)}")
                value = vf(fr)
                if is_optional:
                    if not isinstance(value, Optional):
                        raise CelEvalError(
                            f"cannot initialize optional entry {debug_repr(key)} from non-optional value "
                            f"{debug_repr(value)}"
                        )
                    if not value.has:
                        continue
                    value = value.value
                out[key] = value
            return out

        return build

    # --- calls -------------------------------------------------------------------------------

    def _Call(self, node: ast.Call) -> Eval:
        name = node.function
        arg_nodes = ([node.target] if node.target is not None else []) + node.args
        args = [self.compile(a) for a in arg_nodes]
        if name == "_&&_":
            return self._logical(args[0], args[1], short=False)
        if name == "_||_":
            return self._logical(args[0], args[1], short=True)
        if name == "_?_:_":
            cond, yes, no = args

            def ternary(fr: Frame) -> Any:
                c = cond(fr)
                if c is True:
                    return yes(fr)
                if c is False:
                    return no(fr)
                raise no_such_overload("_?_:_", c)

            return ternary
        return self._function(node, arg_nodes, args)

    @staticmethod
    def _logical(left: Eval, right: Eval, *, short: bool) -> Eval:
        """``&&`` (short=False) / ``||`` (short=True) with CEL's commutative error absorption."""

        def logical(fr: Frame) -> bool:
            error: CelEvalError | None = None
            try:
                lv = left(fr)
            except _FATAL:
                raise
            except CelEvalError as exc:
                error, lv = exc, None
            if lv is short:
                return bool(short)
            if lv is not (not short) and error is None:
                error = no_such_overload("_||_" if short else "_&&_", lv)
            try:
                rv = right(fr)
            except _FATAL:
                raise
            except CelEvalError as exc:
                raise error or exc from None
            if rv is short:
                return bool(short)
            if rv is not (not short):
                raise error or no_such_overload("_||_" if short else "_&&_", rv)
            if error is not None:
                raise error
            return not short

        return logical

    def _function(self, node: ast.Call, arg_nodes: list[ast.Node], args: list[Eval]) -> Eval:
        overloads: list[Overload] = node.overloads
        if not overloads:  # pragma: no cover - the checker always resolves
            raise CelEvalError(f"no overloads for {node.function}")
        # Regex literals are compiled once, here, instead of on every call.
        prepared: dict[int, Any] = {}
        position = REGEX_ARGUMENTS.get(node.function)
        if position is not None and position < len(arg_nodes):
            lit = arg_nodes[position]
            if isinstance(lit, ast.Literal) and isinstance(lit.value, str):
                compiled = compile_regex(lit.value)
                prepared[position] = compiled
                args[position] = _constant(compiled)
        linear = any(ov.linear_cost for ov in overloads)
        static_types = [a.type for a in arg_nodes]
        # One overload and statically known argument types: the checker proved the match.
        direct = len(overloads) == 1 and not any(t.is_dyn(st) for st in static_types)
        call = (
            _direct_call(overloads[0].impl)
            if direct
            else _dispatching_call(node.function, overloads, prepared)
        )

        folded = self._fold(arg_nodes, args, call, prepared)
        if folded is not None:
            return folded
        n = len(args)
        if n == 1 and not linear:
            a0 = args[0]
            if direct:
                impl0 = overloads[0].impl
                return lambda fr: impl0(a0(fr))
            return lambda fr: call([a0(fr)])
        if n == 2 and not linear:
            a0, a1 = args
            if direct:
                impl2 = overloads[0].impl
                return lambda fr: impl2(a0(fr), a1(fr))
            return lambda fr: call([a0(fr), a1(fr)])
        if linear:

            def linear_call(fr: Frame) -> Any:
                values = [a(fr) for a in args]
                fr.charge(1 + sum(_size(v) for v in values))
                result = call(values)
                fr.charge(_size(result))
                return result

            return linear_call
        return lambda fr: call([a(fr) for a in args])

    @staticmethod
    def _fold(
        arg_nodes: list[ast.Node],
        args: list[Eval],
        call: Callable[[list[Any]], Any],
        prepared: dict[int, Any],
    ) -> Eval | None:
        """Evaluate calls on literals once (``quantity("40Gi")``); errors stay runtime errors."""
        if not arg_nodes or not all(
            isinstance(a, ast.Literal) or i in prepared for i, a in enumerate(arg_nodes)
        ):
            return None
        values = [prepared.get(i, getattr(a, "value", None)) for i, a in enumerate(arg_nodes)]
        try:
            result = call(values)
        except CelEvalError:
            return None
        if isinstance(result, list | dict):
            return None  # keep mutable-looking results fresh per evaluation
        return lambda fr: result

    # --- comprehensions --------------------------------------------------------------------------

    def _Comprehension(self, node: ast.Comprehension) -> Eval:
        rng = self.compile(node.range)
        body = self.compile(node.body)
        flt = self.compile(node.filter) if node.filter is not None else None
        v1, v2 = node.var1, node.var2
        kind = node.kind
        body_cost = (
            1
            + sum(1 for _ in ast.walk(node.body))
            + (sum(1 for _ in ast.walk(node.filter)) if node.filter else 0)
        )

        if kind == ast.BIND:

            def bind(fr: Frame) -> Any:
                value = rng(fr)
                saved = fr.vars.get(v1, _UNSET)
                fr.vars[v1] = value
                try:
                    return body(fr)
                finally:
                    _restore(fr, v1, saved)

            return bind

        if kind in (ast.OPT_MAP, ast.OPT_FLAT_MAP):
            flat = kind == ast.OPT_FLAT_MAP

            def opt_map(fr: Frame) -> Any:
                opt = rng(fr)
                if not isinstance(opt, Optional):
                    raise no_such_overload(kind, opt)
                if not opt.has:
                    return NONE
                saved = fr.vars.get(v1, _UNSET)
                fr.vars[v1] = opt.value
                try:
                    result = body(fr)
                finally:
                    _restore(fr, v1, saved)
                if flat:
                    if not isinstance(result, Optional):
                        raise no_such_overload(kind, result)
                    return result
                return Optional(True, result)

            return opt_map

        def pairs(value: Any) -> list[tuple[Any, Any]]:
            if isinstance(value, list):
                return list(enumerate(value))
            if isinstance(value, dict):
                return list(value.items())
            iterable(value)  # raises the upstream "expected iterable type" error
            return []

        def items(fr: Frame) -> list[tuple[Any, Any]]:
            value = rng(fr)
            if v2 is None:
                return [(x, None) for x in iterable(value)]
            return pairs(value)

        def bind_vars(fr: Frame, a: Any, b: Any) -> None:
            fr.vars[v1] = a
            if v2 is not None:
                fr.vars[v2] = b

        def run(fr: Frame, loop: Callable[[Frame, list[tuple[Any, Any]]], Any]) -> Any:
            seq = items(fr)
            saved1 = fr.vars.get(v1, _UNSET)
            saved2 = fr.vars.get(v2, _UNSET) if v2 is not None else _UNSET
            try:
                return loop(fr, seq)
            finally:
                _restore(fr, v1, saved1)
                if v2 is not None:
                    _restore(fr, v2, saved2)

        def passes(fr: Frame) -> bool:
            if flt is None:
                return True
            r = flt(fr)
            if type(r) is not bool:
                raise no_such_overload("filter", r)
            return r

        if kind in (ast.ALL, ast.EXISTS):
            decisive = kind == ast.EXISTS  # exists stops at true, all stops at false

            def quantifier_loop(fr: Frame, seq: list[tuple[Any, Any]]) -> bool:
                error: CelEvalError | None = None
                for a, b in seq:
                    fr.charge(body_cost)
                    bind_vars(fr, a, b)
                    try:
                        r = body(fr)
                    except _FATAL:
                        raise
                    except CelEvalError as exc:
                        error = error or exc
                        continue
                    if r is decisive:
                        return bool(decisive)
                    if type(r) is not bool:
                        error = error or no_such_overload(kind, r)
                if error is not None:
                    raise error
                return not decisive

            return lambda fr: run(fr, quantifier_loop)

        if kind == ast.EXISTS_ONE:

            def exists_one_loop(fr: Frame, seq: list[tuple[Any, Any]]) -> bool:
                count = 0
                for a, b in seq:
                    fr.charge(body_cost)
                    bind_vars(fr, a, b)
                    r = body(fr)
                    if type(r) is not bool:
                        raise no_such_overload(kind, r)
                    count += r
                return count == 1

            return lambda fr: run(fr, exists_one_loop)

        if kind in (ast.MAP, ast.TRANSFORM_LIST):

            def map_loop(fr: Frame, seq: list[tuple[Any, Any]]) -> list[Any]:
                out = []
                for a, b in seq:
                    fr.charge(body_cost)
                    bind_vars(fr, a, b)
                    if passes(fr):
                        out.append(body(fr))
                return out

            return lambda fr: run(fr, map_loop)

        if kind == ast.FILTER:

            def filter_loop(fr: Frame, seq: list[tuple[Any, Any]]) -> list[Any]:
                out = []
                for a, b in seq:
                    fr.charge(body_cost)
                    bind_vars(fr, a, b)
                    r = body(fr)
                    if type(r) is not bool:
                        raise no_such_overload("filter", r)
                    if r:
                        out.append(a)
                return out

            return lambda fr: run(fr, filter_loop)

        if kind in (ast.TRANSFORM_MAP, ast.TRANSFORM_MAP_ENTRY):
            entry = kind == ast.TRANSFORM_MAP_ENTRY

            def transform_map_loop(fr: Frame, seq: list[tuple[Any, Any]]) -> dict[Any, Any]:
                out: dict[Any, Any] = {}
                for a, b in seq:
                    fr.charge(body_cost)
                    bind_vars(fr, a, b)
                    if not passes(fr):
                        continue
                    r = body(fr)
                    if not entry:
                        out[a] = r
                        continue
                    if not isinstance(r, dict):
                        raise no_such_overload("transformMapEntry", r)
                    for k, v in r.items():
                        if map_lookup(out, k)[0]:
                            raise CelEvalError(f"insert failed: key {debug_repr(k)} already exists")
                        out[k] = v
                return out

            return lambda fr: run(fr, transform_map_loop)

        if kind == ast.SORT_BY:

            def sort_loop(fr: Frame, seq: list[tuple[Any, Any]]) -> list[Any]:
                keyed: list[tuple[Any, Any]] = []
                for a, b in seq:
                    fr.charge(body_cost)
                    bind_vars(fr, a, b)
                    keyed.append((body(fr), a))
                kinds = {type(k) for k, _ in keyed}
                if len(kinds) > 1:
                    raise CelEvalError("sortBy: keys must have the same type")
                keyed.sort(key=functools.cmp_to_key(_compare_keys))
                return [a for _, a in keyed]

            return lambda fr: run(fr, sort_loop)

        raise CelEvalError(f"unsupported macro {kind}")  # pragma: no cover


def _compare_keys(x: tuple[Any, Any], y: tuple[Any, Any]) -> int:
    return cel_compare(x[0], y[0], "sortBy")


def _constant(value: Any) -> Eval:
    return lambda fr: value


def _accept(_value: Any) -> bool:
    return True


def _direct_call(impl: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def call(values: list[Any]) -> Any:
        return impl(*values)

    return call


def _dispatching_call(
    name: str, overloads: list[Overload], prepared: dict[int, Any]
) -> Callable[[list[Any]], Any]:
    """Pick the overload by the runtime types of the arguments (for dyn-typed arguments)."""
    candidates = [
        (ov.impl, tuple(_accept if i in prepared else g for i, g in enumerate(ov.guards))) for ov in overloads
    ]

    def call(values: list[Any]) -> Any:
        for impl, guards in candidates:
            if all(g(v) for g, v in zip(guards, values, strict=True)):
                return impl(*values)
        raise no_such_overload(name, *values)

    return call


class _Unset:
    __slots__ = ()


_UNSET = _Unset()


def _restore(fr: Frame, name: str, saved: Any) -> None:
    if saved is _UNSET:
        fr.vars.pop(name, None)
    else:
        fr.vars[name] = saved
