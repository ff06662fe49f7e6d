"""Failover under load on the real control plane (issue 40, item 2; tests/realcluster/failover.py):
the leader killed, frozen and cut off from kube-apiserver in turn while the real kube-scheduler
schedules a stream of pods, for the standalone deployment (two replicas behind a Service that
follows readiness) and the sidecar one (two kube-scheduler + extender pods, kube-scheduler's
Lease), each with its store fence. ``python -m bench.failover_bench`` runs the issue's 800 pods;
the suite runs ``DRA_FAILOVER_PODS`` (360 by default) at 10 a second."""

from __future__ import annotations

import json
import os

import pytest

from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.failover import FAULTS, SIDECAR, STANDALONE, FailoverResult, failover

PODS = int(os.environ.get("DRA_FAILOVER_PODS", "360"))


def check(r: FailoverResult, pods: int) -> None:
    summary = json.dumps(r.summary(), default=str)
    assert [f.kind for f in r.faults] == list(FAULTS), summary
    for f in r.faults:
        assert f.at_bound < pods, f"the {f.kind} came after the burst: {summary}"
        assert f.leader_after is not None and f.next_bind_after is not None, summary
    assert r.bound == pods, summary
    assert r.violations == [], summary
    assert r.refused_otherwise == [], summary
    assert r.member_problems == [], summary


@pytest.mark.slow
@pytest.mark.parametrize("kind", [STANDALONE, SIDECAR])
def test_killed_frozen_and_cut_off_leaders_lose_no_pod_and_give_no_device_twice(
    cluster: ControlPlane, kind: str
) -> None:
    nodes = -(-PODS // 8)
    check(failover(cluster, kind, nodes=nodes, pods=PODS, rate=10.0), PODS)
