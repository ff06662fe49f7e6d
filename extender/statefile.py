"""Reading cluster-state files: YAML or JSON, multi-document, ``kind: List`` (the I/O edge).

Any input gets a clear answer: a file that is not UTF-8 text, not YAML/JSON, too large, nested
too deeply, or a set of files with no object the extender reads is a :class:`StateFileError`
naming the file and what is wrong (the commands exit 2 with that one line).
"""

from __future__ import annotations

import datetime
import re
import stat
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import orjson
import yaml

from extender.defaults import DEFAULT_MAX_STATE_BYTES
from extender.model import nesting

#: libyaml's C loader when PyYAML was built with it (several times faster), else the pure one.
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Suffixes read from a directory.
SUFFIXES = (".yaml", ".yml", ".json")


class StateFileError(ValueError):
    """State files that cannot be used at all."""


def _text(path: Path, max_bytes: int) -> str:
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO or a device would never end
            raise StateFileError(f"{path}: not a regular file")
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)  # bounded, whatever the size said
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


#: A YAML anchor (``&name`` where a node starts; not CEL's ``&&``): only then can aliases make
#: a few hundred bytes stand for gigabytes.
_ANCHOR = re.compile(r"(?<![^\s\[{,])&(?!&)[^\s\[\]{},&]")
#: Deeper flow nesting than any Kubernetes object has (libyaml recurses per level in C).
MAX_FLOW_DEPTH = 512
#: What aliases may expand a file to, in nodes (a 64 MiB export has a few million).
MAX_EXPANDED_NODES = 10_000_000


def _flow_depth_exceeds(text: str, limit: int) -> bool:
    """Whether ``[``/``{`` nest deeper than ``limit`` (quotes not considered: an estimate that
    only errs towards deeper)."""
    depth = 0
    for match in re.finditer(r"[\[\]{}]", text):
        depth += 1 if match.group() in "[{" else -1
        if depth > limit:
            return True
    return False


def _too_deep(path: Path) -> StateFileError:
    return StateFileError(f"{path}: nested deeper than {MAX_FLOW_DEPTH} levels: not a Kubernetes object")


def _json_document(path: Path, text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        if _flow_depth_exceeds(text, MAX_FLOW_DEPTH):  # orjson stops at its own depth
            raise _too_deep(path) from None
        raise


def _yaml_documents(path: Path, text: str) -> Iterator[Any]:
    if _flow_depth_exceeds(text, MAX_FLOW_DEPTH):
        raise _too_deep(path)
    if _ANCHOR.search(text) and _expanded_nodes(text) > MAX_EXPANDED_NODES:
        raise StateFileError(
            f"{path}: YAML aliases (*name) expand to more than {MAX_EXPANDED_NODES} nodes: "
            "not a Kubernetes object"
        )
    yield from yaml.load_all(text, Loader=_LOADER)


def _expanded_nodes(text: str) -> int:
    """How many nodes the stream stands for once every alias is expanded (PyYAML's dump writes
    aliases for shared values; a few hundred bytes of nested aliases can stand for billions)."""
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = [[None, 0]]  # [anchor, nodes so far] per open collection
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent):
            stack[-1][1] += sizes.get(event.anchor or "", 1)
        elif isinstance(event, yaml.ScalarEvent):
            stack[-1][1] += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            stack.append([event.anchor, 1])
        elif isinstance(event, yaml.CollectionEndEvent) and len(stack) > 1:
            anchor, size = stack.pop()
            if anchor:
                sizes[anchor] = size
            stack[-1][1] += size
        if stack[0][1] > MAX_EXPANDED_NODES:
            break
    return int(stack[0][1])


def _documents(path: Path, max_bytes: int) -> Iterator[Any]:
    text = _text(path, max_bytes)
    try:
        if path.suffix == ".json":
            yield _json_document(path, text)
        else:
            yield from _yaml_documents(path, text)
    except StateFileError:
        raise
    except (yaml.YAMLError, orjson.JSONDecodeError, ValueError, TypeError, OverflowError) as exc:
        # (constructors raise ValueError for a tag they cannot build: !!int abc, a bad timestamp)
        raise StateFileError(f"{path}: not valid YAML/JSON: {_one_line(exc)}") from None
    except RecursionError:
        raise StateFileError(f"{path}: nested too deeply to be a Kubernetes object") from None


