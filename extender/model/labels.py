"""Node labels that remember their hashable form (labels are immutable once parsed)."""

from __future__ import annotations

from collections.abc import Mapping


class Labels(dict[str, str]):
    """Node labels that remember their hashable form (labels are immutable once parsed)."""

    __slots__ = ("label_key",)

    def __init__(self, labels: Mapping[str, str]) -> None:
        super().__init__(labels)
        self.label_key = tuple(sorted(self.items()))
