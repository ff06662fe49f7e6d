"""A static worst-case cost estimate, as API validation applies to new expressions.

The model follows cel-go's in spirit: every node costs one unit, a comprehension costs its
range size times its body, size-dependent functions cost their input sizes. Sizes come from
what a DRA device can hold: at most 32 attributes and capacities, strings of at most 64
characters, lists of at most 48 values; literals have their own size.
"""

from __future__ import annotations

from extender.cel import ast

MAX_ATTRIBUTES = 32
MAX_STRING = 64
MAX_LIST = 48


def _size(node: ast.Node) -> int:
    if isinstance(node, ast.Literal):
        return len(node.value) if isinstance(node.value, str | bytes) else 1
    if isinstance(node, ast.ListLiteral):
        return len(node.elements)
    if isinstance(node, ast.MapLiteral):
        return len(node.entries)
    if isinstance(node, ast.Call):
        if node.function == "lists.range" and node.args and isinstance(node.args[0], ast.Literal):
            value = node.args[0].value
            return max(int(value), 0) if isinstance(value, int) else MAX_LIST
        if node.function in ("split", "findAll") and node.target is not None:
            return _size(node.target)
        if node.function in ("_+_",):
            return sum(_size(a) for a in node.args)
        if (
            node.function in ("map", "filter", "slice", "sort", "distinct", "reverse", "flatten")
            and node.target
        ):
            return _size(node.target)
    if isinstance(node, ast.Comprehension) and node.kind in (
        ast.MAP,
        ast.FILTER,
        ast.TRANSFORM_LIST,
        ast.SORT_BY,
    ):
        return _size(node.range)
    if node.type.name == "map":
        return MAX_ATTRIBUTES
    if node.type.name == "list":
        return MAX_LIST
    return MAX_STRING


def estimate(node: ast.Node) -> int:
    """Worst-case cost units of evaluating ``node`` once."""
    if isinstance(node, ast.Comprehension):
        per_item = estimate(node.body) + (estimate(node.filter) if node.filter else 0) + 1
        if node.kind == ast.BIND or node.kind in (ast.OPT_MAP, ast.OPT_FLAT_MAP):
            return estimate(node.range) + per_item
        return estimate(node.range) + _size(node.range) * per_item
    cost = 1 + sum(estimate(c) for c in ast.children(node))
    if isinstance(node, ast.Call) and any(ov.linear_cost for ov in node.overloads):
        arg_nodes = ([node.target] if node.target is not None else []) + node.args
        cost += sum(_size(a) for a in arg_nodes) + _size(node)
    return cost
