"""Computations written as generators that yield between small steps (so the engine's loop can
serve the verbs in between): run one to its end when a caller wants the result at once."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

T = TypeVar("T")


def to_the_end(steps: Generator[None, None, T]) -> T:
    """The result of ``steps``, with every step run now."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
