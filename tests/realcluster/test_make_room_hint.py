"""Filter's make-room hint line as the real kube-scheduler shows it (issue 51): its
FailedScheduling event for a pod no node fits names the node a plan frees, once, after the first
attempt asked for the plan in the background.

node-1 has two GPUs, one held by ``mover`` (a ReplicaSet's pod, running); node-2 one GPU, free.
``trainer`` wants two: no node fits; moving ``mover`` to node-2 frees node-1."""

from __future__ import annotations

import time

from tests.realcluster.components import extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.kubelet import playing_kubelet
from tests.realcluster.workload import (
    bound,
    failed_scheduling,
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
    store_violations,
    wait_unschedulable,
)

LINE = "fits on node-1 after moving 1 pod: kubectl dra make-room default/trainer"


def messages(cluster: ControlPlane, name: str) -> list[str]:
    """The pod's FailedScheduling messages, oldest first (an event's name ends with its
    creation time in hexadecimal nanoseconds, as client-go's recorders name them)."""
    events = [e for e in failed_scheduling(cluster.api) if e["involvedObject"]["name"] == name]
    events.sort(key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1], 16))
    return [str(e.get("message") or e.get("note") or "") for e in events]


def test_the_failed_scheduling_event_shows_the_make_room_line(cluster: ControlPlane) -> None:
    api = cluster.api
    cluster.add_node("node-1")
    api.create(gpu_class())
    api.create(gpu_slice("node-1", gpus=2))
    # A ReplicaSet that owns the mover without managing it (no replicas, a selector the mover
    # does not match): the extender moves only pods a controller recreates, and the garbage
    # collector keeps a pod whose owner exists.
    owner = api.create(
        {
            "kind": "ReplicaSet",
            "metadata": {"name": "movers", "namespace": "default"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "movers"}},
                "template": {
                    "metadata": {"labels": {"app": "movers"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
                },
            },
        }
    )
    with (
        playing_kubelet(api),
        extender(cluster, "--make-room-min-age", "0") as ext,
        scheduler(cluster, scheduler_config(cluster.extender_kubeconfig(), extender_url=ext.url)),
    ):
        api.create(one_gpu_claim("mover"))
        mover = pod_with_claims("mover", ["mover"])
        mover["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "movers", "uid": owner["metadata"]["uid"]}
        ]
        api.create(mover)
        api.wait_for(lambda: bound(api).get("mover") == "node-1", what="the mover bound to node-1")
        api.wait_for(
            lambda: (api.get("Pod", "mover", "default") or {}).get("status", {}).get("startTime"),
            what="the mover running",
        )
        cluster.add_node("node-2")
        api.create(gpu_slice("node-2", gpus=1))
        api.create(one_gpu_claim("wanted", count=2))
        api.create(pod_with_claims("trainer", ["wanted"]))
        wait_unschedulable(api, "trainer")
        # The extender rejected the pod: kube-scheduler tries it again on any cluster event.
        deadline = time.monotonic() + 90
        poke = 0
        while not any(LINE in m for m in messages(cluster, "trainer")):
            assert time.monotonic() < deadline, messages(cluster, "trainer")
            poke += 1
            api.patch("Node", "node-2", None, {"metadata": {"labels": {"poke": str(poke)}}})
            time.sleep(2)
        said = messages(cluster, "trainer")
        assert LINE not in said[0], said  # the first attempt only asked for the plan
        shown = next(m for m in said if LINE in m)
        assert shown.count(LINE) == 1, shown
        # kube-scheduler counts node-1's reason apart: "1 <reason>; <line>", then node-2's.
        assert "2 cannot allocate" not in shown and f"; {LINE}" in shown, shown
        assert "trainer" not in bound(api)
        plans = [
            float(m.split()[-1])
            for m in ext.metrics().splitlines()
            if m.startswith('dra_extender_make_room_hints_total{outcome="plan"}')
        ]
        assert plans and plans[0] >= 1, plans
    assert store_violations(api) == []
