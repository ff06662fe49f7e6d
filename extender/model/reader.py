"""Typed access to raw API dicts, with errors that name the offending field."""

from __future__ import annotations

import functools
from typing import Any

from extender.model.errors import ObjectError
from extender.quantity import Quantity, QuantityError, parse_quantity

#: Quantities are immutable and drivers repeat the same few strings ("40Gi") on every device.
_parse_quantity = functools.lru_cache(maxsize=4096)(parse_quantity)


class Reader:
    """A view of one mapping inside an object; ``path`` is what error messages show.

    A reader made by another (:meth:`sub`, :meth:`readers`) knows its path as (that reader, the
    key[, the index]) and spells it only when asked: an error is rare, and formatting the path
    of every mapping read was a tenth of reading a Pod (issue 54)."""

    __slots__ = ("_index", "_key", "_parent", "data")

    def __init__(
        self, data: Any, path: str = "", parent: Reader | None = None, index: int | None = None
    ) -> None:
        self._parent = parent
        self._key = path
        self._index = index
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ObjectError(f"{self.path or 'object'}: expected a mapping, got {type(data).__name__}")
        self.data: dict[str, Any] = data

    @property
    def path(self) -> str:
        parent = self._parent
        path = self._key if parent is None else parent._at(self._key)
        return path if self._index is None else f"{path}[{self._index}]"

    def _at(self, key: str) -> str:
        path = self.path
        return f"{path}.{key}" if path else key

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def string(self, key: str, default: str = "") -> str:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise ObjectError(f"{self._at(key)}: expected a string, got {type(value).__name__}")
        return value

    def opt_string(self, key: str) -> str | None:
        return self.string(key) if self.has(key) else None

    def integer(self, key: str, default: int = 0) -> int:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise ObjectError(f"{self._at(key)}: expected an integer, got {type(value).__name__}")
        return value

    def boolean(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ObjectError(f"{self._at(key)}: expected a boolean, got {type(value).__name__}")
        return value

    def opt_boolean(self, key: str) -> bool | None:
        return self.boolean(key) if self.has(key) else None

    def items(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise ObjectError(f"{self._at(key)}: expected a list, got {type(value).__name__}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        items = self.items(key)
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise ObjectError(f"{self._at(key)}[{i}]: expected a string, got {type(item).__name__}")
        return tuple(items)

    def readers(self, key: str) -> list[Reader]:
        value = self.data.get(key)
        if not value:  # most lists a parser asks for are absent or empty
            self.items(key)  # refuses what is not a list
            return []
        return [Reader(item, key, self, i) for i, item in enumerate(self.items(key))]

    def sub(self, key: str) -> Reader:
        return Reader(self.data.get(key), key, self)

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ObjectError(f"{self._at(key)}: expected a mapping, got {type(value).__name__}")
        return value

    def quantity(self, key: str) -> Quantity:
        value = self.data.get(key)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ObjectError(f"{self._at(key)}: expected a quantity, got {type(value).__name__}")
        try:
            return _parse_quantity(str(value))
        except QuantityError as exc:
            raise ObjectError(f"{self._at(key)}: invalid quantity {value!r}: {exc}") from None

    def quantities(self, key: str, field: str | None = None) -> dict[str, Quantity]:
        """A map of quantities (``{name: q}``, or ``{name: {field: q}}`` when ``field`` is given)."""
        out = {}
        inner = self.sub(key)
        for name in inner.data:
            out[name] = inner.sub(name).quantity(field) if field else inner.quantity(name)
        return out
