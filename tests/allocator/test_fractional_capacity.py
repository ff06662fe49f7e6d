"""DRAFractionalCapacityRange (1.37, beta, off by default): a validRange with a fractional min,
max or step is applied in milli-units; otherwise, and with the gate off, in whole units.

From 1.37's structured/internal/incubating/consumable_capacity.go (``useMilli``,
``roundUpRange``, ``violateValidRange``; kubernetes#140161) and the cases of its
TestConsumableCapacity (use-milli, violate-capacity-sharing, calculate-consumed-capacity) that
hold for the release (a later variant drops the "one bound is fractional" condition; its cases
that depend on that are not here).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from extender.allocator import capacity as cap
from extender.model.dra import Capacity, RequestPolicy
from extender.quantity import parse_quantity
from tests.allocator.harness import allocate
from tests.builders import claim, device, device_class, exact, resource_slice

ON = "DRAConsumableCapacity=true,DRAFractionalCapacityRange=true"
OFF = "DRAConsumableCapacity=true,DRAFractionalCapacityRange=false"


def bounds(low: str | None, high: str | None, step: str | None) -> cap.RangeBounds:
    return (
        parse_quantity(low) if low else None,
        parse_quantity(high) if high else None,
        parse_quantity(step) if step else None,
    )


#: name -> (min, max, step, gate, milli arithmetic?)
USE_MILLI = {
    "fractional disabled": ("200m", "1", "100m", False, False),
    "all fractional, fits in milli": ("200m", "1", "100m", True, True),
    "all integer: whole units (1.37 needs one fractional bound)": ("1", "10", "2", True, False),
    "only the max fractional": ("1", "2500m", None, True, True),
    "too large for milli-units": ("100m", str(2**62), "100m", True, False),
}


@pytest.mark.parametrize("row", USE_MILLI.values(), ids=USE_MILLI.keys())
def test_use_milli(row: tuple[str, str, str | None, bool, bool]) -> None:
    low, high, step, gate, expected = row
    assert cap.use_milli(bounds(low, high, step), gate) is expected


def policy(low: str, high: str, step: str, default: str | None = None) -> RequestPolicy:
    return RequestPolicy(
        default=parse_quantity(default) if default else None,
        valid_values=None,
        valid_range=bounds(low, high, step),
    )


#: name -> (requested, gate, consumed, violates)
ROUND_UP = {
    "fractional step round up (0.25 to 0.3)": ("250m", True, "300m", False),
    "fractional step aligned (0.3 = min+1*step)": ("300m", True, "300m", False),
    "below min: min": ("100m", True, "200m", False),
    "gate off: whole units (0.25 to 1)": ("250m", False, "1", False),
    "above max": ("1100m", True, "1100m", True),
}


@pytest.mark.parametrize("row", ROUND_UP.values(), ids=ROUND_UP.keys())
def test_round_up_and_violation(row: tuple[str, bool, str, bool]) -> None:
    requested, gate, want, violates = row
    c = Capacity(parse_quantity("1"), policy("200m", "1", "100m"))
    amount = cap.consumed(parse_quantity(requested), c, gate)
    assert amount.value == parse_quantity(want).value and amount.canonical() == want
    assert cap.violates(amount, c.request_policy, gate) is violates


def test_a_fractional_amount_off_the_step_violates_only_in_milli_units() -> None:
    """(0.25 - 0.2) is not a multiple of 0.1 in milli-units; in whole units all three are 1."""
    p = policy("200m", "1", "100m")
    assert cap.violates(parse_quantity("250m"), p, True)
    assert not cap.violates(parse_quantity("250m"), p, False)


def shared_device(value: str = "1") -> dict[str, object]:
    return device(
        "link",
        allowMultipleAllocations=True,
        capacity={
            "bandwidth": {
                "value": value,
                "requestPolicy": {
                    "default": "200m",
                    "validRange": {"min": "200m", "max": "1", "step": "100m"},
                },
            }
        },
    )


def claims(n: int) -> list[dict[str, object]]:
    return [
        claim(f"c{i}", requests=[exact("r", capacity={"requests": {"bandwidth": "250m"}})]) for i in range(n)
    ]


def objects(n: int) -> list[dict[str, object]]:
    return [device_class(), resource_slice("s", [shared_device()]), *claims(n)]


def test_with_the_gate_three_quarter_shares_of_0_3_fit_a_device_of_1() -> None:
    outcome = allocate(objects(3), [f"c{i}" for i in range(3)], gates=ON)
    assert outcome.allocations is not None, outcome
    consumed = [a["devices"]["results"][0]["consumedCapacity"]["bandwidth"] for a in outcome.allocations]
    assert consumed == ["300m", "300m", "300m"]
    assert sum((parse_quantity(c).value for c in consumed), Fraction(0)) == Fraction(9, 10)
    assert allocate(objects(4), [f"c{i}" for i in range(4)], gates=ON).unsatisfiable  # 1.2 > 1


def test_without_the_gate_each_share_takes_a_whole_unit() -> None:
    one = allocate(objects(1), ["c0"], gates=OFF)
    assert one.allocations is not None and one.results()[0]["consumedCapacity"]["bandwidth"] == "1"
    assert allocate(objects(2), ["c0", "c1"], gates=OFF).unsatisfiable


def test_whole_unit_ranges_are_the_same_either_way() -> None:
    """min 1, step 2: nothing fractional, so the gate changes nothing (request 2 -> 3)."""
    c = Capacity(parse_quantity("8"), policy("1", "7", "2"))
    for gate in (True, False):
        assert cap.consumed(parse_quantity("2"), c, gate).value == 3


def test_a_rounded_up_whole_amount_is_written_in_the_step_s_format_from_1_37() -> None:
    """1.37 roundUpRange: NewQuantity(min + step*n, step.Format); 1.36: BinarySI. 1500M with a
    1G step is 2G (1.37) or 1953125Ki (1.36): the same amount, written differently."""
    c = Capacity(parse_quantity("8G"), policy("1G", "8G", "1G"))
    assert cap.consumed(parse_quantity("1500M"), c, False, step_format=True).canonical() == "2G"
    assert cap.consumed(parse_quantity("1500M"), c, False, step_format=False).canonical() == "1953125Ki"


def test_a_milli_range_whose_result_is_whole() -> None:
    """min 1, max 2500m, step 500m: 1200m rounds to 1500m; 2 stays 2 (written "2")."""
    c = Capacity(parse_quantity("4"), policy("1", "2500m", "500m"))
    assert cap.consumed(parse_quantity("1200m"), c, True).canonical() == "1500m"
    assert cap.consumed(parse_quantity("2"), c, True).canonical() == "2"
