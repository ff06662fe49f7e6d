"""The network case of leader failover, on the real control plane: the leader's allocation write
leaves it, is held in the network (tests/realcluster/proxy.py) while the leader is frozen or cut
off, a successor takes the Lease over and gives the one GPU to another pod, then the held write
arrives. With the standalone deployment's store fence installed as `kubectl apply -k` renders it
(manifests/standalone/leader-fence.yaml), kube-apiserver refuses the late write: never one GPU in
two claims. Without it (the control case) the same trial does end with one GPU in two claims:
the trial reproduces the hazard it guards against.

Variants (:data:`VARIANTS`): the write released before the old leader resumes, 1 s after, with
the leader only cut off, after kube-scheduler's bind timeout; and the Binding held instead of the
allocation (the allocation landed; the successor binds the same pod again, as kube-scheduler's
retry asks, and the old leader's late Binding is refused).

The suite runs one trial per variant (marked slow: about 20 s each); `DRA_FENCE_TRIALS=20`
runs more (the note's figures).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests import builders as b
from tests.realcluster.components import Extender, extender
from tests.realcluster.controlplane import (
    EXTENDER_ACCOUNT,
    EXTENDER_NAMESPACE,
    STANDALONE_ACCOUNT,
    ControlPlane,
    standalone_fence,
)
from tests.realcluster.failover import FENCE_REFUSAL, abandoned, ready
from tests.realcluster.proxy import Proxy
from tests.realcluster.test_store_fence import LEASE, pod_token, remove_claim, replica_pod
from tests.realcluster.workload import applied, pod_with_claims

TRIALS = int(os.environ.get("DRA_FENCE_TRIALS", "1"))
DRIVER = "fence.example.com"
NODE = "fence-node"
ELECTION = (
    "--leader-elect",
    f"--leader-elect-namespace={EXTENDER_NAMESPACE}",
    f"--leader-elect-name={LEASE}",
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
    "--api-timeout=3",
)
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


#: kube-scheduler gives up on an extender's bind after the shipped httpTimeout (10 s).
BIND_TIMEOUT = 10.0
#: Seconds each chunk of the leader's traffic is slowed by for the Binding variant: long enough
#: to hold the Binding after the allocation lands, short enough for its Lease renewals (a
#: renewal's round trip must stay well within its 2 s renew deadline).
SLOW_LINK = 0.3


@dataclass(frozen=True)
class Variant:
    #: The old leader is frozen (SIGSTOP) while its write is held; else only cut off.
    freeze: bool
    #: The held write goes on before the old leader resumes (else 1 s after).
    release_first: bool
    #: What the network holds: the allocation write, or the Binding sent after it landed.
    held: str = "allocation"
    #: The held write goes on only after kube-scheduler's bind timeout has passed since it left.
    past_bind_timeout: bool = False


VARIANTS = {
    "frozen, write released before it resumes": Variant(freeze=True, release_first=True),
    "frozen, write released 1 s after it resumes": Variant(freeze=True, release_first=False),
    "cut off, not frozen": Variant(freeze=False, release_first=True),
    "frozen, write released after the bind timeout": Variant(
        freeze=True, release_first=True, past_bind_timeout=True
    ),
    "frozen, the Binding held": Variant(freeze=True, release_first=True, held="binding"),
}


@pytest.fixture
def fence_node(cluster: ControlPlane) -> Iterator[str]:
    """One node with one device of a class only these trials use."""
    cluster.add_node(NODE)
    cluster.api.create(applied(b.device_class(DRIVER, f'device.driver == "{DRIVER}"')))
    cluster.api.create(
        applied(b.resource_slice(f"{NODE}-gpu", [b.device("gpu-0")], driver=DRIVER, pool=NODE, node=NODE))
    )
    yield NODE


def fence_claim(name: str) -> dict[str, Any]:
    """A one-device claim whose delete protection is there already: a bind's first write is its
    allocation (the write the network holds)."""
    claim = applied(b.claim(name, [b.exact("gpu", DRIVER, 1)]))
    claim["metadata"]["finalizers"] = [DELETE_PROTECTION]
    return claim


def bind(replica: Extender, pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    body = {"PodName": meta["name"], "PodNamespace": "default", "PodUID": meta["uid"], "Node": NODE}
    return str(httpx.post(f"{replica.url}/scheduler/bind", json=body, timeout=60).json()["Error"])


def warm(replica: Extender) -> None:
    """Open the replica's write connection to the API server before the network stalls, as a
    busy leader has it (a bind of a pod its cache does not know reads the pod from the API server
    through the same pool): the write is then sent, not stuck in a TLS handshake."""
    body = {"PodName": "not-cached", "PodNamespace": "default", "PodUID": "uid-not-cached", "Node": NODE}
    httpx.post(f"{replica.url}/scheduler/bind", json=body, timeout=30)


def cached(replica: Extender, names: tuple[str, ...]) -> bool:
    shown = {c["claim"] for c in replica.get("/debug/claims")["claims"]}
    return all(f"default/{n}" in shown for n in names)


def writing(replica: Extender, claim: str) -> bool:
    """The replica has assumed its write of ``claim`` (it is on its way to the API server)."""
    writes = replica.get("/debug/inflight")["claimWrites"]
    return any(w["claim"] == f"default/{claim}" and w["allocating"] for w in writes)


def allocated(cluster: ControlPlane, claim: str) -> bool:
    found = cluster.api.get("ResourceClaim", claim, "default") or {}
    return bool((found.get("status") or {}).get("allocation"))


def before_the_bind(proxy: Proxy, variant: Variant) -> None:
    """Ready the network for the write it is to hold: held from now on (the allocation), or
    slowed by :data:`SLOW_LINK` a chunk each way (the Binding: see :func:`hold_the_write`)."""
    if variant.held == "allocation":
        proxy.hold()
    else:
        proxy.delay = SLOW_LINK


def hold_the_write(cluster: ControlPlane, proxy: Proxy, a: Extender, variant: Variant, claim: str) -> None:
    """Until the leader has sent the write the network holds: its allocation of ``claim`` (it
    has assumed it: the write is on its way, held), or what it sends after the allocation
    landed, the Binding among it (held from the moment the allocation is in the store: the
    leader's answer is still on the slowed link then, and its next request will be too)."""
    if variant.held == "allocation":
        cluster.api.wait_for(lambda: writing(a, claim), what="a's allocation write sent")
        return
    deadline = time.monotonic() + 30
    while not allocated(cluster, claim):
        assert time.monotonic() < deadline, "a's allocation did not land"
        time.sleep(0.01)
    proxy.hold()
    proxy.delay = 0.0


def holders_of_the_gpu(cluster: ControlPlane, names: tuple[str, ...]) -> list[str]:
    out = []
    for name in names:
        claim = cluster.api.get("ResourceClaim", name, "default") or {}
        allocation = (claim.get("status") or {}).get("allocation") or {}
        if any(r.get("device") == "gpu-0" for r in (allocation.get("devices") or {}).get("results") or []):
            out.append(name)
    return out


@contextlib.contextmanager
def replicas(cluster: ControlPlane, proxy: Proxy, account: str) -> Iterator[tuple[Extender, Extender]]:
    """Replica a (its API traffic through ``proxy``) leading, replica b a synced standby; both
    with pod-bound tokens of ``account``, as pods of a Deployment."""
    pods = [replica_pod(cluster, name, account) for name in ("fence-a", "fence-b")]
    try:
        token_a, token_b = (pod_token(cluster, p, account) for p in pods)
        via_proxy = cluster.kubeconfig("fence-a", token=token_a)
        via_proxy.write_text(via_proxy.read_text().replace(cluster.url, proxy.url))
        direct = cluster.kubeconfig("fence-b", token=token_b)
        with extender(
            cluster, *ELECTION, name="fence-a", kubeconfig=via_proxy, env={"POD_NAME": "fence-a"}
        ) as a:
            cluster.api.wait_for(lambda: ready(a), timeout=60, what="a leading")
            with extender(
                cluster,
                *ELECTION,
                name="fence-b",
                kubeconfig=direct,
                env={"POD_NAME": "fence-b"},
                ready=False,
            ) as b_:
                cluster.api.wait_for(
                    lambda: "standby" in httpx.get(f"{b_.ops_url}/readyz").text, what="b standing by"
                )
                yield a, b_
    finally:
        for p in pods:
            cluster.api.delete("Pod", p["metadata"]["name"], EXTENDER_NAMESPACE)


def trial(
    cluster: ControlPlane, i: int, variant: Variant, account: str = STANDALONE_ACCOUNT
) -> tuple[list[str], str, str]:
    """(the claims holding the GPU afterwards, the old leader's bind answer, the new one's).
    ``account``: the replicas' ServiceAccount (the standalone one is fenced)."""
    names = (f"held-{i}", f"later-{i}")
    for name in names:
        cluster.api.create(fence_claim(name))
    pods = [cluster.api.create(pod_with_claims(f"{name}-pod", [name])) for name in names]
    old_answer: list[str] = []
    try:
        with Proxy(cluster.port) as proxy, replicas(cluster, proxy, account) as (a, b_):
            cluster.api.wait_for(lambda: cached(a, names) and cached(b_, names), what="claims cached")
            warm(a)
            before_the_bind(proxy, variant)

            def send() -> None:
                old_answer.append(bind(a, pods[0]))

            sender = threading.Thread(target=send, daemon=True)
            sender.start()
            hold_the_write(cluster, proxy, a, variant, names[0])
            sent = time.monotonic()
            time.sleep(1.5)  # its bytes are at the proxy, held
            assert proxy.held_bytes > 0
            if variant.freeze:
                a.process.signal(signal.SIGSTOP)
            try:
                cluster.api.wait_for(lambda: ready(b_), timeout=60, what="b leading")
                # kube-scheduler sends the successor the next pod; with the Binding held, the
                # first pod again (its bind timed out): its claim is allocated for it already.
                new_answer = bind(b_, pods[0] if variant.held == "binding" else pods[1])
                if variant.past_bind_timeout:
                    time.sleep(max(0.0, sent + BIND_TIMEOUT + 1.0 - time.monotonic()))
                if variant.freeze and not variant.release_first:
                    a.process.signal(signal.SIGCONT)
                    time.sleep(1.0)
                proxy.release()
                time.sleep(1.0)
            finally:
                if variant.freeze:
                    a.process.signal(signal.SIGCONT)
                proxy.release()
            sender.join(timeout=60)
            time.sleep(1.0)  # what the released bytes carried has been answered
            holders = holders_of_the_gpu(cluster, names)
    finally:
        for p in pods:
            cluster.api.delete("Pod", p["metadata"]["name"], "default")
        for name in names:
            remove_claim(cluster, name)
    return holders, (old_answer or ["(no answer)"])[0], new_answer


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_a_held_allocation_write_of_a_deposed_leader_never_gives_the_gpu_twice(
    cluster: ControlPlane, fence_node: str, variant: Variant
) -> None:
    audit_from = len(cluster.audit_events())
    with standalone_fence(cluster):
        outcomes = [trial(cluster, i, variant) for i in range(TRIALS)]
    for holders, old, new in outcomes:
        assert new == "", new  # the successor bound its pod
        assert len(holders) == 1, (holders, old, new)
    refused = cluster.refused_writes(audit_from)
    # The held writes: refused by the fence, or, let go past their own timeout (a loaded
    # machine), answered 504 before the fence was asked; either way not made.
    assert refused and all(FENCE_REFUSAL in r or abandoned(r) for r in refused), refused


@pytest.mark.slow
def test_control_without_the_store_fence_the_held_write_gives_the_gpu_twice(
    cluster: ControlPlane, fence_node: str
) -> None:
    # The same trial with replicas of an account no fence covers here (the sidecar's: its fence
    # is not installed in this suite): the held write lands after the successor's, as the
    # issue's 3 of 10 trials did. The trial reproduces the hazard.
    with standalone_fence(cluster):
        holders, old, new = trial(cluster, 99, Variant(freeze=True, release_first=True), EXTENDER_ACCOUNT)
    assert new == ""
    assert sorted(holders) == ["held-99", "later-99"], (holders, old)
