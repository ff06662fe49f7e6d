"""Reading cluster-state files: YAML or JSON, multi-document, ``kind: List`` (the I/O edge).

Any input gets a clear answer: a file that is not UTF-8 text, not YAML/JSON, too large, nested
too deeply, or a set of files with no object the extender reads is a :class:`StateFileError`
naming the file and what is wrong (the commands exit 2 with that one line).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

from extender.defaults import DEFAULT_MAX_STATE_BYTES

#: libyaml's C loader when PyYAML was built with it (several times faster), else the pure one.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Suffixes read from a directory.
SUFFIXES = (".yaml", ".yml", ".json")


class StateFileError(ValueError):
    """State files that cannot be used at all."""


def _text(path: Path, max_bytes: int) -> str:
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)  # bounded: /dev/zero or a FIFO cannot hold us
    except IsADirectoryError:
        raise StateFileError(f"{path}: is a directory") from None
    except OSError as exc:
        raise StateFileError(f"{path}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise StateFileError(f"{path}: larger than {max_bytes} bytes (--max-state-bytes raises the limit)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StateFileError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "state files are YAML or JSON"
        ) from None


def _documents(path: Path, max_bytes: int) -> Iterator[Any]:
    text = _text(path, max_bytes)
    try:
        if path.suffix == ".json":
            yield orjson.loads(text)
        else:
            yield from yaml.load_all(text, Loader=_LOADER)
    except (yaml.YAMLError, orjson.JSONDecodeError) as exc:
        raise StateFileError(f"{path}: not valid YAML/JSON: {_one_line(exc)}") from None
    except RecursionError:
        raise StateFileError(f"{path}: nested too deeply to be a Kubernetes object") from None


def _kind(obj: dict[str, Any]) -> str:
    kind = obj.get("kind")
    if not kind:
        return "(no kind)"
    if not isinstance(kind, str):
        return f"(a {type(kind).__name__} as kind)"
    return kind[:40]


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


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
    """Files as given; directories contribute their *.yaml, *.yml and *.json files, sorted. A
    directory without any is an error (an empty state is never what was meant)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.suffix in SUFFIXES and not f.is_dir())
            if not found:
                raise StateFileError(
                    f"{p}: no {', '.join('*' + s for s in SUFFIXES)} files in this directory"
                )
            out.extend(found)
        else:
            out.append(p)
    return out


def load_objects(
    paths: Iterable[str | Path],
    *,
    max_bytes: int = DEFAULT_MAX_STATE_BYTES,
    kinds: Collection[str] = (),
) -> tuple[list[dict[str, Any]], list[str]]:
    """All objects of the files, and problems found (documents that are not objects).

    ``kinds``: the kinds the caller reads; when given, files holding none of them are an error.
    """
    objects: list[dict[str, Any]] = []
    problems: list[str] = []
    files = expand(paths)
    for path in files:
        for n, doc in enumerate(_documents(path, max_bytes)):
            objects.extend(_flatten(doc, f"{path} document {n + 1}", problems))
    if kinds and not any(str(o.get("kind", "")) in kinds for o in objects):
        named = ", ".join(str(f) for f in files[:3]) + (
            f" and {len(files) - 3} more" if len(files) > 3 else ""
        )
        others = sorted({_kind(o) for o in objects})
        found = f"only {', '.join(others[:5])}" if others else "no Kubernetes object at all"
        raise StateFileError(
            f"{named}: no object the extender reads ({', '.join(sorted(kinds))}); found {found}"
        )
    return objects, problems
