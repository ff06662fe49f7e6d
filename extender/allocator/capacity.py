"""Consumable capacity (DRAConsumableCapacity): how much of a device a request consumes.

Follows upstream's ``CmpRequestOverCapacity``: per capacity of the device, the amount is the
request rounded up by the device's request policy (or the policy default, or the whole value
when nothing is requested); it must satisfy the policy and fit next to what is already taken.

A ``validRange`` is applied in whole units (``Quantity.Value()``, rounded up), unless
DRAFractionalCapacityRange is on and one of its min, max and step is fractional: then in
milli-units (1.37 structured/internal/incubating/consumable_capacity.go ``useMilli``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from extender.model.dra import Capacity, RequestPolicy
from extender.quantity import BINARY_SI, INT64_MAX, Quantity, quantity_of

#: resource.MaxMilliValue: the largest value whose milli-units fit an int64.
MAX_MILLI_VALUE = INT64_MAX // 1000


def _ceil(value: Fraction) -> int:
    """apimachinery ``Quantity.Value()``: rounded up to an integer."""
    return math.ceil(value)


def _milli(value: Fraction) -> int:
    """apimachinery ``Quantity.MilliValue()``: milli-units, rounded up."""
    return math.ceil(value * 1000)


RangeBounds = tuple[Quantity | None, Quantity | None, Quantity | None]


def use_milli(valid_range: RangeBounds, fractional: bool) -> bool:
    """``useMilli``: milli-unit arithmetic for this range (DRAFractionalCapacityRange on, one of
    min, max and step fractional, none too large for milli-units, a step of at least 1m)."""
    if not fractional:
        return False
    bounds = [q for q in valid_range if q is not None]
    if any(_ceil(q.value) > MAX_MILLI_VALUE for q in bounds):
        return False
    if not any(_milli(q.value) % 1000 for q in bounds):
        return False
    step = valid_range[2]
    return step is None or _milli(step.value) >= 1


def consumed(
    requested: Quantity | None, capacity: Capacity, fractional: bool = False, step_format: bool = True
) -> Quantity:
    """``step_format`` (1.37+): a rounded-up amount is written in the step's format (1.36: BinarySI)."""
    policy = capacity.request_policy
    if requested is None:
        if policy is not None and policy.default is not None:
            return policy.default
        return capacity.value
    if policy is None:
        return requested
    if policy.valid_range is not None and policy.valid_range[0] is not None:
        low, _high, step = policy.valid_range
        assert low is not None
        if requested.value < low.value:
            return low
        if step is None:
            return requested
        if use_milli(policy.valid_range, fractional):
            base, stride = _milli(low.value), _milli(step.value)
            n = -(-(_milli(requested.value) - base) // stride)
            # 1.37: the result in the step's format (DecimalSI for what is not a whole number).
            return quantity_of(Fraction(base + stride * n, 1000), binary=step.format == BINARY_SI)
        added = _ceil(requested.value) - _ceil(low.value)
        stride = _ceil(step.value)
        n = added // stride + (1 if added % stride else 0)
        return quantity_of(_ceil(low.value) + stride * n, binary=not step_format or step.format == BINARY_SI)
    if policy.valid_values is not None:
        for valid in policy.valid_values:
            if requested.value <= valid.value:
                return valid
        return requested
    return requested


def violates(amount: Quantity, policy: RequestPolicy | None, fractional: bool = False) -> bool:
    if policy is None:
        return False
    if policy.default is not None and amount.value == policy.default.value:
        return False
    if policy.valid_range is not None:
        low, high, step = policy.valid_range
        if high is not None and amount.value > high.value:
            return True
        if step is not None and low is not None:
            unit = _milli if use_milli(policy.valid_range, fractional) else _ceil
            return (unit(amount.value) - unit(low.value)) % unit(step.value) != 0
        return False
    if policy.valid_values:
        return all(amount.value != v.value for v in policy.valid_values)
    return False


def fit(
    capacity: Mapping[str, Capacity],
    requests: Mapping[str, Quantity] | None,
    current: Mapping[str, Fraction],
    allocating: Mapping[str, Fraction],
    fractional: bool = False,
    step_format: bool = True,
) -> dict[str, Quantity] | None:
    """The consumption of every capacity of the device, or None when the request does not fit
    (``fractional``: DRAFractionalCapacityRange)."""
    if requests and any(name not in capacity for name in requests):
        return None
    out: dict[str, Quantity] = {}
    for name, cap in capacity.items():
        amount = consumed(requests.get(name) if requests else None, cap, fractional, step_format)
        if violates(amount, cap.request_policy, fractional):
            return None
        total = current.get(name, Fraction(0)) + amount.value + allocating.get(name, Fraction(0))
        if total > cap.value.value:
            return None
        out[name] = amount
    return out
