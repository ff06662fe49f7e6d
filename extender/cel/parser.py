"""Parsing CEL text into :mod:`extender.cel.ast` trees.

The grammar is cel-python's (``celpy/cel.lark``), extended with cel-go's optional field and
index syntax (``a.?b``, ``a[?b]``). Literal decoding reuses cel-python's string and bytes
unescaping. Macros are expanded here, as cel-go's parser does.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection
from importlib import resources
from typing import Any

import lark
from celpy.evaluation import celbytes, celstr
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from extender.cel import ast
from extender.cel import types as t
from extender.cel.errors import CelCompileError
from extender.cel.values import UInt

#: cel-go's parser limit on nesting; deeper expressions are rejected, never crash the process.
MAX_RECURSION_DEPTH = 250

_OPTIONAL_SYNTAX = """
member         : member_dot | member_dot_arg | member_index | member_object | primary
               | member_dot_opt | member_index_opt
member_dot_opt : member "." "?" IDENT
member_index_opt : member "[" "?" expr "]"
"""

#: cel-go's list and map literals: optional elements and entries (``[?x]``, ``{?k: v}``) and a
#: trailing comma.
_LITERAL_SYNTAX = """
list_lit       : "[" [listelems] "]"
listelems      : listelem ("," listelem)* [","]
listelem       : expr | opt_elem
opt_elem       : "?" expr
map_lit        : "{" [mapinits] "}"
mapinits       : mapentry ("," mapentry)* [","]
mapentry       : expr ":" expr | opt_key ":" expr
opt_key        : "?" expr
"""

#: The cel-python rules the extensions above replace.
_REPLACED_RULES = ("member", "list_lit", "map_lit", "mapinits")

_BINARY_OPS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}

#: Member-call macros: name -> (comprehension kind, allowed argument counts, variables).
_ONE_VAR_MACROS = {
    "all": ast.ALL,
    "exists": ast.EXISTS,
    "exists_one": ast.EXISTS_ONE,
    "existsOne": ast.EXISTS_ONE,
    "map": ast.MAP,
    "filter": ast.FILTER,
    "sortBy": ast.SORT_BY,
    "optMap": ast.OPT_MAP,
    "optFlatMap": ast.OPT_FLAT_MAP,
}
_TWO_VAR_MACROS = {
    "all": ast.ALL,
    "exists": ast.EXISTS,
    "existsOne": ast.EXISTS_ONE,
    "exists_one": ast.EXISTS_ONE,
    "transformList": ast.TRANSFORM_LIST,
    "transformMap": ast.TRANSFORM_MAP,
    "transformMapEntry": ast.TRANSFORM_MAP_ENTRY,
}


@functools.cache
def build_lark() -> lark.Lark:
    """The LALR parser for the extended grammar, built once per process and shared by every
    environment (the hint planner's thread's too).

    Building it costs about half a second of CPU (the LALR analysis), which every environment
    paid before: a service builds two, and a test suite thousands. Sharing is safe: the parser
    is never changed after it is built, and each ``parse`` makes its own lexer and parser state
    (lark's LALR front end: ``LexerThread.from_text`` and a new ``ParserState`` per call), so
    concurrent parses do not meet. An in-memory memo of a constant, unlike the on-disk table
    cache removed in issue 29 (a pickle another user could swap)."""
    grammar = resources.files("celpy").joinpath("cel.lark").read_text(encoding="utf-8")
    for rule in _REPLACED_RULES:
        # A rule is its first line plus any continuation lines starting with "|".
        pattern = re.compile(rf"^{rule}\s*:.*(?:\n\s+\|.*)*$", re.M)
        if not pattern.search(grammar):
            raise RuntimeError(f"cel-python grammar changed: no {rule!r} rule to replace")
        grammar = pattern.sub("", grammar, count=1)
    grammar += _OPTIONAL_SYNTAX + _LITERAL_SYNTAX
    return lark.Lark(
        grammar,
        parser="lalr",
        start="expr",
        g_regex_flags=re.M,
        lexer_callbacks={"IDENT": _keyword_literals},
        propagate_positions=True,
        maybe_placeholders=False,
        priority="invert",
    )


def _keyword_literals(token: lark.Token) -> lark.Token:
    if token.value in ("true", "false"):
        return lark.Token("BOOL_LIT", token.value)
    if token.value == "null":
        return lark.Token("NULL_LIT", token.value)
    return token


def format_error(source: str, line: int, column: int, message: str) -> str:
    """cel-go's error layout: location, message, the source line and a caret."""
    lines = source.splitlines() or [""]
    text = lines[line - 1] if 0 < line <= len(lines) else lines[0]
    return f"ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {'.' * max(column - 1, 0)}^"


class Parser:
    """Turns expression text into an AST; knows the qualified global function names."""

    def __init__(self, qualified_functions: Collection[str]) -> None:
        self._lark = build_lark()
        self._qualified = frozenset(qualified_functions)

    def parse(self, source: str) -> ast.Node:
        try:
            tree = self._lark.parse(source)
        except UnexpectedInput as exc:
            line, column = exc.line, exc.column
            if isinstance(exc, UnexpectedToken):
                what = (
                    f"mismatched input '{exc.token}'"
                    if exc.token.type != "$END"
                    else "unexpected end of input"
                )
                expected = sorted(exc.expected)[:8]
                detail = f"{what} expecting one of {{{', '.join(expected)}}}"
            elif isinstance(exc, UnexpectedCharacters):
                at = exc.pos_in_stream or 0
                detail = f"token recognition error at: '{source[at : at + 1]}'"
            else:
                detail = str(exc).splitlines()[0]
            raise CelCompileError(
                format_error(source, max(line, 1), max(column, 1), f"Syntax error: {detail}")
            ) from None
        except LarkError as exc:  # pragma: no cover - lark's other failures
            raise CelCompileError(format_error(source, 1, 1, f"Syntax error: {exc}")) from None
        root = _Converter(source, self._qualified).expr(tree, 0)
        for node in ast.walk(root):
            # 9223372036854775808 is only valid as the operand of a unary minus (folded above).
            if isinstance(node, ast.Literal) and node.literal_type == t.INT and node.value == 2**63:
                raise CelCompileError(format_error(source, node.line, node.column, "invalid int literal"))
        return root


def _pos(node: Any) -> tuple[int, int]:
    """(line, column) of a tree or token; 1-based, (1, 1) when unknown."""
    meta = getattr(node, "meta", None)
    if meta is not None and not getattr(meta, "empty", True):
        return (getattr(meta, "line", None) or 1), (getattr(meta, "column", None) or 1)
    line = getattr(node, "line", None)
    column = getattr(node, "column", None)
    return (line or 1), (column or 1)


class _Converter:
    def __init__(self, source: str, qualified: frozenset[str]) -> None:
        self.source = source
        self.qualified = qualified

    def error(self, node: Any, message: str) -> CelCompileError:
        line, column = _pos(node)
        return CelCompileError(format_error(self.source, line, column, message))

    def _depth(self, node: Any, depth: int) -> int:
        if depth > MAX_RECURSION_DEPTH:
            raise self.error(node, "expression recursion limit exceeded")
        return depth + 1

    # --- operator levels ---------------------------------------------------------------

    def expr(self, tree: lark.Tree[Any], depth: int) -> ast.Node:
        depth = self._depth(tree, depth)
        kids = tree.children
        if len(kids) == 1:
            return self.logical(kids[0], depth)
        line, column = _pos(tree)
        cond = self.logical(kids[0], depth)
        return ast.Call(
            line, column, "_?_:_", None, [cond, self.logical(kids[1], depth), self.expr(kids[2], depth)]
        )

    def logical(self, tree: lark.Tree[Any], depth: int) -> ast.Node:
        """``||`` and ``&&`` chains, balanced like cel-go's parser so depth stays logarithmic."""
        if tree.data == "conditionalor":
            operands = self._chain(tree, "conditionalor")
            return self._balance("_||_", [self.logical(o, depth) for o in operands], tree)
        if tree.data == "conditionaland":
            operands = self._chain(tree, "conditionaland")
            return self._balance("_&&_", [self.relation(o, depth) for o in operands], tree)
        return self.relation(tree, depth)

    @staticmethod
    def _chain(tree: lark.Tree[Any], rule: str) -> list[lark.Tree[Any]]:
        out: list[lark.Tree[Any]] = []
        node = tree
        while node.data == rule and len(node.children) == 2:
            out.append(node.children[1])
            node = node.children[0]
        out.append(node.children[0] if node.data == rule else node)
        out.reverse()
        return out

    def _balance(self, op: str, operands: list[ast.Node], tree: lark.Tree[Any]) -> ast.Node:
        if len(operands) == 1:
            return operands[0]
        mid = len(operands) // 2
        line, column = _pos(tree)
        left = self._balance(op, operands[:mid], tree)
        right = self._balance(op, operands[mid:], tree)
        return ast.Call(line, column, op, None, [left, right])

    def relation(self, tree: lark.Tree[Any], depth: int) -> ast.Node:
        depth = self._depth(tree, depth)
        if tree.data in ("relation", "addition", "multiplication"):
            if len(tree.children) == 1:
                return self.relation(tree.children[0], depth)
            op_tree, right = tree.children
            op = _BINARY_OPS[op_tree.data]
            left = self.relation(op_tree.children[0], depth)
            line, column = _pos(op_tree)
            return ast.Call(line, column, op, None, [left, self.relation(right, depth)])
        if tree.data == "unary":
            return self.unary(tree, depth)
        if tree.data in ("conditionalor", "conditionaland"):
            return self.logical(tree, depth)
        if tree.data == "expr":
            return self.expr(tree, depth)
        return self.member(tree, depth)

    def unary(self, tree: lark.Tree[Any], depth: int) -> ast.Node:
        kids = tree.children
        if len(kids) == 1:
            return self.member(kids[0], depth)
        op = "!_" if kids[0].data == "unary_not" else "-_"
        operand = self.relation(kids[1], depth)
        line, column = _pos(tree)
        if (
            op == "-_"
            and isinstance(operand, ast.Literal)
            and operand.literal_type == t.INT
            and operand.value == 2**63
        ):
            # Fold -9223372036854775808 so that it stays in range, as in cel-go.
            return ast.Literal(line, column, -(2**63), t.INT)
        return ast.Call(line, column, op, None, [operand])

    # --- member / primary --------------------------------------------------------------

    def member(self, tree: lark.Tree[Any], depth: int) -> ast.Node:
        depth = self._depth(tree, depth)
        if tree.data == "member":
            return self.member(tree.children[0], depth)
        if tree.data == "primary":
            return self.primary(tree.children[0], depth)
        line, column = _pos(tree)
        kids = tree.children
        if tree.data == "member_dot":
            return ast.Select(line, column, self.member(kids[0], depth), str(kids[1]))
        if tree.data == "member_dot_opt":
            return ast.Select(line, column, self.member(kids[0], depth), str(kids[1]), optional=True)
        if tree.data == "member_index":
            return ast.Index(line, column, self.member(kids[0], depth), self.expr(kids[1], depth))
        if tree.data == "member_index_opt":
            return ast.Index(
                line, column, self.member(kids[0], depth), self.expr(kids[1], depth), optional=True
            )
        if tree.data == "member_dot_arg":
            name = str(kids[1])
            args = self.exprlist(kids[2], depth) if len(kids) > 2 else []
            name_line, name_column = _pos(kids[1])
            return self.member_call(kids[0], name, args, name_line, name_column, depth)
        if tree.data == "member_object":
            raise self.error(tree, "message construction is not supported in DRA selectors")
        return self.primary(tree, depth)  # pragma: no cover - grammar has no other member forms

    def member_call(
        self, target_tree: lark.Tree[Any], name: str, args: list[ast.Node], line: int, column: int, depth: int
    ) -> ast.Node:
        qualified = _qualified_name(target_tree)
        if qualified is not None:
            full = f"{qualified}.{name}"
            if full == "cel.bind":
                return self.bind_macro(args, line, column)
            if full in self.qualified:
                return ast.Call(line, column, full, None, args)
        target = self.member(target_tree, depth)
        macro = self.macro(target, name, args, line, column)
        if macro is not None:
            return macro
        return ast.Call(line, column, name, target, args)

    def bind_macro(self, args: list[ast.Node], line: int, column: int) -> ast.Node:
        if len(args) != 3:
            raise CelCompileError(
                format_error(self.source, line, column, "cel.bind() takes exactly 3 arguments")
            )
        var = self._var_name(args[0], line, column)
        return ast.Comprehension(line, column, ast.BIND, args[1], var, None, args[2])

    def _var_name(self, node: ast.Node, line: int, column: int) -> str:
        if not isinstance(node, ast.Ident):
            raise CelCompileError(
                format_error(self.source, node.line, node.column, "argument is not an identifier")
            )
        return node.name

    def macro(
        self, target: ast.Node, name: str, args: list[ast.Node], line: int, column: int
    ) -> ast.Node | None:
        n = len(args)
        if name in ("map", "transformList", "transformMap", "transformMapEntry") and n in (3, 4):
            if name == "map" and n == 3:
                var = self._var_name(args[0], line, column)
                return ast.Comprehension(line, column, ast.MAP, target, var, None, args[2], filter=args[1])
            if name != "map":
                kind = _TWO_VAR_MACROS[name]
                v1 = self._var_name(args[0], line, column)
                v2 = self._var_name(args[1], line, column)
                self._distinct_vars(v1, v2, args[1])
                body, flt = (args[3], args[2]) if n == 4 else (args[2], None)
                return ast.Comprehension(line, column, kind, target, v1, v2, body, filter=flt)
        if n == 2 and name in _ONE_VAR_MACROS:
            var = self._var_name(args[0], line, column)
            return ast.Comprehension(line, column, _ONE_VAR_MACROS[name], target, var, None, args[1])
        if n == 3 and name in _TWO_VAR_MACROS:
            v1 = self._var_name(args[0], line, column)
            v2 = self._var_name(args[1], line, column)
            self._distinct_vars(v1, v2, args[1])
            return ast.Comprehension(line, column, _TWO_VAR_MACROS[name], target, v1, v2, args[2])
        return None

    def _distinct_vars(self, v1: str, v2: str, node: ast.Node) -> None:
        if v1 == v2:
            raise CelCompileError(
                format_error(self.source, node.line, node.column, f"overlapping declaration name '{v2}'")
            )

    def primary(self, tree: lark.Tree[Any], depth: int) -> ast.Node:
        line, column = _pos(tree)
        kids = tree.children
        kind = tree.data
        if kind == "literal":
            token = kids[0]
            assert isinstance(token, lark.Token)
            return self.literal(token, line, column)
        if kind in ("ident", "dot_ident"):
            return ast.Ident(line, column, str(kids[0]))
        if kind in ("ident_arg", "dot_ident_arg"):
            name = str(kids[0])
            args = self.exprlist(kids[1], depth) if len(kids) > 1 else []
            if name == "has":
                return self.has_macro(args, line, column)
            return ast.Call(line, column, name, None, args)
        if kind == "paren_expr":
            return self.expr(kids[0], depth)
        if kind == "list_lit":
            elements: list[ast.Node] = []
            optional: set[int] = set()
            for i, elem in enumerate(kids[0].children if kids else []):
                inner = elem.children[0]
                if isinstance(inner, lark.Tree) and inner.data == "opt_elem":
                    optional.add(i)
                    inner = inner.children[0]
                elements.append(self.expr(inner, depth))
            return ast.ListLiteral(line, column, elements, frozenset(optional))
        if kind == "map_lit":
            entries: list[tuple[ast.Node, ast.Node]] = []
            optional_keys: set[int] = set()
            for i, entry in enumerate(kids[0].children if kids else []):
                key, value = entry.children
                if isinstance(key, lark.Tree) and key.data == "opt_key":
                    optional_keys.add(i)
                    key = key.children[0]
                entries.append((self.expr(key, depth), self.expr(value, depth)))
            return ast.MapLiteral(line, column, entries, frozenset(optional_keys))
        raise self.error(tree, f"unsupported syntax: {kind}")  # pragma: no cover

    def has_macro(self, args: list[ast.Node], line: int, column: int) -> ast.Node:
        if len(args) != 1 or not isinstance(args[0], ast.Select) or args[0].optional:
            where = args[0] if args else None
            ln, col = (where.line, where.column) if where else (line, column)
            raise CelCompileError(format_error(self.source, ln, col, "invalid argument to has() macro"))
        sel = args[0]
        return ast.Select(sel.line, sel.column, sel.operand, sel.field_name, test_only=True)

    def exprlist(self, tree: lark.Tree[Any], depth: int) -> list[ast.Node]:
        return [self.expr(k, depth) for k in tree.children]

    def literal(self, token: lark.Token, line: int, column: int) -> ast.Literal:
        kind = token.type
        text = str(token)
        try:
            if kind == "INT_LIT":
                value = _parse_int(text)
                if value > 2**63 - 1 or value < -(2**63):
                    if value == 2**63:  # the operand of a unary minus; folded by unary()
                        return ast.Literal(line, column, value, t.INT)
                    raise CelCompileError(
                        format_error(self.source, line, column, f"invalid int literal: {text}")
                    )
                return ast.Literal(line, column, value, t.INT)
            if kind == "UINT_LIT":
                value = _parse_int(text[:-1])
                if value < 0 or value > 2**64 - 1:
                    raise CelCompileError(
                        format_error(self.source, line, column, f"invalid uint literal: {text}")
                    )
                return ast.Literal(line, column, UInt(value), t.UINT)
            if kind == "FLOAT_LIT":
                return ast.Literal(line, column, float(text), t.DOUBLE)
            if kind in ("STRING_LIT", "MLSTRING_LIT"):
                return ast.Literal(line, column, str(celstr(token)), t.STRING)
            if kind == "BYTES_LIT":
                return ast.Literal(line, column, bytes(celbytes(token)), t.BYTES)
            if kind == "BOOL_LIT":
                return ast.Literal(line, column, text == "true", t.BOOL)
            if kind == "NULL_LIT":
                return ast.Literal(line, column, None, t.NULL)
        except (ValueError, OverflowError) as exc:
            raise CelCompileError(
                format_error(self.source, line, column, f"invalid literal {text}: {exc}")
            ) from None
        raise CelCompileError(format_error(self.source, line, column, f"unsupported literal {text}"))


def _parse_int(text: str) -> int:
    negative = text.startswith("-")
    body = text[1:] if negative else text
    value = int(body, 16) if body[:2].lower() == "0x" else int(body, 10)
    return -value if negative else value


def _qualified_name(tree: Any) -> str | None:
    """``a.b.c`` when the member tree is a plain dotted identifier chain, else ``None``."""
    parts: list[str] = []
    node = tree
    while True:
        if isinstance(node, lark.Tree) and node.data in ("member", "primary"):
            node = node.children[0]
            continue
        if isinstance(node, lark.Tree) and node.data == "member_dot":
            parts.append(str(node.children[1]))
            node = node.children[0]
            continue
        if isinstance(node, lark.Tree) and node.data == "ident":
            parts.append(str(node.children[0]))
            return ".".join(reversed(parts))
        return None
