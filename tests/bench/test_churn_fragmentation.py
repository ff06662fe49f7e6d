"""bench/churn_bench.py --fragmentation on a tiny cluster: the workload is the seed's alone, every
arm runs it, and with plain requests the tie-break places every pod where the arm without it did
(under binpack the nodes tied at the best score have the same free devices before and after the
pod, so they strand alike: the tie-break has nothing to choose between)."""

from __future__ import annotations

import asyncio

from bench.churn_bench import ARMS, fragmentation, workload


def test_the_workload_is_the_seeds() -> None:
    assert workload(7, 4, 50, 0.9, 10.0) == workload(7, 4, 50, 0.9, 10.0)
    assert workload(7, 4, 50, 0.9, 10.0) != workload(8, 4, 50, 0.9, 10.0)
    shares = workload(7, 4, 400, 0.9, 10.0, first_available=1.0)
    assert {a.gpus for a in shares if a.fallback} == {2, 4}


def test_plain_requests_the_tie_break_places_as_without_it() -> None:
    rows = asyncio.run(fragmentation([3], nodes=4, ticks=60, warmup=10, load=0.95, lifetime=10.0))
    assert [r["arm"] for r in rows] == [name for name, _, _ in ARMS]
    off, tie_break, _ = rows
    assert off["placements_unlike_off"] == tie_break["placements_unlike_off"] == 0
    assert {k: v for k, v in tie_break.items() if k != "arm"} == {k: v for k, v in off.items() if k != "arm"}
    assert off["pods_8"] > 0 and off["mean_used"] > 0.5
