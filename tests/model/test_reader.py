"""A reader's errors name the field, however deep: paths are spelled only when an error needs them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from extender.model.errors import ObjectError
from extender.model.reader import Reader

DOC = {"spec": {"items": [{"name": "a"}, {"name": 5, "list": "x", "inner": [1]}], "empty": [], "text": "t"}}

# (name, the read, the path the error names)
ERRORS: list[tuple[str, Callable[[Reader], Any], str]] = [
    (
        "a string in a list's item",
        lambda r: r.sub("spec").readers("items")[1].string("name"),
        "spec.items[1].name",
    ),
    (
        "a list in a list's item",
        lambda r: r.sub("spec").readers("items")[1].readers("list"),
        "spec.items[1].list",
    ),
    (
        "a mapping in a list",
        lambda r: r.sub("spec").readers("items")[1].readers("inner"),
        "spec.items[1].inner[0]",
    ),
    ("a list that is a string", lambda r: r.sub("spec").readers("text"), "spec.text"),
    ("a mapping that is a string", lambda r: r.sub("spec").sub("text"), "spec.text"),
    ("under a root with no path", lambda r: Reader(DOC).sub("spec").sub("text"), "spec.text"),
]


@pytest.mark.parametrize(("read", "path"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_the_field(read: Callable[[Reader], Any], path: str) -> None:
    with pytest.raises(ObjectError, match="^" + re.escape(path) + ": expected"):
        read(Reader(DOC))


def test_paths_start_at_the_root_path() -> None:
    item = Reader(DOC, "pod").sub("spec").readers("items")[0]
    assert item.path == "pod.spec.items[0]"
    assert Reader(DOC).sub("spec").readers("empty") == []
