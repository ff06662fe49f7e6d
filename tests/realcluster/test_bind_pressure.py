"""Binds that never outlast kube-scheduler's httpTimeout (issue 42, item 4), on the real
kube-scheduler and kube-apiserver: the extender reaches kube-apiserver through a proxy that
delays every request (an API server slower than kube-scheduler decides), so binds queue in the
extender while kube-scheduler goes on deciding.

Without back-pressure (``--scheduler-http-timeout 0``: the control) binds outlast kube-scheduler's
``httpTimeout``: kube-scheduler fails those pods' attempts ("FailedScheduling") although their
writes land, and retries them. With it, filter answers are held while binds queue: every pod is
bound at its first attempt, and none fails in between.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from extender.service.bind_pressure import BindPressure
from tests.realcluster.components import Extender, Scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.proxy import Proxy
from tests.realcluster.workload import (
    failed_scheduling,
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
    remove,
    store_violations,
    wait_bound,
)

NODES, GPUS = 16, 8
PODS = NODES * GPUS  # every pod fits
#: kube-scheduler's httpTimeout here (shipped: 10 s), and the extender's flag to match.
HTTP_TIMEOUT = 5
#: Every request from the extender waits this long at the proxy: a bind makes three writes (the
#: claim's finalizer, its status, the Binding) over at most 32 connections, so binds complete at
#: ~20/s while kube-scheduler decides ~100 pods/s.
REQUEST_DELAY = 0.5

pytestmark = pytest.mark.realcluster


def schedule(plane: ControlPlane, *extender_args: str) -> dict[str, Any]:
    """Schedule the burst through the slowed link; what kube-scheduler and the store say."""
    api = plane.api
    for i in range(PODS):
        api.create(one_gpu_claim(f"bp-{i}"))
        api.create(pod_with_claims(f"bp-{i}", [f"bp-{i}"]))
    with Proxy(plane.port) as proxy:
        proxy.request_delay = REQUEST_DELAY
        kubeconfig = plane.extender_kubeconfig()
        slowed = kubeconfig.with_name("dra-extender-slowed.kubeconfig")
        slowed.write_text(kubeconfig.read_text().replace(plane.url, proxy.url))
        extender = Extender(plane, *extender_args, kubeconfig=slowed).start()
        config = scheduler_config(plane.extender_kubeconfig(), extender_url=extender.url, client_qps=5000)
        config["extenders"][0]["httpTimeout"] = f"{HTTP_TIMEOUT}s"
        scheduler = Scheduler(plane, config)
        started = time.monotonic()
        scheduler.start()
        try:
            placed = wait_bound(api, PODS, timeout=120)
            took = time.monotonic() - started
            time.sleep(1.0)  # a failed attempt's event may be written just after the bind lands
            metrics = scheduler.metrics()
        finally:
            scheduler.stop()
            extender.stop()
    failed = {e["involvedObject"]["name"] for e in failed_scheduling(api)}
    outcome = {
        "bound": len(placed),
        "seconds": round(took, 1),
        "failed then bound": len(failed & set(placed)),
        "errors": sum(
            float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("scheduler_schedule_attempts_total") and 'result="error"' in line
        ),
        "violations": store_violations(api),
    }
    print(f"\n{extender_args or 'back-pressure'}: {outcome}")
    remove(api, ("Pod", "ResourceClaim", "Event"), ("default",))
    return outcome


@pytest.mark.slow
def test_binds_on_a_slow_api_server_never_outlast_the_schedulers_timeout(cluster: ControlPlane) -> None:
    api = cluster.api
    api.create(gpu_class())
    for n in range(NODES):
        cluster.add_node(f"bp-node-{n}")
        api.create(gpu_slice(f"bp-node-{n}", gpus=GPUS))
    assert BindPressure(HTTP_TIMEOUT).limit < HTTP_TIMEOUT / 2

    control = schedule(cluster, "--scheduler-http-timeout", "0")
    assert control["bound"] == PODS and control["violations"] == []
    assert control["failed then bound"] > 0, (
        f"without back-pressure no bind outlasted the {HTTP_TIMEOUT} s timeout: nothing was tested",
        control,
    )

    held = schedule(cluster, "--scheduler-http-timeout", str(HTTP_TIMEOUT))
    assert held["bound"] == PODS and held["violations"] == []
    assert held["failed then bound"] == 0, held
    assert held["errors"] == 0, held
