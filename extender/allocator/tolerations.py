"""Whether a request's tolerations let it use a device with these taints (upstream
allocator: a device tainted NoSchedule or NoExecute is skipped unless every such taint is
tolerated; the 1.35 None effect and unknown effects never block)."""

from __future__ import annotations

from collections.abc import Sequence

from extender.model.dra import Taint, Toleration


def _tolerates(toleration: Toleration, taint: Taint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def taints_tolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> bool:
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue  # None (1.35+) and unknown effects never block allocation
        if not any(_tolerates(t, taint) for t in tolerations):
            return False
    return True
