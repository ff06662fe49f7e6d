"""Store-enforced fencing on the real kube-apiserver: the policy the standalone deployment ships
(manifests/standalone/leader-fence.yaml, applied as `kubectl apply -k` renders it) admits the
bind path's writes of its ServiceAccount only from the pod named by the Lease holder, at the
moment the write arrives. Replicas use pod-bound tokens, as pods do.

The case no process-side fence covers: a replica that still believes it leads (its renewal has
not lapsed by its own clock) while the Lease has moved on. Its write leaves it, and kube-apiserver
refuses it; the replica stands down at once, and the claim in the store is untouched."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.realcluster.api import Api, ApiError
from tests.realcluster.components import Extender, extender
from tests.realcluster.controlplane import (
    EXTENDER_NAMESPACE,
    HOSTNAME,
    SIDECAR_POD,
    STANDALONE_ACCOUNT,
    STANDALONE_LEASE,
    ControlPlane,
    standalone_fence,
)
from tests.realcluster.workload import gpu_class, gpu_slice, one_gpu_claim, pod_with_claims, store_violations

LEASE = STANDALONE_LEASE
#: A long renewal: the replica keeps believing it leads for a while after the Lease moved on.
SLOW_ELECTION = (
    "--leader-elect",
    f"--leader-elect-namespace={EXTENDER_NAMESPACE}",
    f"--leader-elect-name={LEASE}",
    "--leader-elect-lease-duration=120",
    "--leader-elect-renew-deadline=90",
    "--leader-elect-retry-period=60",
)


def replica_pod(cluster: ControlPlane, name: str, account: str = STANDALONE_ACCOUNT) -> dict[str, Any]:
    """A Pod object the replica's token is bound to."""
    return cluster.replica_pod(name, account)


def pod_token(cluster: ControlPlane, pod: dict[str, Any] | None, account: str = STANDALONE_ACCOUNT) -> str:
    """A token of ``account``, bound to ``pod`` (None: bound to nothing)."""
    return cluster.token(EXTENDER_NAMESPACE, account, pod=pod)


def as_token(cluster: ControlPlane, token: str) -> Api:
    return Api(cluster.url, ca=str(cluster.certs.ca_file), token=token)


def hold_lease(cluster: ControlPlane, identity: str) -> None:
    lease = cluster.api.get("Lease", LEASE, EXTENDER_NAMESPACE)
    spec = {"holderIdentity": identity, "leaseDurationSeconds": 120}
    if lease is None:
        cluster.api.create(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": LEASE, "namespace": EXTENDER_NAMESPACE},
                "spec": spec,
            }
        )
    else:
        lease["spec"].update(spec)
        cluster.api.update(lease)


def add_finalizer(cluster: ControlPlane, api: Api, name: str) -> str:
    """'' when the API server took the write (an Update of the claim, as the extender adds its
    finalizer), else its refusal."""
    claim = cluster.api.get("ResourceClaim", name, "default")
    assert claim is not None
    finalizers = claim["metadata"].setdefault("finalizers", [])
    finalizers.append(f"example.com/test-{len(finalizers)}")
    try:
        api.update(claim)
    except ApiError as exc:
        return f"{exc.code}: {exc}"
    return ""


def remove_claim(cluster: ControlPlane, name: str) -> None:
    """Delete a claim, with the finalizers the tests added (the admin's writes are not fenced).
    Read again on a conflict: kube-controller-manager's resourceclaim controller drops the
    reservation of a pod deleted just before."""
    for _ in range(5):
        claim = cluster.api.get("ResourceClaim", name, "default")
        if claim is None:
            return
        claim["metadata"]["finalizers"] = []
        try:
            cluster.api.update(claim)
            break
        except ApiError as exc:
            if exc.code != 409:
                raise
    cluster.api.delete("ResourceClaim", name, "default")


def refused_as_not_leading(answer: str) -> bool:
    return answer.startswith("403") and "dra-extender: not the leader" in answer


