"""Keys interned to small ints, for memo tables keyed by what claims look like."""

from __future__ import annotations

from typing import Any


class Interner:
    """Keys to small ints; an id is never given out again, even after its key is dropped."""

    __slots__ = ("_ids", "_next")

    def __init__(self) -> None:
        self._ids: dict[tuple[Any, ...], int] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._ids)

    def get(self, key: tuple[Any, ...]) -> int | None:
        return self._ids.get(key)

    def add(self, key: tuple[Any, ...]) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = self._next
            self._next += 1
        return found

    def pop(self, key: tuple[Any, ...]) -> int | None:
        return self._ids.pop(key, None)
