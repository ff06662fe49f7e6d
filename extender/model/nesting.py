"""Objects nested deeper than the extender carries.

kube-apiserver accepts any JSON in a claim's (or a template's, or a DeviceClass's) opaque
parameters, up to 10 KiB: about 1,700 levels of ``{"a":``. orjson decodes 1,024 levels and
encodes 254; Python's own json and ``==`` recurse. Such an object is *unreadable*: a claim is
kept as a broken claim (its pods get the reason, as for any claim that cannot be read), a
template or class is skipped with a problem, and nothing else is affected. In particular one
such object in a watch or a list must not stop the informer: :func:`loads` decodes a document
orjson refuses by cutting the subtrees below :data:`MAX_DEPTH` and marking the objects that held
them (:data:`UNREADABLE`).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

#: Deepest nesting an object may have: what orjson encodes (a 255th level raises).
MAX_DEPTH = 254
#: Deepest nesting an object read may have: what it carries is copied up to two levels deeper
#: when allocated (a class's config into the claim's allocation), and must still encode.
READABLE_DEPTH = MAX_DEPTH - 2
#: Key set on an object that :func:`loads` cut short; its value says why.
UNREADABLE = "\x00unreadable"
#: What a cut subtree becomes.
CUT = "\x00nested too deeply"
REASON = (
    f"nested deeper than {READABLE_DEPTH} levels (its opaque parameters, say): the extender cannot carry it"
)
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def unreadable(obj: dict[str, Any]) -> str | None:
    """Why ``obj`` cannot be carried (None: it can): cut by :func:`loads`, or too deep to encode
    (checked by encoding it: a few microseconds, where walking it in Python costs ten)."""
    if UNREADABLE in obj:
        return str(obj[UNREADABLE])
    try:
        orjson.dumps([[obj]])  # two levels deeper: READABLE_DEPTH
    except TypeError:  # decoded JSON holds nothing else orjson refuses
        return REASON
    return None


def loads(data: bytes | str) -> Any:
    """``orjson.loads``; a document nested too deeply for it is decoded with the subtrees below
    :data:`MAX_DEPTH` replaced by :data:`CUT`, and every object that held one (the items of a
    list, the object of a watch event, or the document) marked :data:`UNREADABLE`. Whether the
    depth was the problem is decided by cutting, never by orjson's wording of its error."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        cut = _cut(raw)
        if cut == raw:  # nothing nested too deeply: the document is malformed
            raise
    doc = orjson.loads(cut)
    _mark(doc)
    return doc


def _cut(data: bytes) -> bytes:
    """``data`` with every array or object that starts deeper than MAX_DEPTH replaced by CUT."""
    replacement = orjson.dumps(CUT)
    pieces: list[bytes] = []
    kept_from = 0
    depth = 0
    cut_at: int | None = None  # where the subtree being cut starts
    for match in _TOKENS.finditer(data):
        token = match.group()
        if token[0] == 0x22:  # a string: its brackets do not count
            continue
        if token in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH and cut_at is None:
                cut_at = match.start()
        else:
            depth -= 1
            if cut_at is not None and depth == MAX_DEPTH:
                pieces += (data[kept_from:cut_at], replacement)
                kept_from, cut_at = match.end(), None
    pieces.append(data[kept_from:])
    return b"".join(pieces)


def _holds_cut(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if node == CUT:
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _mark(doc: Any) -> None:
    if not isinstance(doc, dict):
        return
    if isinstance(doc.get("items"), list):
        objects = doc["items"]
    elif isinstance(doc.get("object"), dict):
        objects = [doc["object"]]
    else:
        objects = [doc]
    for obj in objects:
        if isinstance(obj, dict) and _holds_cut(obj):
            obj[UNREADABLE] = REASON


def without_free_form(claim: dict[str, Any]) -> dict[str, Any]:
    """A ResourceClaim without the parts that may nest without bound (opaque parameters in its
    spec and allocation, drivers' device status data, managedFields) and without the
    :data:`UNREADABLE` mark: what still says which devices the claim holds, and for whom."""
    out = {k: v for k, v in claim.items() if k != UNREADABLE}
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = {k: v for k, v in out["metadata"].items() if k != "managedFields"}
    spec = out.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("devices"), dict):
        out["spec"] = {**spec, "devices": {**spec["devices"], "config": []}}
    status = out.get("status")
    if isinstance(status, dict):
        status = dict(status)
        allocation = status.get("allocation")
        if isinstance(allocation, dict) and isinstance(allocation.get("devices"), dict):
            status["allocation"] = {**allocation, "devices": {**allocation["devices"], "config": []}}
        if isinstance(status.get("devices"), list):
            status["devices"] = [
                {k: v for k, v in d.items() if k != "data"} if isinstance(d, dict) else d
                for d in status["devices"]
            ]
        out["status"] = status
    return out
