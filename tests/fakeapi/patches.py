"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the strategic-merge subset we need."""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    pass


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    for part in parts[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc, parts[-1]


def json_patch(target: Any, operations: list[dict[str, Any]]) -> Any:
    doc = copy.deepcopy(target)
    for op in operations:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        try:
            parent, last = _parent(doc, parts)
            if kind == "test":
                current = parent[int(last)] if isinstance(parent, list) else parent[last]
                if current != op.get("value"):
                    raise PatchError(f"test failed at {op['path']}")
            elif kind in ("add", "replace"):
                if isinstance(parent, list):
                    index = len(parent) if last == "-" else int(last)
                    if kind == "add":
                        parent.insert(index, copy.deepcopy(op["value"]))
                    else:
                        parent[index] = copy.deepcopy(op["value"])
                else:
                    if kind == "replace" and last not in parent:
                        raise PatchError(f"replace of missing {op['path']}")
                    parent[last] = copy.deepcopy(op["value"])
            elif kind == "remove":
                if isinstance(parent, list):
                    del parent[int(last)]
                else:
                    del parent[last]
            else:
                raise PatchError(f"unsupported op {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            if isinstance(exc, PatchError):
                raise
            raise PatchError(f"cannot apply {op}: {exc}") from None
    return doc


#: Lists merged by key under strategic merge patch (patchMergeKey), per resource.
MERGE_KEYS = {("resourceclaims", "reservedFor"): "uid"}


def strategic_merge_patch(target: dict[str, Any], patch: dict[str, Any], resource: str) -> dict[str, Any]:
    """Merge patch, except for the keyed lists above (``$patch: delete`` entries remove by key)."""

    def merge(current: Any, change: Any, path: tuple[str, ...]) -> Any:
        if isinstance(change, list) and path and (resource, path[-1]) in MERGE_KEYS:
            key = MERGE_KEYS[(resource, path[-1])]
            items = copy.deepcopy(current) if isinstance(current, list) else []
            for entry in change:
                if entry.get("$patch") == "delete":
                    items = [i for i in items if i.get(key) != entry.get(key)]
                    continue
                for i, item in enumerate(items):
                    if item.get(key) == entry.get(key):
                        items[i] = merge(item, entry, path)
                        break
                else:
                    items.append(copy.deepcopy(entry))
            return items
        if not isinstance(change, dict):
            return copy.deepcopy(change)
        out = copy.deepcopy(current) if isinstance(current, dict) else {}
        for k, v in change.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge(out.get(k), v, (*path, k))
        return out

    result: dict[str, Any] = merge(target, patch, ())
    status = result.get("status")
    if isinstance(status, dict) and status.get("reservedFor") == []:
        del status["reservedFor"]
    return result
