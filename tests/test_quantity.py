"""How quantities are written back: apimachinery's ``Quantity.String()`` (kept text or canonical)."""

from __future__ import annotations

import pytest

from extender.quantity import parse_quantity, quantity_of

#: (input, written back): ParseQuantity keeps the text when it is already canonical
#: (scale % 3 == 0, no trailing "000", no leading zero; binary: value & 7 != 0), else
#: CanonicalizeBytes in the quantity's format (DecimalSI, DecimalExponent, BinarySI).
WRITTEN = [
    ("12e3", "12e3"),  # DecimalExponent, kept
    ("12E3", "12E3"),  # kept verbatim, capital E included
    ("1000e-3", "1"),  # DecimalExponent, canonical: exponent 0 has no suffix
    ("12000", "12k"),  # DecimalSI, trailing "000": canonical
    ("1500", "1500"),
    ("0.5", "500m"),  # leading zero: canonical
    ("100m", "100m"),
    ("1Gi", "1Gi"),
    ("1024Mi", "1Gi"),  # 1024 & 7 == 0: canonical
    ("1.5Gi", "1536Mi"),  # inf.Dec path: canonical BinarySI
    ("0.5Ki", "512"),  # BinarySI below 1024 is written as DecimalSI
    ("0", "0"),
]


@pytest.mark.parametrize(("text", "written"), WRITTEN, ids=[w[0] for w in WRITTEN])
def test_quantities_are_written_back_as_apimachinery_does(text: str, written: str) -> None:
    assert parse_quantity(text).canonical() == written


@pytest.mark.parametrize(
    ("value", "binary", "written"),
    [(1000, True, "1k"), (2048, True, "2Ki"), (1500, True, "1500"), (1000, False, "1k"), (5, True, "5")],
)
def test_computed_quantities_are_canonical_in_their_format(value: int, binary: bool, written: str) -> None:
    """resource.NewQuantity(v, BinarySI): below 1024 the canonical form is DecimalSI."""
    assert quantity_of(value, binary).canonical() == written
