"""The in-tree DynamicResources plugin and the extender, each under the real kube-scheduler, on
the same generated workloads: the same pods schedulable, every allocation valid, no device twice.

Three seeds by default (CI); ``DRA_DIFFERENTIAL_SEEDS=20`` runs twenty.
"""

from __future__ import annotations

import os

import pytest

from tests.realcluster.components import extender, scheduler, scheduler_config
from tests.realcluster.conftest import empty
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.differential import Outcome, allocation_problems, create, wait_outcome
from tests.realcluster.generator import generate

SEEDS = range(int(os.environ.get("DRA_DIFFERENTIAL_SEEDS", "3")))


def run(plane: ControlPlane, seed: int, *, with_extender: bool) -> Outcome:
    workload = generate(seed, minor=plane.release.minor)
    kubeconfig = plane.extender_kubeconfig()
    if with_extender:
        with extender(plane) as ext, scheduler(plane, scheduler_config(kubeconfig, extender_url=ext.url)):
            create(plane, workload)
            return wait_outcome(plane.api, workload)
    with scheduler(plane, scheduler_config(kubeconfig, extender_url=None)):
        create(plane, workload)
        return wait_outcome(plane.api, workload)


@pytest.mark.parametrize("seed", SEEDS)
def test_in_tree_and_extender_schedule_the_same_pods_validly(cluster: ControlPlane, seed: int) -> None:
    workload = generate(seed, minor=cluster.release.minor)
    in_tree = run(cluster, seed, with_extender=False)
    empty(cluster.api)
    audit_from = len(cluster.audit_events())
    ours = run(cluster, seed, with_extender=True)
    assert allocation_problems(workload, in_tree) == [], "the in-tree run (or the checker) is wrong"
    assert allocation_problems(workload, ours) == []
    assert set(in_tree.placed) == workload.fittable(), (
        "the in-tree plugin disagrees with the workload's design"
    )
    assert set(ours.placed) == set(in_tree.placed)
    assert ours.unschedulable == in_tree.unschedulable
    assert cluster.refused_writes(audit_from) == []