def test_the_api_server_admits_only_the_lease_holders_pod(cluster: ControlPlane) -> None:
    with standalone_fence(cluster):
        a, b = replica_pod(cluster, "fence-a"), replica_pod(cluster, "fence-b")
        as_a, as_b = (as_token(cluster, pod_token(cluster, p)) for p in (a, b))
        unbound = as_token(cluster, pod_token(cluster, None))
        cluster.api.create(one_gpu_claim("fenced"))
        try:
            hold_lease(cluster, "fence-a_1")
            # The policy's parameter reaches the API server through its informer: wait for it.
            cluster.api.wait_for(
                lambda: refused_as_not_leading(add_finalizer(cluster, as_b, "fenced")), what="b refused"
            )
            assert add_finalizer(cluster, as_a, "fenced") == ""
            assert refused_as_not_leading(add_finalizer(cluster, unbound, "fenced"))
            # "fence-a" does not hold a Lease held by "fence-ab_1": the pod name and '_' start it.
            hold_lease(cluster, "fence-ab_1")
            cluster.api.wait_for(
                lambda: refused_as_not_leading(add_finalizer(cluster, as_a, "fenced")), what="a refused"
            )
            hold_lease(cluster, "fence-b_7")
            cluster.api.wait_for(lambda: add_finalizer(cluster, as_b, "fenced") == "", what="b admitted")
            assert refused_as_not_leading(add_finalizer(cluster, as_a, "fenced"))
            assert add_finalizer(cluster, cluster.api, "fenced") == ""  # other users: not its business
            # Deletes and Bindings are fenced too.
            with_claims = cluster.api.create(pod_with_claims("fenced-pod"))
            meta = with_claims["metadata"]
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": meta["name"], "namespace": "default", "uid": meta["uid"]},
                "target": {"apiVersion": "v1", "kind": "Node", "name": "nowhere"},
            }
            try:
                as_a.request("POST", f"/api/v1/namespaces/default/pods/{meta['name']}/binding", json=binding)
                raise AssertionError("a's Binding was admitted")
            except ApiError as exc:
                assert exc.code == 403 and "not the leader" in str(exc), exc
            try:
                as_a.request("DELETE", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/fenced")
                raise AssertionError("a's delete was admitted")
            except ApiError as exc:
                assert exc.code == 403 and "not the leader" in str(exc), exc
            # No Lease (nobody led yet, or it was deleted): the fence is open for everyone. With
            # parameterNotFoundAction Deny every claim write in the cluster would be refused.
            cluster.api.delete("Lease", LEASE, EXTENDER_NAMESPACE)
            cluster.api.wait_for(
                lambda: add_finalizer(cluster, as_a, "fenced") == "", what="open without a Lease"
            )
            assert add_finalizer(cluster, cluster.api, "fenced") == ""
        finally:
            for api in (as_a, as_b, unbound):
                api.close()
            cluster.api.delete("Pod", "fenced-pod", "default")
            remove_claim(cluster, "fenced")
            for name in ("fence-a", "fence-b"):
                cluster.api.delete("Pod", name, EXTENDER_NAMESPACE)


def fence_state(replica: Extender) -> str:
    found = re.findall(r'^dra_extender_store_fence\{state="(\w+)"\} 1\.0$', replica.metrics(), re.M)
    return found[0] if found else ""


def test_a_replica_that_still_believes_it_leads_is_refused_by_the_store_and_stands_down(
    cluster: ControlPlane,
) -> None:
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-f")
    cluster.api.create(gpu_class())
    cluster.api.create(gpu_slice("node-f", gpus=1))
    with standalone_fence(cluster):
        pod = replica_pod(cluster, "fence-leader")
        token = pod_token(cluster, pod)
        kubeconfig = cluster.kubeconfig("fence-leader", token=token)
        probe = as_token(cluster, token)
        try:
            with extender(
                cluster,
                *SLOW_ELECTION,
                name="fence-leader",
                kubeconfig=kubeconfig,
                env={"POD_NAME": "fence-leader"},
            ) as leader:
                cluster.api.wait_for(
                    lambda: fence_state(leader) == "enforced", timeout=60, what="fence enforced"
                )
                lease = cluster.api.get("Lease", LEASE, EXTENDER_NAMESPACE)
                assert lease is not None and lease["spec"]["holderIdentity"].startswith("fence-leader_")
                cluster.api.create(one_gpu_claim("late"))
                cluster.api.create(one_gpu_claim("probe"))
                p = cluster.api.create(pod_with_claims("late-pod", ["late"]))
                cluster.api.wait_for(
                    lambda: leader.get("/debug/claims")["claims"], what="the claims in its cache"
                )
                # Another replica takes the Lease over; this one's renewal is a minute away, so
                # by its own clock it still leads and its process-side fence lets writes out.
                hold_lease(cluster, "fence-successor_1")
                cluster.api.wait_for(
                    lambda: refused_as_not_leading(add_finalizer(cluster, probe, "probe")),
                    what="the API server's view",
                )
                assert (
                    httpx.get(f"{leader.ops_url}/readyz", timeout=5).status_code == 200
                )  # it believes it leads
                meta = p["metadata"]
                body = {
                    "PodName": "late-pod",
                    "PodNamespace": "default",
                    "PodUID": meta["uid"],
                    "Node": "node-f",
                }
                answer = str(
                    httpx.post(f"{leader.url}/scheduler/bind", json=body, timeout=30).json()["Error"]
                )
                assert (
                    "not the leader: Lease dra-extender/dra-extender is held by fence-successor_1" in answer
                ), answer
                # It stood down at once: not ready, and it sends nothing more.
                assert httpx.get(f"{leader.ops_url}/readyz", timeout=5).status_code == 503
                refusals = re.findall(
                    r"^dra_extender_writes_refused_by_fence_total\{[^}]*\} (\S+)$", leader.metrics(), re.M
                )
                assert sum(float(v) for v in refusals) == 1.0, refusals
                claim = cluster.api.get("ResourceClaim", "late", "default")
                assert claim is not None and not (claim.get("status") or {}).get("allocation"), claim
                assert not (claim["metadata"].get("finalizers") or [])
        finally:
            probe.close()
            cluster.api.delete("Pod", "late-pod", "default")
            for name in ("late", "probe"):
                remove_claim(cluster, name)
            cluster.api.delete("Pod", "fence-leader", EXTENDER_NAMESPACE)
    assert store_violations(cluster.api) == []
    refused = cluster.refused_writes(audit_from)
    assert refused and all("not the leader" in r for r in refused), refused


def test_a_replica_whose_token_is_not_pod_bound_says_the_fence_cannot_hold(cluster: ControlPlane) -> None:
    with standalone_fence(cluster):
        kubeconfig = cluster.kubeconfig("fence-unbound", token=pod_token(cluster, None))
        with extender(cluster, *SLOW_ELECTION, name="fence-unbound", kubeconfig=kubeconfig, ready=False) as r:
            cluster.api.wait_for(lambda: fence_state(r) == "unusable", timeout=60, what="fence unusable")
            assert "token is not bound to a pod" in r.log()


def test_the_suites_sidecar_runs_under_the_sidecar_fence_as_shipped(cluster: ControlPlane) -> None:
    # The harness applies manifests/leader-fence.yaml and gives the sidecar pod-bound tokens, as a
    # cluster does (controlplane.py): every real-cluster test's writes pass through the policy.
    if SIDECAR_POD != HOSTNAME:
        pytest.skip(f"this machine's hostname {HOSTNAME!r} is no pod name: the sidecar fence is not applied")
    with extender(cluster) as sidecar:
        cluster.api.wait_for(
            lambda: fence_state(sidecar) == "enforced", timeout=60, what="sidecar fence enforced"
        )
