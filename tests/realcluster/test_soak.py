"""The soak's short version (issue 40, item 4): a few cycles of template-claim churn with
preemption and deletions mid-scheduling (tests/realcluster/soak.py) with the real
kube-controller-manager; ``python -m bench.soak_bench`` runs it for 30 minutes, long enough to
judge growth (RSS, in-flight maps) too. ``DRA_SOAK_SECONDS`` sets how long this one runs (40 s by
default); at 1800 or more it judges growth as well."""

from __future__ import annotations

import json
import os

import pytest

from bench.soak_bench import problems
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.soak import EMPTY_AT_REST, soak

SECONDS = float(os.environ.get("DRA_SOAK_SECONDS", "40"))


@pytest.mark.slow
def test_a_short_soak_leaves_nothing_in_flight_nothing_held_and_the_store_sound(
    cluster: ControlPlane,
) -> None:
    if cluster.controller_manager is None:
        pytest.skip("needs kube-controller-manager (its resourceclaim controller makes the template claims)")
    r = soak(cluster, SECONDS)
    summary = json.dumps(r.summary(), default=str)
    assert r.cycles >= 2 and r.pods >= 2 * 84, summary
    # Every check a run this long can judge (growth only from 30 minutes: SoakResult.judges_growth).
    assert problems(r) == [], summary
    # The at-rest checks looked at every map they name, and the preemptions happened.
    assert all(set(EMPTY_AT_REST) <= set(s.entries) for s in r.samples), summary
    assert r.peaks()["preemptions"] >= 4, summary
