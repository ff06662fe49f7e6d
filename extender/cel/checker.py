"""Static type checking of CEL ASTs, with cel-go's error texts.

It annotates every node with its type and every call with the overloads that may apply, and
reports what cel-go's checker reports for DRA selectors: undeclared references, undefined
fields, no matching overload, non-homogeneous literals, invalid comprehension ranges and
invalid regex/duration/timestamp literals.
"""

from __future__ import annotations

from typing import Any

from extender.cel import ast
from extender.cel import types as t
from extender.cel.errors import CelCompileError, CelEvalError
from extender.cel.library.regex import REGEX_ARGUMENTS, compile_regex
from extender.cel.library.registry import Overload, Registry
from extender.cel.parser import format_error

#: Calls whose literal arguments are validated at compile time (K8s AST validators, 1.29+).
_LITERAL_VALIDATED = {"duration", "timestamp"}
_MAP_KEY_TYPES = {"int", "uint", "bool", "string"}


class Checker:
    def __init__(self, registry: Registry, source: str, variables: dict[str, t.CelType]) -> None:
        self.registry = registry
        self.source = source
        self.variables = variables

    def error(self, node: ast.Node, message: str) -> CelCompileError:
        return CelCompileError(format_error(self.source, node.line, node.column, message))

    def check(self, node: ast.Node, scope: dict[str, t.CelType] | None = None) -> t.CelType:
        ct = self._check(node, scope or {})
        node.type = ct
        return ct

    def _check(self, node: ast.Node, scope: dict[str, t.CelType]) -> t.CelType:
        if isinstance(node, ast.Literal):
            return node.literal_type
        if isinstance(node, ast.Ident):
            return self._ident(node, scope)
        if isinstance(node, ast.Select):
            return self._select(node, scope)
        if isinstance(node, ast.Index):
            return self._index(node, scope)
        if isinstance(node, ast.Call):
            return self._call(node, scope)
        if isinstance(node, ast.ListLiteral):
            elems = [self.check(e, scope) for e in node.elements]
            elems = [
                self._unwrap_optional(e, ct) if i in node.optional else ct
                for i, (e, ct) in enumerate(zip(node.elements, elems, strict=True))
            ]
            return t.list_of(self._homogeneous(node.elements, elems))
        if isinstance(node, ast.MapLiteral):
            keys = [self.check(k, scope) for k, _ in node.entries]
            values = [self.check(v, scope) for _, v in node.entries]
            values = [
                self._unwrap_optional(v, ct) if i in node.optional else ct
                for i, ((_, v), ct) in enumerate(zip(node.entries, values, strict=True))
            ]
            for (k, _), kt in zip(node.entries, keys, strict=True):
                if not t.is_dyn(kt) and kt.name not in _MAP_KEY_TYPES:
                    raise self.error(k, f"unsupported map key type: {kt}")
            key_type = self._homogeneous([k for k, _ in node.entries], keys)
            value_type = self._homogeneous([v for _, v in node.entries], values)
            return t.map_of(key_type, value_type)
        if isinstance(node, ast.Comprehension):
            return self._comprehension(node, scope)
        raise self.error(node, f"unsupported expression {type(node).__name__}")  # pragma: no cover

    # --- identifiers and selection -----------------------------------------------------------

    def _ident(self, node: ast.Ident, scope: dict[str, t.CelType]) -> t.CelType:
        if node.name in scope:
            return scope[node.name]
        if node.name in self.variables:
            return self.variables[node.name]
        if node.name in self.registry.type_idents:
            return t.type_of(t.CelType(node.name))
        raise self.error(node, f"undeclared reference to '{node.name}' (in container '')")

    def _field_type(self, node: ast.Select, operand: t.CelType) -> t.CelType:
        fields = self.registry.object_fields.get(operand.name)
        if fields is not None:
            if node.field_name not in fields:
                raise self.error(node, f"undefined field '{node.field_name}'")
            return fields[node.field_name]
        if operand.name == "map":
            key = operand.params[0]
            if not t.is_dyn(key) and key != t.STRING and not key.is_param:
                raise self.error(node, f"type '{operand}' does not support field selection")
            return operand.params[1]
        if t.is_dyn(operand):
            return t.DYN
        raise self.error(node, f"type '{operand}' does not support field selection")

    def _select(self, node: ast.Select, scope: dict[str, t.CelType]) -> t.CelType:
        operand = self.check(node.operand, scope)
        if node.optional:
            inner = operand.params[0] if operand.name == "optional_type" else operand
            return t.optional_of(self._field_type(node, inner))
        field_type = self._field_type(node, operand)
        return t.BOOL if node.test_only else field_type

    def _index(self, node: ast.Index, scope: dict[str, t.CelType]) -> t.CelType:
        operand = self.check(node.operand, scope)
        index = self.check(node.index, scope)
        container = operand
        if node.optional and operand.name == "optional_type":
            container = operand.params[0]
        result: t.CelType
        if container.name == "list":
            if not (t.is_dyn(index) or index in (t.INT, t.UINT, t.DOUBLE)):
                raise self._no_overload(node, "_[_]", [operand, index], member=False)
            result = container.params[0]
        elif container.name == "map":
            if not t.assignable(container.params[0], index, {}):
                raise self._no_overload(node, "_[_]", [operand, index], member=False)
            result = container.params[1]
        elif t.is_dyn(container):
            result = t.DYN
        else:
            raise self._no_overload(node, "_[_]", [operand, index], member=False)
        return t.optional_of(result) if node.optional else result

    # --- calls -----------------------------------------------------------------------------------

    def _no_overload(
        self, node: ast.Node, name: str, args: list[t.CelType], *, member: bool
    ) -> CelCompileError:
        if member:
            shown = f"{args[0]}.({', '.join(str(a) for a in args[1:])})"
        else:
            shown = f"({', '.join(str(a) for a in args)})"
        return self.error(node, f"found no matching overload for '{name}' applied to '{shown}'")

    def _call(self, node: ast.Call, scope: dict[str, t.CelType]) -> t.CelType:
        member = node.target is not None
        arg_nodes = ([node.target] if node.target is not None else []) + node.args
        arg_types = [self.check(a, scope) for a in arg_nodes]
        name = node.function
        if name in ("_&&_", "_||_"):
            for a in arg_types:
                if not (t.is_dyn(a) or a == t.BOOL):
                    raise self._no_overload(node, name, arg_types, member=False)
            return t.BOOL
        if name == "_?_:_":
            cond, yes, no = arg_types
            if not (t.is_dyn(cond) or cond == t.BOOL):
                raise self._no_overload(node, name, arg_types, member=False)
            bindings: t.Bindings = {}
            if not (t.assignable(t.A, yes, bindings) and t.assignable(t.A, no, bindings)):
                raise self._no_overload(node, name, arg_types, member=False)
            return t.substitute(t.A, bindings)
        fn = self.registry.functions.get(name)
        if fn is None:
            raise self.error(node, f"undeclared reference to '{name}' (in container '')")
        matches: list[tuple[Overload, t.CelType]] = []
        for ov in fn.overloads:
            if ov.member != member or len(ov.params) != len(arg_types):
                continue
            bindings = {}
            if all(t.assignable(p, a, bindings) for p, a in zip(ov.params, arg_types, strict=True)):
                matches.append((ov, t.substitute(ov.result, bindings)))
        if not matches:
            raise self._no_overload(node, name, arg_types, member=member)
        node.overloads = [ov for ov, _ in matches]
        self._validate_literals(node, arg_nodes)
        return t.common_type([r for _, r in matches])

    def _validate_literals(self, node: ast.Call, arg_nodes: list[ast.Node]) -> None:
        name = node.function
        position = REGEX_ARGUMENTS.get(name)
        # Member form: receiver is arg 0, pattern arg 1. Global matches(s, p): pattern arg 1 too.
        literal = arg_nodes[position] if position is not None and len(arg_nodes) > position else None
        if isinstance(literal, ast.Literal) and isinstance(literal.value, str):
            try:
                compile_regex(literal.value)
            except CelEvalError as exc:
                raise self.error(literal, f"invalid {name} argument: {exc}") from None
        if name in _LITERAL_VALIDATED and len(arg_nodes) == 1 and isinstance(arg_nodes[0], ast.Literal):
            ov = node.overloads[0]
            literal_value: Any = arg_nodes[0].value
            if len(node.overloads) == 1 and all(g(literal_value) for g in ov.guards):
                try:
                    ov.impl(literal_value)
                except CelEvalError as exc:
                    raise self.error(arg_nodes[0], f"{name} validation failed: {exc}") from None

    # --- literals ----------------------------------------------------------------------------

    def _unwrap_optional(self, node: ast.Node, ct: t.CelType) -> t.CelType:
        """The element type of an optional literal element (``[?x]``, ``{?k: x}``)."""
        if ct.name == "optional_type":
            return ct.params[0]
        if t.is_dyn(ct):
            return ct
        raise self.error(node, f"expected type '{t.optional_of(ct)}' but found '{ct}'")

    def _homogeneous(self, nodes: list[ast.Node], types: list[t.CelType]) -> t.CelType:
        """HomogeneousAggregateLiterals: all elements of one literal share a type (or are dyn)."""
        first: t.CelType | None = None
        for n, ct in zip(nodes, types, strict=True):
            if t.is_dyn(ct) or (isinstance(n, ast.Call) and n.function == "dyn"):
                continue
            if first is None:
                first = ct
            elif not (t.assignable(first, ct, {}) and t.assignable(ct, first, {})):
                raise self.error(n, f"expected type '{first}' but found '{ct}'")
        if first is None:
            return t.DYN
        return first if all(not t.is_dyn(x) for x in types) else t.DYN

    # --- comprehensions -------------------------------------------------------------------------

    def _comprehension(self, node: ast.Comprehension, scope: dict[str, t.CelType]) -> t.CelType:
        range_type = self.check(node.range, scope)
        kind = node.kind
        inner = dict(scope)
        if kind == ast.BIND:
            inner[node.var1] = range_type
            return self.check(node.body, inner)
        if kind in (ast.OPT_MAP, ast.OPT_FLAT_MAP):
            if range_type.name != "optional_type" and not t.is_dyn(range_type):
                raise self._no_overload(node, kind, [range_type], member=True)
            elem = range_type.params[0] if range_type.params else t.DYN
            inner[node.var1] = elem
            body = self.check(node.body, inner)
            if kind == ast.OPT_MAP:
                return t.optional_of(body)
            if body.name != "optional_type" and not t.is_dyn(body):
                raise self._no_overload(node, kind, [range_type, body], member=True)
            return body
        if range_type.name == "list":
            key_type, value_type = t.INT, range_type.params[0]
            first_type = value_type
        elif range_type.name == "map":
            key_type, value_type = range_type.params
            first_type = key_type
        elif t.is_dyn(range_type):
            key_type = value_type = first_type = t.DYN
        else:
            raise self.error(
                node.range,
                f"expression of type '{range_type}' cannot be range of a comprehension "
                "(must be list, map, or dynamic)",
            )
        if node.var2 is None:
            inner[node.var1] = first_type
        else:
            inner[node.var1] = key_type
            inner[node.var2] = value_type
        if node.filter is not None:
            self._expect_bool(node.filter, self.check(node.filter, inner), kind)
        body = self.check(node.body, inner)
        if kind in (ast.ALL, ast.EXISTS, ast.EXISTS_ONE, ast.FILTER):
            self._expect_bool(node.body, body, kind)
        if kind in (ast.ALL, ast.EXISTS, ast.EXISTS_ONE):
            return t.BOOL
        if kind == ast.FILTER:
            return t.list_of(first_type)
        if kind in (ast.MAP, ast.TRANSFORM_LIST):
            return t.list_of(body)
        if kind == ast.TRANSFORM_MAP:
            return t.map_of(key_type, body)
        if kind == ast.TRANSFORM_MAP_ENTRY:
            if body.name != "map" and not t.is_dyn(body):
                raise self.error(node.body, f"transformMapEntry expects a map result, found '{body}'")
            return body if body.name == "map" else t.map_of(t.DYN, t.DYN)
        if kind == ast.SORT_BY:
            if range_type.name != "list" and not t.is_dyn(range_type):
                raise self._no_overload(node, "sortBy", [range_type], member=True)
            return range_type if range_type.name == "list" else t.list_of(t.DYN)
        raise self.error(node, f"unsupported macro {kind}")  # pragma: no cover

    def _expect_bool(self, node: ast.Node, ct: t.CelType, kind: str) -> None:
        if not (t.is_dyn(ct) or ct == t.BOOL):
            raise self._no_overload(node, "_&&_" if kind == ast.ALL else "_||_", [t.BOOL, ct], member=False)
