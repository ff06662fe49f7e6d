"""Claim hints as the real kube-scheduler shows them (issue 53): its FailedScheduling message for
a pod whose claim names an attribute the driver does not publish carries the extender's hint,
whether the extender answered with per-node reasons (the selector guards with ``has()``: no
device matches) or with an error (an unguarded selector: a CEL runtime error); and the pod stays
unbound, as without the hint.

node-1 and node-2 publish GPUs with ``model`` (tests/realcluster/workload.py); the claims misspell
it ``modle``."""

from __future__ import annotations

import pytest

from tests.realcluster.components import extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.test_make_room_hint import messages
from tests.realcluster.workload import (
    GPU_DRIVER,
    bound,
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
    store_violations,
    wait_unschedulable,
)

READ = f'device.attributes["{GPU_DRIVER}"].modle'
HINT = (
    "hint: claim default/{pod}: request gpu: the request's selector reads attribute "
    f"{GPU_DRIVER}/modle, which no device of driver {GPU_DRIVER} publishes; did you mean {GPU_DRIVER}/model?"
)

#: (case, selector, what else kube-scheduler's message says).
CASES = [
    (
        "guarded: every node's reason carries the hint",
        f'has({READ}) && {READ} == "a100"',
        "2 cannot allocate",
    ),
    (
        "unguarded: the CEL runtime error carries it",
        f'{READ} == "a100"',
        "CEL runtime error: no such key: modle",
    ),
]


@pytest.mark.parametrize(("selector", "also"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_failed_scheduling_message_carries_the_claim_hint(
    cluster: ControlPlane, selector: str, also: str
) -> None:
    api = cluster.api
    for node in ("node-1", "node-2"):
        cluster.add_node(node)
        api.create(gpu_slice(node, gpus=2))
    api.create(gpu_class())
    with (
        extender(cluster) as ext,
        scheduler(cluster, scheduler_config(cluster.extender_kubeconfig(), extender_url=ext.url)),
    ):
        api.create(one_gpu_claim("typo", selectors=[selector]))
        api.create(pod_with_claims("trainer", ["typo"]))
        wait_unschedulable(api, "trainer")
        [said, *_] = messages(cluster, "trainer")
        assert HINT.format(pod="typo") in said and also in said, said
        assert "trainer" not in bound(api)
    assert store_violations(api) == []
