"""Counting tables that hold positive counts only: a key whose count reaches zero is gone."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def tally(table: dict[K, int], key: K, sign: int) -> None:
    """Count ``key`` in (``sign`` 1) or out (-1)."""
    n = table.get(key, 0) + sign
    if n > 0:
        table[key] = n
    else:
        table.pop(key, None)
