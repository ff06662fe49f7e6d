"""The functions DRA selectors may call: CEL's standard set plus the Kubernetes libraries."""

from __future__ import annotations

from typing import Any

from extender.cel import types as t
from extender.cel.library import (
    collections,
    formats,
    network,
    optional,
    quantity,
    regex,
    semver,
    standard,
    strings,
    urls,
)
from extender.cel.library.registry import Registry
from extender.cel.values import cel_equal, cel_in


def _includes(container: Any, value: Any) -> bool:
    """DRAListTypeAttributes ``includes``: membership for lists, equality for scalars."""
    if isinstance(container, list):
        return cel_in(value, container)
    try:
        return cel_equal(container, value)
    except Exception:
        return False


def build_registry(*, list_type_attributes: bool, allow_multiple_allocations_field: bool = True) -> Registry:
    """Every declaration of one environment. Built per environment; nothing is shared."""
    reg = Registry()
    for lib in (standard, regex, quantity, semver, strings, collections, network, urls, formats, optional):
        lib.register(reg)
    if list_type_attributes:
        reg.add("includes", "dyn_includes_dyn", (t.DYN, t.DYN), t.BOOL, _includes, member=True)
    attribute_value = t.DYN if list_type_attributes else t.ANY
    fields = {
        "driver": t.STRING,
        "attributes": t.map_of(t.STRING, t.map_of(t.STRING, attribute_value)),
        "capacity": t.map_of(t.STRING, t.map_of(t.STRING, t.QUANTITY)),
    }
    if allow_multiple_allocations_field:
        fields["allowMultipleAllocations"] = t.BOOL
    reg.object_fields[t.DRA_DEVICE.name] = fields
    reg.finalize()
    return reg
