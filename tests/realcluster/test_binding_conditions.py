"""Devices with binding conditions under the real kube-scheduler, side by side with the in-tree plugin.

A thread plays the DRA driver: when a claim is allocated it "attaches" the device some seconds
later (the binding condition True in ``status.devices``) or reports that attaching failed. The
in-tree plugin waits in PreBind (v1.37.0 dynamicresources.go PreBind: polls every 5 s up to
bindingTimeout); the extender waits within each bind (``--binding-conditions-wait``, 5 s) and
keeps the claim allocated for kube-scheduler's retry when that is not enough. Either way the pod
must be bound only after its device is attached, to the node of that device.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.realcluster.api import Api
from tests.realcluster.components import deciding
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import (
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
    store_violations,
    wait_bound,
)

ATTACH: dict[str, Any] = {"bindingConditions": ["Attached"], "bindingFailureConditions": ["AttachFailed"]}


@dataclass
class Driver:
    """Attaches each allocated device ``delay`` seconds after it sees the allocation; the first
    ``failures`` allocations get AttachFailed instead. Records what the pod was at each write."""

    api: Api
    claim: str
    delay: float
    failures: int = 0
    #: (condition, device, the pod's nodeName when the condition was written).
    written: list[tuple[str, str, str | None]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        answered: set[str] = set()  # allocations (timestamp and device) already answered
        while not self.stop.wait(0.05):
            allocation = self.allocation()
            if allocation is None:
                continue
            (result,) = allocation["devices"]["results"]
            seen = f"{allocation.get('allocationTimestamp')}/{result['device']}"
            if seen in answered:
                continue
            answered.add(seen)
            condition = "AttachFailed" if self.failures > 0 else "Attached"
            self.failures -= 1
            if condition == "Attached" and self.stop.wait(self.delay):
                return
            now = self.allocation()
            if (
                now is None
                or f"{now.get('allocationTimestamp')}/{now['devices']['results'][0]['device']}" != seen
            ):
                continue  # deallocated meanwhile: the next allocation is answered
            pod = self.api.get("Pod", "p", "default")
            self.written.append((condition, result["device"], (pod or {}).get("spec", {}).get("nodeName")))
            self.api.patch(
                "ResourceClaim",
                self.claim,
                "default",
                {"status": {"devices": [status(result, condition)]}},
                subresource="status",
            )

    def allocation(self) -> dict[str, Any] | None:
        claim = self.api.get("ResourceClaim", self.claim, "default")
        found: dict[str, Any] | None = ((claim or {}).get("status") or {}).get("allocation")
        return found


def status(result: dict[str, Any], condition: str) -> dict[str, Any]:
    return {
        "driver": result["driver"],
        "pool": result["pool"],
        "device": result["device"],
        "conditions": [
            {
                "type": condition,
                "status": "True",
                "reason": "Driver",
                "message": f"{condition} by the test's driver",
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        ],
    }


@contextlib.contextmanager
def driving(driver: Driver) -> Iterator[Driver]:
    thread = threading.Thread(target=driver.run, daemon=True)
    thread.start()
    try:
        yield driver
    finally:
        driver.stop.set()
        thread.join(10)


def setup(cluster: ControlPlane, gpus: int) -> None:
    cluster.add_node("node-a")
    cluster.api.create(gpu_class())
    cluster.api.create(gpu_slice("node-a", gpus=gpus, **ATTACH))
    cluster.api.create(one_gpu_claim("c"))


@pytest.mark.parametrize("mode", ["in-tree", "extender"])
def test_the_pod_binds_once_its_device_is_attached(cluster: ControlPlane, mode: str) -> None:
    """Attached 6 s after allocation: past one extender bind's 5 s wait, so the extender's first
    bind answers "not met" with the claim kept, and kube-scheduler's retry binds."""
    api = cluster.api
    audit_from = len(cluster.audit_events())
    setup(cluster, gpus=1)
    driver = Driver(api, "c", delay=6.0)
    with deciding(cluster, mode), driving(driver):
        api.create(pod_with_claims("p", ["c"]))
        assert wait_bound(api, 1, timeout=60) == {"p": "node-a"}
    assert driver.written == [("Attached", "gpu-0", None)]  # the pod was not bound before
    claim = api.get("ResourceClaim", "c", "default")
    assert claim is not None
    assert claim["status"]["allocation"]["devices"]["results"][0]["bindingConditions"] == ["Attached"]
    assert claim["status"]["allocation"]["allocationTimestamp"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["p"]
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []


@pytest.mark.parametrize("mode", ["in-tree", "extender"])
def test_a_failed_attachment_is_given_up_and_the_claim_allocated_again(
    cluster: ControlPlane, mode: str
) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    setup(cluster, gpus=2)
    driver = Driver(api, "c", delay=0.5, failures=1)
    with deciding(cluster, mode), driving(driver):
        api.create(pod_with_claims("p", ["c"]))
        assert wait_bound(api, 1, timeout=90) == {"p": "node-a"}
    failed, attached = driver.written[0], driver.written[-1]
    assert failed[0] == "AttachFailed" and failed[2] is None
    assert attached[0] == "Attached" and attached[2] is None
    claim = api.get("ResourceClaim", "c", "default")
    assert claim is not None
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["device"] == attached[1]
    conditions = {c["type"]: c["status"] for d in claim["status"]["devices"] for c in d["conditions"]}
    assert conditions == {"Attached": "True"}  # the failed allocation's status went with it
    assert store_violations(api) == []
    assert cluster.refused_writes(audit_from) == []
