"""Store-enforced fencing on the real kube-apiserver: the policy the standalone deployment ships
(manifests/standalone/leader-fence.yaml, applied as `kubectl apply -k` renders it) admits the
bind path's writes of its ServiceAccount only from the pod named by the Lease holder, at the
moment the write arrives. Replicas use pod-bound tokens, as pods do.

The case no process-side fence covers: a replica that still believes it leads (its renewal has
not lapsed by its own clock) while the Lease has moved on. Its write leaves it, and kube-apiserver
refuses it; the replica stands down at once, and the claim in the store is untouched."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from extender.cluster.api import FENCE_POLICY
from tests.deploy.test_rendered import STANDALONE, kustomized, rendered, with_component
from tests.realcluster.api import Api, ApiError
from tests.realcluster.components import Extender, extender
from tests.realcluster.controlplane import (
    EXTENDER_ACCOUNT,
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


def may_evict(cluster: ControlPlane, account: str) -> bool:
    """Whether RBAC lets ``account`` (of the extender's namespace) create pods/eviction."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": f"system:serviceaccount:{EXTENDER_NAMESPACE}:{account}",
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{EXTENDER_NAMESPACE}"],
            "resourceAttributes": {
                "namespace": "default",
                "verb": "create",
                "resource": "pods",
                "subresource": "eviction",
            },
        },
    }
    answer = cluster.api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review)
    return bool(answer["status"].get("allowed"))


@contextlib.contextmanager
def make_room_component(cluster: ControlPlane, tmp_path: Path) -> Iterator[None]:
    """The extender's ClusterRole as the standalone deployment renders it with
    manifests/components/make-room (what `kubectl apply -k` of such a kustomization updates it
    to); as it was afterwards."""
    (with_it,) = [
        d
        for d in kustomized(with_component(STANDALONE, tmp_path, "make-room"))
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dra-extender"
    ]
    (without,) = [
        d
        for d in rendered(STANDALONE)
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dra-extender"
    ]

    def set_rules(rules: list[dict[str, Any]]) -> None:
        role = cluster.api.get("ClusterRole", "dra-extender")
        assert role is not None
        role["rules"] = rules
        cluster.api.update(role)

    set_rules(with_it["rules"])
    try:
        cluster.api.wait_for(lambda: may_evict(cluster, STANDALONE_ACCOUNT), what="RBAC lets it evict")
        yield
    finally:
        set_rules(without["rules"])


def evict(api: Api, pod: dict[str, Any], *, dry_run: bool = False) -> str:
    """'' when the API server took the eviction (as the mover asks it: policy/v1, the pod's uid as
    a precondition), else its refusal. ``dry_run``: admitted or refused, and nothing evicted."""
    meta = pod["metadata"]
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "deleteOptions": {"preconditions": {"uid": meta["uid"]}},
    }
    try:
        api.request(
            "POST",
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction",
            json=eviction,
            params={"dryRun": "All"} if dry_run else None,
        )
    except ApiError as exc:
        return f"{exc.code}: {exc}"
    return ""


def victim(cluster: ControlPlane, name: str, *, running: bool = False) -> dict[str, Any]:
    """A pod of ``default`` nothing schedules; ``running``: its status says Running (the Eviction
    API skips budgets for a Pending pod)."""
    pod = cluster.api.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
            "spec": {
                "schedulerName": "nobody",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause"}],
            },
        }
    )
    if running:
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        pod = cluster.api.update(pod, subresource="status")
    return pod


def untouched(cluster: ControlPlane, pod: dict[str, Any]) -> bool:
    now = cluster.api.get("Pod", pod["metadata"]["name"], "default")
    return (
        now is not None
        and now["metadata"]["uid"] == pod["metadata"]["uid"]
        and "deletionTimestamp" not in now["metadata"]
        and not [
            c for c in (now.get("status") or {}).get("conditions") or [] if c["type"] == "DisruptionTarget"
        ]
    )


#: What the refusal names: the extender reads a 403 that says it as "fenced by the store"
#: (extender/cluster/api.py), for an eviction as for its other writes.
FENCE_NAME = f"ValidatingAdmissionPolicy '{FENCE_POLICY}-standalone'"


def test_the_fence_refuses_a_deposed_replicas_eviction_and_admits_the_holders(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    """The make-room mover's writes are evictions: with manifests/components/make-room granting
    them, a replica whose pod does not hold the Lease is refused by the fence (before the
    Eviction API reads the pod or its budget) and the pod is untouched; the holder's goes through."""
    # As installed without the component, neither deployment's account may evict (the sidecar's
    # includes kube-scheduler's own roles: system:kube-scheduler deletes pods, it does not evict).
    assert not may_evict(cluster, EXTENDER_ACCOUNT) and not may_evict(cluster, STANDALONE_ACCOUNT)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep-guarded", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    with standalone_fence(cluster), make_room_component(cluster, tmp_path):
        a, b = replica_pod(cluster, "evict-a"), replica_pod(cluster, "evict-b")
        as_a, as_b = (as_token(cluster, pod_token(cluster, p)) for p in (a, b))
        try:
            hold_lease(cluster, "evict-a_1")
            first, guarded = victim(cluster, "first"), victim(cluster, "guarded", running=True)
            cluster.api.create(budget)
            # The policy's parameter reaches the API server through its informer: wait for it, with
            # dry runs (admission judges them too, and they evict nothing).
            cluster.api.wait_for(
                lambda: refused_as_not_leading(evict(as_b, first, dry_run=True)), what="b's eviction refused"
            )
            refusal = evict(as_b, first)
            assert (
                refused_as_not_leading(refusal)
                and FENCE_NAME in refusal
                and "is held by evict-a_1" in refusal
            ), refusal
            assert untouched(cluster, first)
            # Admission comes first: a deposed replica learns "not the leader", not the budget's 429.
            answer = evict(as_b, guarded)
            assert refused_as_not_leading(answer) and FENCE_NAME in answer, answer
            assert untouched(cluster, guarded)
            # The holder's eviction goes through (a Pending pod: no budget is consulted) ...
            assert evict(as_a, first) == ""
            cluster.api.wait_for(
                lambda: cluster.api.get("Pod", "first", "default") is None, what="first gone"
            )
            # ... and past the fence, the budget decides (no disruption controller here: the
            # budget's status is not yet computed, so it refuses with 429, as a tight one does).
            answer = evict(as_a, guarded)
            assert answer.startswith("429") and "disruption budget" in answer, answer
            assert untouched(cluster, guarded)
        finally:
            for api in (as_a, as_b):
                api.close()
            for name in ("first", "guarded"):
                cluster.api.delete("Pod", name, "default")
            cluster.api.request(
                "DELETE", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/keep-guarded"
            )
            for name in ("evict-a", "evict-b"):
                cluster.api.delete("Pod", name, EXTENDER_NAMESPACE)
