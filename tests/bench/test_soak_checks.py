"""The soak's checks (tests/realcluster/soak.py ``SoakResult``, bench/soak_bench.py ``problems``)
on synthetic runs, no cluster started: a steady leak of a few entries (or MiB) a minute is
flagged, under the churn of the soak's cycles as at rest; flat, churning, noisy and warming-up
series are not; a short run judges every check but growth."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from bench.soak_bench import RSS_GROWTH_MIB, problems
from tests.realcluster.soak import SAMPLE_EVERY, Rest, Sample, SoakResult

#: Seconds of one of the soak's cycles (30 minutes ran 125): a map fills while pods are bound,
#: and is empty at the cycle's rest.
CYCLE = 14.0

Series = Callable[[float], float]


def soak_run(minutes: float, binds: Series = lambda t: 0.0, rss: Series = lambda t: 120.0) -> SoakResult:
    """A run of ``minutes``, sampled every 5 s as the soak samples: the ``binds`` map's entries
    and the RSS (MiB) at each second of the run."""
    seconds = minutes * 60
    times = [i * SAMPLE_EVERY for i in range(int(seconds // SAMPLE_EVERY) + 1)]
    samples = [Sample(t, round(rss(t), 1), {"binds": round(binds(t)), "placing": 0}) for t in times]
    return SoakResult(seconds=seconds, cycles=int(seconds // CYCLE), pods=0, samples=samples)


def churn(t: float) -> float:
    """40 entries while a cycle's pods are bound, none at its rest."""
    return 40.0 if t % CYCLE < 9 else 0.0


def leak(per_minute: float, under: Series = lambda t: 0.0) -> Series:
    return lambda t: per_minute * t / 60 + under(t)


def noisy(low: float, high: float, seed: int = 50) -> Series:
    """Uniform noise between ``low`` and ``high``, the same for a seed (times are asked in order)."""
    rng = random.Random(seed)
    return lambda t: rng.uniform(low, high)


def spike(at: float, height: float, under: Series) -> Series:
    """``under``, with one sample of ``height`` at ``at`` (a burst of pods in the last third)."""
    return lambda t: height if t == at else under(t)


def warming(to: float, over: float, start: float = 0.0, under: Series = lambda t: 0.0) -> Series:
    """From ``start`` to ``to`` over the first ``over`` seconds, then flat (a memory filling)."""
    return lambda t: start + (to - start) * min(t, over) / over + under(t)


#: name -> (the binds map's entries over 30 minutes, flagged as still growing?)
ENTRIES: dict[str, tuple[Series, bool]] = {
    "empty throughout": (lambda t: 0.0, False),
    "the cycles' churn, flat": (churn, False),
    "noisy but flat": (noisy(0, 40), False),
    "noisy but flat, one spike in the last third": (spike(1500.0, 200.0, noisy(0, 40)), False),
    "filled during warm-up (ten minutes of preemptions), then flat": (warming(168, 600, under=churn), False),
    "a leak of 3 entries a minute at rest": (leak(3), True),
    "a leak of 3 entries a minute under the churn": (leak(3, under=churn), True),
    "a leak of 1 entry a minute under noise": (leak(1, under=noisy(0, 40)), True),
}


@pytest.mark.parametrize("case", list(ENTRIES))
def test_a_map_still_growing_after_warm_up_is_flagged(case: str) -> None:
    binds, grown = ENTRIES[case]
    r = soak_run(30, binds=binds)
    assert r.judges_growth()
    assert ("binds" in r.grown()) is grown, r.grown()
    assert "placing" not in r.grown()
    assert any(p.startswith("in-flight maps still growing") for p in problems(r)) is grown


#: name -> (RSS in MiB over 30 minutes, flagged as growing past RSS_GROWTH_MIB after warm-up?)
RSS: dict[str, tuple[Series, bool]] = {
    "flat": (lambda t: 120.0, False),
    "noisy but flat (3 MiB either way)": (noisy(117, 123), False),
    "a sawtooth of 24 MiB every 100 s (the heap grows, a collection returns it), flat": (
        lambda t: 120 + (t % 100) * 0.24,
        False,
    ),
    "flat, one spike at the very end (a snapshot being sent)": (spike(1800.0, 150.0, lambda t: 120.0), False),
    "caches filling during warm-up, then flat": (warming(130, 600, start=100, under=noisy(-2, 2)), False),
    "a leak of 2 MiB a minute": (leak(2, under=lambda t: 120), True),
    "a leak of 1 MiB a minute under noise": (leak(1, under=noisy(115, 125)), True),
}


@pytest.mark.parametrize("case", list(RSS))
def test_rss_growing_after_warm_up_is_flagged(case: str) -> None:
    rss, grown = RSS[case]
    r = soak_run(30, rss=rss)
    assert (r.rss_growth_mib() > RSS_GROWTH_MIB) is grown, r.rss_growth_mib()
    assert any(p.startswith("RSS grew") for p in problems(r)) is grown


#: name -> (minutes, growth judged?): warm-up (a third) must outlast a preemption's 10 minutes.
LENGTHS: dict[str, tuple[float, bool]] = {
    "the suite's 40 s": (40 / 60, False),
    "29 minutes": (29, False),
    "30 minutes": (30, True),
    "an hour": (60, True),
}


@pytest.mark.parametrize("case", list(LENGTHS))
def test_growth_is_judged_once_warm_up_outlasts_every_memory(case: str) -> None:
    minutes, judged = LENGTHS[case]
    assert soak_run(minutes).judges_growth() is judged


def test_thirty_minutes_with_too_few_samples_is_not_judged() -> None:
    r = soak_run(30)
    r.samples = r.samples[:: len(r.samples) // 10]  # the sampler starved: a sample every 3 min
    assert not r.judges_growth()


def test_a_short_run_judges_every_check_but_growth() -> None:
    r = soak_run(40 / 60, binds=leak(60), rss=leak(60, under=lambda t: 100))  # all warm-up
    assert problems(r) == []
    grown = problems(r, judge_growth=True)  # what a long run would say of the same series
    assert [p.split(" ")[0] for p in grown] == ["RSS", "in-flight"]
    r.rests = [
        Rest(
            cycle=0,
            at=30.0,
            held_for_unbound=1,
            not_empty={"binds": 2},
            violations=["a device in two claims"],
        )
    ]
    r.samples[-1].entries["placing"] = 10_000
    r.stuck_pods, r.crashed = 1, "the extender exited"
    r.failed_binds_by_reason = {"device-taken": 1, "pod-deleted": 3}
    assert [p.split(" ")[0] for p in problems(r)] == [
        "in-flight",  # over their bounds
        "claims",
        "not_empty_at_rest:",
        "violations:",
        "crashed:",
        "stuck",
        "binds",
    ]
