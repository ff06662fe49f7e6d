"""Consumable capacity (DRAConsumableCapacity): how much of a device a request consumes.

Follows upstream's ``CmpRequestOverCapacity``: per capacity of the device, the amount is the
request rounded up by the device's request policy (or the policy default, or the whole value
when nothing is requested); it must satisfy the policy and fit next to what is already taken.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from extender.model.dra import Capacity, RequestPolicy
from extender.quantity import Quantity, quantity_of


def _ceil(value: Fraction) -> int:
    """apimachinery ``Quantity.Value()``: rounded up to an integer."""
    return math.ceil(value)


def consumed(requested: Quantity | None, capacity: Capacity) -> Quantity:
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
        added = _ceil(requested.value) - _ceil(low.value)
        stride = _ceil(step.value)
        n = added // stride + (1 if added % stride else 0)
        return quantity_of(_ceil(low.value) + stride * n, binary=True)
    if policy.valid_values is not None:
        for valid in policy.valid_values:
            if requested.value <= valid.value:
                return valid
        return requested
    return requested


def violates(amount: Quantity, policy: RequestPolicy | None) -> bool:
    if policy is None:
        return False
    if policy.default is not None and amount.value == policy.default.value:
        return False
    if policy.valid_range is not None:
        low, high, step = policy.valid_range
        if high is not None and amount.value > high.value:
            return True
        if step is not None and low is not None:
            return (_ceil(amount.value) - _ceil(low.value)) % _ceil(step.value) != 0
        return False
    if policy.valid_values:
        return all(amount.value != v.value for v in policy.valid_values)
    return False


def fit(
    capacity: Mapping[str, Capacity],
    requests: Mapping[str, Quantity] | None,
    current: Mapping[str, Fraction],
    allocating: Mapping[str, Fraction],
) -> dict[str, Quantity] | None:
    """The consumption of every capacity of the device, or None when the request does not fit."""
    if requests and any(name not in capacity for name in requests):
        return None
    out: dict[str, Quantity] = {}
    for name, cap in capacity.items():
        amount = consumed(requests.get(name) if requests else None, cap)
        if violates(amount, cap.request_policy):
            return None
        total = current.get(name, Fraction(0)) + amount.value + allocating.get(name, Fraction(0))
        if total > cap.value.value:
            return None
        out[name] = amount
    return out
