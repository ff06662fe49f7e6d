"""``metav1.Time``: how the API serializes a point in time (RFC 3339, whole seconds, UTC), and
reading it back."""

from __future__ import annotations

import datetime as _dt
import functools
import math


def rfc3339(seconds: float) -> str:
    """Seconds since the epoch as metav1.Time serializes it (RFC 3339, whole seconds, UTC)."""
    return _rfc3339_second(math.floor(seconds))


@functools.lru_cache(maxsize=4)
def _rfc3339_second(second: int) -> str:
    """Formatted once per second: every bind stamps its allocations with the time (0.5% of the
    extender's CPU at 500 x 8 went to formatting it, issue 54)."""
    return _dt.datetime.fromtimestamp(second, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> float | None:
    """An RFC 3339 ``metav1.Time`` as seconds since the epoch (None when it does not parse)."""
    try:
        stamp = _dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=_dt.UTC)
    return stamp.timestamp()
