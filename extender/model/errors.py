"""The object model's exceptions."""

from __future__ import annotations


class ObjectError(ValueError):
    """An API object that cannot be read: a wrong type or a missing field, with its path."""


class TooDeep(ObjectError):
    """An object nested deeper than the extender carries (extender/model/nesting.py)."""
