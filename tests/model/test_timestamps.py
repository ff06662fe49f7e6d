"""``metav1.Time`` written and read (extender/model/timestamps.py)."""

from __future__ import annotations

import math

import pytest

from extender.model.timestamps import parse_timestamp, rfc3339

RFC3339 = {
    "the epoch": (0.0, "1970-01-01T00:00:00Z"),
    "whole seconds, the fraction dropped": (1795996544.999, "2026-11-29T23:55:44Z"),
    "the next second": (1795996545.0, "2026-11-29T23:55:45Z"),
    "before the epoch": (-0.5, "1969-12-31T23:59:59Z"),
}


@pytest.mark.parametrize(("seconds", "text"), RFC3339.values(), ids=RFC3339.keys())
def test_rfc3339_is_metav1_time(seconds: float, text: str) -> None:
    assert rfc3339(seconds) == text
    assert parse_timestamp(text) == float(math.floor(seconds))
