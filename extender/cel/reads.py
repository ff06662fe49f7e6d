"""Which parts of ``device`` an expression reads, and a memo key made of exactly those parts.

A selector's result depends only on the device fields it reads: ``productName`` of one domain,
say. Devices that agree on those values share one evaluation, which turns 10,000 identical GPUs
into a handful of CEL evaluations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extender.cel import ast
from extender.cel.device import CelDevice

#: A path read from the device: ("device",), ("driver",), ("allowMultipleAllocations",),
#: ("attributes",), ("attributes", domain), ("attributes", domain, id), same for "capacity".
Path = tuple[str, ...]

_MISSING = ("<missing>",)


def _const_key(node: ast.Node) -> str | None:
    if isinstance(node, ast.Literal) and isinstance(node.value, str):
        return node.value
    return None


def _step(node: ast.Node) -> tuple[ast.Node, str] | None:
    """``x.f`` / ``x[\"f\"]`` / ``x.?f`` / ``x[?\"f\"]`` / ``has(x.f)`` -> (x, f)."""
    if isinstance(node, ast.Select):
        return node.operand, node.field_name
    if isinstance(node, ast.Index):
        key = _const_key(node.index)
        if key is not None:
            return node.operand, key
    return None


def device_path(node: ast.Node, device_var: str = "device") -> Path | None:
    """The device path ``node`` denotes when it is a constant access chain on ``device``."""
    keys: list[str] = []
    cur = node
    while True:
        if isinstance(cur, ast.Ident):
            if cur.name != device_var:
                return None
            break
        step = _step(cur)
        if step is None:
            return None
        cur, key = step
        keys.append(key)
    keys.reverse()
    if not keys:
        return ("device",)
    head = keys[0]
    if head in ("driver", "allowMultipleAllocations"):
        return (head,)
    if head in ("attributes", "capacity"):
        return tuple(keys[:3])
    return ("device",)  # an undefined field: the checker rejects it; be conservative anyway


def derive_reads(root: ast.Node) -> frozenset[Path]:
    reads: set[Path] = set()
    stack: list[tuple[ast.Node, frozenset[str]]] = [(root, frozenset())]
    while stack:
        node, shadowed = stack.pop()
        if "device" not in shadowed:
            path = device_path(node)
            if path is not None:
                reads.add(path)
                continue
        if isinstance(node, ast.Comprehension):
            inner = shadowed | {node.var1} | ({node.var2} if node.var2 else set())
            stack.append((node.range, shadowed))
            if node.filter is not None:
                stack.append((node.filter, inner))
            stack.append((node.body, inner))
            continue
        stack.extend((child, shadowed) for child in ast.children(node))
    return _simplify(frozenset(reads))


def _simplify(reads: frozenset[Path]) -> frozenset[Path]:
    """Drop paths covered by a shorter path that is also read."""
    if ("device",) in reads:
        return frozenset({("device",)})
    return frozenset(p for p in reads if not any(q != p and p[: len(q)] == q for q in reads))


def _domain_items(group: dict[str, dict[str, Any]], domain: str) -> Any:
    entries = group.get(domain)
    if entries is None:
        return _MISSING
    return tuple(sorted((k, v.text if hasattr(v, "text") else v) for k, v in entries.items()))


def _getter(path: Path) -> Callable[[CelDevice], Any]:
    kind = path[0]
    if kind == "device":
        return CelDevice.signature
    if kind == "driver":
        return lambda d: d.driver
    if kind == "allowMultipleAllocations":
        return lambda d: d.allow_multiple
    index = 2 if kind == "attributes" else 3
    if len(path) == 1:
        return lambda d: d.signature()[index]
    domain = path[1]
    if len(path) == 2:
        if kind == "attributes":
            return lambda d: _domain_items(d.attributes, domain)  # type: ignore[arg-type]
        return lambda d: _domain_items(d.capacity, domain)  # type: ignore[arg-type]
    ident = path[2]
    if kind == "attributes":
        return lambda d: d.attributes.get(domain, {}).get(ident, _MISSING)
    # Capacities compare by their text too: isInteger() depends on the representation.
    return lambda d: (
        (q.text or str(q.value)) if (q := d.capacity.get(domain, {}).get(ident)) is not None else _MISSING
    )


def key_function(reads: frozenset[Path]) -> Callable[[CelDevice], Any]:
    """A function from a device to a hashable key that determines the expression's result."""
    getters = [_getter(p) for p in sorted(reads)]
    if not getters:
        return lambda d: ()
    if len(getters) == 1:
        g = getters[0]
        return g
    if len(getters) == 2:
        g0, g1 = getters
        return lambda d: (g0(d), g1(d))
    return lambda d: tuple(g(d) for g in getters)
