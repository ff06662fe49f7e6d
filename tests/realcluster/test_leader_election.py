"""Two extender replicas with --leader-elect on a real coordination.k8s.io Lease, as the
standalone deployment runs them (the sidecar ServiceAccount's Role allows the Lease): one is
ready and binds; a leader frozen (SIGSTOP) or killed (SIGKILL) is replaced within a lease
duration, and the new leader binds pods onto what the real API server holds."""

from __future__ import annotations

import signal
import time

import httpx
import pytest

from tests.realcluster.components import Extender, extender
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import gpu_class, gpu_slice, one_gpu_claim, pod_with_claims, store_violations

LEASE = "test-extender"
ELECTION = (
    "--leader-elect",
    "--leader-elect-namespace=dra-extender",
    f"--leader-elect-name={LEASE}",
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
    # A new leader's first write waits for the old one's to land or expire: 2 s + this.
    "--api-timeout=3",
)


def ready(replica: Extender) -> bool:
    try:
        return httpx.get(f"{replica.ops_url}/readyz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def holder(plane: ControlPlane) -> str | None:
    lease = plane.api.get("Lease", LEASE, "dra-extender")
    return None if lease is None else lease["spec"].get("holderIdentity")


def bind(replica: Extender, pod: dict[str, object], node: str) -> str:
    meta = pod["metadata"]
    assert isinstance(meta, dict)
    body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
    return str(httpx.post(f"{replica.url}/scheduler/bind", json=body, timeout=30).json()["Error"])


@pytest.mark.parametrize("stop", [signal.SIGSTOP, signal.SIGKILL], ids=["frozen", "killed"])
def test_standby_takes_the_lease_and_binds(cluster: ControlPlane, stop: signal.Signals) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=2))
    with extender(cluster, *ELECTION, name="replica-a") as a:
        first = holder(cluster)
        assert first, "the first replica holds the Lease"
        with extender(cluster, *ELECTION, name="replica-b", ready=False) as b:
            api.wait_for(
                lambda: "standby" in httpx.get(f"{b.ops_url}/readyz").text, what="b a synced standby"
            )
            assert ready(a) and not ready(b)
            api.create(one_gpu_claim("c1"))
            p1 = api.create(pod_with_claims("p1", ["c1"]))
            assert "does not hold the Lease" in bind(b, p1, "node-a")
            assert bind(a, p1, "node-a") == ""
            a.process.signal(stop)
            try:
                api.wait_for(lambda: ready(b), timeout=20, what="b leading")
                assert holder(cluster) not in (None, first)
                api.create(one_gpu_claim("c2"))
                p2 = api.create(pod_with_claims("p2", ["c2"]))
                api.wait_for(lambda: b.get("/debug/claims")["claims"], what="b's cache has claims")
                assert bind(b, p2, "node-a") == ""
            finally:
                if stop == signal.SIGSTOP:
                    a.process.signal(signal.SIGCONT)
            if stop == signal.SIGSTOP:
                # Woken up, the old leader finds the Lease taken and stops deciding.
                api.wait_for(lambda: not ready(a), timeout=10, what="a standing down")
                time.sleep(1.0)
                assert holder(cluster) != first
    claims = {c["metadata"]["name"]: c for c in api.list("ResourceClaim", "default")}
    devices = [r["device"] for c in claims.values() for r in c["status"]["allocation"]["devices"]["results"]]
    assert sorted(devices) == ["gpu-0", "gpu-1"]
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []
