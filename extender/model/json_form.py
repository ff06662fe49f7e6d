"""Raw API content in its JSON form: a digest to tell unchanged content cheaply, and the compact
bytes a cache keeps instead of the dict."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson


def content_digest(raw: Any) -> bytes | None:
    """A 128-bit digest of raw API content, as exact as its JSON form.

    orjson keeps key order and tells ``1``, ``1.0`` and ``true`` apart, so equal digests mean
    equal content, up to a 2**-128 chance of a collision. None when the content has no JSON
    form (it then never counts as unchanged). Much cheaper than parsing a device (about 1 µs
    against 30 µs for a GPU with a dozen attributes), and 16 bytes to keep instead of the raw
    dict (about 3 KB).
    """
    try:
        return hashlib.blake2b(orjson.dumps(raw), digest_size=16).digest()
    except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
        return None


def as_json(raw: Any) -> bytes:
    """Raw content as compact JSON; content outside orjson's range (integers past 64 bits, a
    state file's YAML dates) through the standard library, dates as text."""
    try:
        return orjson.dumps(raw)
    except (TypeError, ValueError):
        return json.dumps(raw, default=str, separators=(",", ":")).encode()
