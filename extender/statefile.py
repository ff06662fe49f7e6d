"""Reading cluster-state files: YAML or JSON, multi-document, ``kind: List`` (the I/O edge)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

#: libyaml's C loader when PyYAML was built with it (several times faster), else the pure one.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StateFileError(ValueError):
    """A state file that cannot be read at all."""


def _documents(path: Path) -> Iterator[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StateFileError(f"{path}: {exc.strerror or exc}") from None
    try:
        if path.suffix == ".json":
            yield orjson.loads(text)
        else:
            yield from yaml.load_all(text, Loader=_LOADER)
    except (yaml.YAMLError, orjson.JSONDecodeError) as exc:
        raise StateFileError(f"{path}: not valid YAML/JSON: {exc}") from None


def _flatten(doc: Any, where: str, problems: list[str]) -> Iterator[dict[str, Any]]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        problems.append(f"{where}: expected an object, got {type(doc).__name__}")
        return
    if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
        for i, item in enumerate(doc["items"]):
            yield from _flatten(item, f"{where} items[{i}]", problems)
        return
    yield doc


def expand(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; directories contribute their *.yaml, *.yml and *.json files, sorted."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(f for f in p.iterdir() if f.suffix in (".yaml", ".yml", ".json")))
        else:
            out.append(p)
    return out


def load_objects(paths: Iterable[str | Path]) -> tuple[list[dict[str, Any]], list[str]]:
    """All objects of the files, and problems found (objects that are not objects)."""
    objects: list[dict[str, Any]] = []
    problems: list[str] = []
    for path in expand(paths):
        for n, doc in enumerate(_documents(path)):
            objects.extend(_flatten(doc, f"{path} document {n + 1}", problems))
    return objects, problems
