"""List functions: the K8s lists library, cel-go ext.Lists (v3) and ext.Sets."""

from __future__ import annotations

import datetime as _dt
import functools
import itertools
from typing import Any

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry
from extender.cel.values import UInt, cel_compare, cel_equal, cel_in, check_int, check_uint, type_name

#: Upper bound for ``lists.range(n)``: far above any useful selector, far below memory trouble.
MAX_RANGE = 1_000_000


def _ordered(items: list[Any], op: str) -> None:
    kinds = {type(v) for v in items}
    if len(kinds) > 1:
        raise CelEvalError(f"{op}: list elements must have the same type")


def _is_sorted(items: list[Any]) -> bool:
    _ordered(items, "isSorted")
    return all(cel_compare(a, b, "isSorted") <= 0 for a, b in itertools.pairwise(items))


def _sum(items: list[Any]) -> Any:
    if not items:
        return 0
    first = type(items[0])
    if any(type(v) is not first for v in items):
        raise CelEvalError("sum: list elements must have the same type")
    if first is int:
        return check_int(sum(items))
    if first is UInt:
        return check_uint(sum(int(v) for v in items))
    if first is float:
        return float(sum(items))
    if first is _dt.timedelta:
        return sum(items, _dt.timedelta(0))
    raise CelEvalError(f"no such overload: sum(list({type_name(items[0])}))")


def _extreme(items: list[Any], name: str, sign: int) -> Any:
    if not items:
        raise CelEvalError(f"{name} called on empty list")
    _ordered(items, name)
    best = items[0]
    for v in items[1:]:
        if cel_compare(v, best, name) * sign > 0:
            best = v
    return best


def _index_of(items: list[Any], value: Any) -> int:
    for i, v in enumerate(items):
        if cel_equal(v, value):
            return i
    return -1


def _last_index_of(items: list[Any], value: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if cel_equal(items[i], value):
            return i
    return -1


def _slice(items: list[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0:
        raise CelEvalError(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        raise CelEvalError(
            f"cannot slice({start}, {end}), start index must be less than or equal to end index"
        )
    if end > len(items):
        raise CelEvalError(f"cannot slice({start}, {end}), list is length {len(items)}")
    return items[start:end]


def _flatten(items: list[Any], depth: int = 1) -> list[Any]:
    if depth < 0:
        raise CelEvalError("level must be non-negative")
    out: list[Any] = []
    for v in items:
        if isinstance(v, list) and depth > 0:
            out.extend(_flatten(v, depth - 1))
        else:
            out.append(v)
    return out


def _distinct(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for v in items:
        if not any(cel_equal(v, o) for o in out):
            out.append(v)
    return out


def _sort(items: list[Any]) -> list[Any]:
    _ordered(items, "sort")
    return sorted(items, key=functools.cmp_to_key(lambda a, b: cel_compare(a, b, "sort")))


def _range(n: int) -> list[int]:
    if n > MAX_RANGE:
        raise CelEvalError(f"lists.range({n}) exceeds the supported size {MAX_RANGE}")
    return list(range(max(n, 0)))


def _sets_contains(a: list[Any], b: list[Any]) -> bool:
    return all(cel_in(x, a) for x in b)


def _sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(cel_in(x, a) for x in b)


def register(reg: Registry) -> None:
    A, B, Int = t.A, t.BOOL, t.INT
    LA = t.list_of(A)
    reg.add("isSorted", "list_is_sorted", (LA,), B, _is_sorted, member=True, linear_cost=True)
    reg.add("sum", "list_sum", (LA,), A, _sum, member=True, linear_cost=True)
    reg.add("min", "list_min", (LA,), A, lambda xs: _extreme(xs, "min", -1), member=True, linear_cost=True)
    reg.add("max", "list_max", (LA,), A, lambda xs: _extreme(xs, "max", 1), member=True, linear_cost=True)
    reg.add("indexOf", "list_index_of", (LA, A), Int, _index_of, member=True, linear_cost=True)
    reg.add("lastIndexOf", "list_last_index_of", (LA, A), Int, _last_index_of, member=True, linear_cost=True)
    reg.add("slice", "list_slice", (LA, Int, Int), LA, _slice, member=True, linear_cost=True)
    reg.add(
        "flatten",
        "list_flatten",
        (t.list_of(t.DYN),),
        t.list_of(t.DYN),
        _flatten,
        member=True,
        linear_cost=True,
    )
    reg.add(
        "flatten",
        "list_flatten_int",
        (t.list_of(t.DYN), Int),
        t.list_of(t.DYN),
        _flatten,
        member=True,
        linear_cost=True,
    )
    reg.add("distinct", "list_distinct", (LA,), LA, _distinct, member=True, linear_cost=True)
    reg.add(
        "reverse", "list_reverse", (LA,), LA, lambda xs: list(reversed(xs)), member=True, linear_cost=True
    )
    reg.add("sort", "list_sort", (LA,), LA, _sort, member=True, linear_cost=True)
    reg.add("lists.range", "lists_range", (Int,), t.list_of(Int), _range, linear_cost=True)
    reg.add("sets.contains", "list_sets_contains_list", (LA, LA), B, _sets_contains, linear_cost=True)
    reg.add(
        "sets.equivalent",
        "list_sets_equivalent_list",
        (LA, LA),
        B,
        lambda a, b: _sets_contains(a, b) and _sets_contains(b, a),
        linear_cost=True,
    )
    reg.add("sets.intersects", "list_sets_intersects_list", (LA, LA), B, _sets_intersects, linear_cost=True)
