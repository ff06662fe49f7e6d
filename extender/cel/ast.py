"""The CEL abstract syntax tree the checker annotates and the compiler turns into closures.

Macros are already expanded (``has``, ``all``, ``exists``, ``map``, ``cel.bind`` ...): each becomes
a :class:`Comprehension` or a test-only :class:`Select`, so later passes see a small, fixed set
of node kinds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from extender.cel.types import DYN, CelType


@dataclass(eq=False, slots=True)
class Node:
    line: int
    column: int
    #: Filled by the checker.
    type: CelType = field(default=DYN, init=False)


@dataclass(eq=False, slots=True)
class Literal(Node):
    value: Any
    literal_type: CelType


@dataclass(eq=False, slots=True)
class Ident(Node):
    name: str


@dataclass(eq=False, slots=True)
class Select(Node):
    operand: Node
    field_name: str
    #: ``has(operand.field)``
    test_only: bool = False
    #: ``operand.?field``
    optional: bool = False


@dataclass(eq=False, slots=True)
class Index(Node):
    operand: Node
    index: Node
    #: ``operand[?index]``
    optional: bool = False


@dataclass(eq=False, slots=True)
class Call(Node):
    function: str
    target: Node | None
    args: list[Node]
    #: Filled by the checker: the overloads that may apply at runtime.
    overloads: list[Any] = field(default_factory=list, init=False)


@dataclass(eq=False, slots=True)
class ListLiteral(Node):
    elements: list[Node]
    #: Positions of ``?x`` elements: optional values, added only when present.
    optional: frozenset[int] = frozenset()


@dataclass(eq=False, slots=True)
class MapLiteral(Node):
    entries: list[tuple[Node, Node]]
    #: Positions of ``?k: v`` entries: the value is optional, the entry added only when present.
    optional: frozenset[int] = frozenset()


#: Comprehension kinds (the expanded macros).
ALL = "all"
EXISTS = "exists"
EXISTS_ONE = "exists_one"
MAP = "map"
FILTER = "filter"
TRANSFORM_LIST = "transformList"
TRANSFORM_MAP = "transformMap"
TRANSFORM_MAP_ENTRY = "transformMapEntry"
SORT_BY = "sortBy"
BIND = "cel.bind"
OPT_MAP = "optMap"
OPT_FLAT_MAP = "optFlatMap"


@dataclass(eq=False, slots=True)
class Comprehension(Node):
    kind: str
    range: Node
    var1: str
    #: Second variable of two-variable macros (``all(i, v, ...)``); ``None`` otherwise.
    var2: str | None
    body: Node
    #: ``map(x, filter, expr)`` / ``transformList(i, v, filter, expr)``
    filter: Node | None = None


def walk(node: Node) -> list[Node]:
    """All nodes of a tree, parents before children."""
    out: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(children(n)))
    return out


def children(node: Node) -> list[Node]:
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Index):
        return [node.operand, node.index]
    if isinstance(node, Call):
        return ([node.target] if node.target is not None else []) + list(node.args)
    if isinstance(node, ListLiteral):
        return list(node.elements)
    if isinstance(node, MapLiteral):
        return [x for kv in node.entries for x in kv]
    if isinstance(node, Comprehension):
        kids = [node.range]
        if node.filter is not None:
            kids.append(node.filter)
        kids.append(node.body)
        return kids
    return []