def _printable(text: str, limit: int) -> str:
    """``text`` as one line of an error: cut at ``limit``, quoted and escaped unless printable."""
    text = text[:limit]
    return text if text.isprintable() else repr(text)


def _kind(obj: dict[str, Any]) -> str:
    kind = obj.get("kind")
    if not kind:
        return "(no kind)"
    if not isinstance(kind, str):
        return f"(a {type(kind).__name__} as kind)"
    return _printable(kind, 40)


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if name is None or name == "":
        return ""
    return _printable(name, 80) if isinstance(name, str) else f"(a {type(name).__name__} as name)"


def _as_json(obj: dict[str, Any], what: str) -> dict[str, Any]:
    """``obj`` as JSON carries it, as an API server would have it (YAML timestamps become
    strings); StateFileError for what JSON cannot hold (``!!binary``, ``!!set``, keys that are
    not strings) or the extender cannot carry (nesting deeper than orjson encodes). The reason
    is found by looking at the object, never read from the encoder's wording."""
    try:
        return cast(dict[str, Any], orjson.loads(orjson.dumps(obj)))
    except orjson.JSONEncodeError:
        pass
    problem = _not_json(obj)
    if problem is not None:
        raise StateFileError(f"{what} is not representable as JSON: {problem}")
    raise StateFileError(
        f"{what} is nested deeper than {nesting.MAX_DEPTH} levels: the extender cannot carry it"
    )


#: What YAML's safe loader builds that JSON holds as it is (timestamps become strings).
_JSON_SCALARS = (str, bool, float, type(None), datetime.date)
#: What each value JSON cannot hold is called in an error, with the YAML tag that makes it.
_NOT_JSON: dict[type, str] = {bytes: "binary data (!!binary)", set: "a set (!!set)"}


def _not_json(value: Any) -> str | None:
    """Where ``value`` holds something JSON cannot, and what (None: nothing); iterative, so
    that any depth is walked."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, node = stack.pop()
        at = where or "the object"
        if isinstance(node, dict):
            for key, item in node.items():
                if not isinstance(key, str):
                    return f"{at} has a key that is not a string ({_printable(repr(key), 40)})"
                stack.append((f"{where}.{key}" if where else key, item))
        elif isinstance(node, list | tuple):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(node))
        elif isinstance(node, int) and not isinstance(node, bool):
            if not -(2**63) <= node < 2**64:
                return f"{at} is an integer beyond 64 bits"
        elif not isinstance(node, _JSON_SCALARS):
            return f"{at} is {_NOT_JSON.get(type(node), f'a {type(node).__name__}')}"
    return None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _flatten(doc: Any, where: str, problems: list[str]) -> Iterator[dict[str, Any]]:
    if doc is None:
        return
    if not isinstance(doc, dict):
        problems.append(f"{where}: expected an object, got {type(doc).__name__}")
        return
    kind = doc.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for i, item in enumerate(doc["items"]):
            yield from _flatten(item, f"{where} items[{i}]", problems)
        return
    yield doc


def expand(paths: Iterable[str | Path]) -> list[Path]:
    """Files as given; directories contribute their *.yaml, *.yml and *.json files, sorted. A
    directory without any is an error (an empty state is never what was meant)."""
    out: list[Path] = []
    for p in map(Path, paths):
        try:
            if not p.is_dir():
                out.append(p)
                continue
            found = sorted(f for f in p.iterdir() if f.suffix in SUFFIXES and f.is_file())
        except OSError as exc:
            raise StateFileError(f"{p}: {exc.strerror or exc}") from None
        if not found:
            raise StateFileError(f"{p}: no {', '.join('*' + s for s in SUFFIXES)} files in this directory")
        out.extend(found)
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
        try:
            for n, doc in enumerate(_documents(path, max_bytes)):
                for obj in _flatten(doc, f"{path} document {n + 1}", problems):
                    objects.append(_as_json(obj, f"{path}: {_kind(obj)} {_name(obj)} (document {n + 1})"))
        except RecursionError:  # block nesting: what reads the values (str, repr, ==) recurses
            raise StateFileError(f"{path}: nested too deeply to be a Kubernetes object") from None
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
