"""The RBAC rules in manifests/ cover every API call the service makes (from the fake's request log)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.deploy.test_rendered import SIDECAR, STANDALONE, kustomized, rendered, with_component
from tests.fakeapi.rbac import Request, allows
from tests.fakeapi.server import FakeApiServer
from tests.integration.servers import cli_server
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import EXAMPLE_NODES, TRAINER, args_names, binding
from tests.shared import REPO


def rules(directory: str = SIDECAR, account: str = "dra-extender") -> list[tuple[dict[str, Any], str]]:
    """(rule, namespace) pairs: '' for cluster-wide rules bound to the ServiceAccount, as rendered."""
    return rules_of(rendered(directory), account)


def rules_of(docs: Iterable[dict[str, Any]], account: str) -> list[tuple[dict[str, Any], str]]:
    """(rule, namespace) pairs of the Roles and ClusterRoles among ``docs`` bound to ``account``."""
    docs = list(docs)
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("ClusterRole", "Role")
    }
    out = []
    for binding_doc in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        if not any(s["name"] == account and s["kind"] == "ServiceAccount" for s in binding_doc["subjects"]):
            continue
        ref = binding_doc["roleRef"]
        namespace = binding_doc["metadata"].get("namespace", "")
        role = roles.get((ref["kind"], namespace if ref["kind"] == "Role" else "", ref["name"]))
        for rule in (role or {}).get("rules", []):
            out.append((rule, namespace))
    return out


def allowed(call: Request, directory: str = SIDECAR, account: str = "dra-extender") -> bool:
    return allows(rules(directory, account), call)


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        for obj in yaml.safe_load_all((REPO / "examples" / "cluster.yaml").read_text()):
            server.create(obj)
        yield server


def test_every_call_is_allowed(fake: FakeApiServer, tmp_path: Path) -> None:
    lease = [
        "--leader-elect",
        "--leader-elect-namespace",
        "dra-extender",
        "--leader-elect-retry-period",
        "0.2",
    ]
    with (
        cli_server("--kubeconfig", kubeconfig(fake, tmp_path), *lease) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: ready(http))
        # A refused Binding exercises the release (deallocation) and the Event.
        fake.faults.inject[("POST", "pods/trainer/binding")] = [403]
        assert http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json()["Error"]
        assert http.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES)).status_code == 200
        assert http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json() == {"Error": ""}
        # An extended-resource pod: its claim is created, then deleted when the Binding is
        # refused (upstream Unreserve); the retry creates it again and records it in pod status.
        fake.faults.inject[("POST", "pods/legacy-gpu/binding")] = [403]
        assert http.post(
            "/scheduler/bind", content=binding("legacy-gpu", "uid-pod-legacy-gpu", "gpu-node-2")
        ).json()["Error"]
        wait_until(
            lambda: (
                not any(
                    c["claim"].startswith("default/legacy-gpu-")
                    for c in http.get("/debug/claims").json()["claims"]
                )
            )
        )
        assert http.post(
            "/scheduler/bind", content=binding("legacy-gpu", "uid-pod-legacy-gpu", "gpu-node-2")
        ).json() == {"Error": ""}
        # The Lease is renewed (an update) every retry period: the scenario may end before one.
        wait_until(lambda: any(m == "PUT" and "/leases/" in t for m, t, _ in fake.requests))
    # Discovery and /version need no RBAC rule (system:discovery and system:public-info-viewer
    # cover every client): they are no resource request.
    calls = {call for method, target, _ in fake.requests if (call := Request.of(method, target))}
    verbs = {(c.resource, c.verb) for c in calls}
    # The scenario did exercise the interesting calls.
    for needed in [
        ("resourceclaims", "update"),
        ("resourceclaims/status", "update"),
        # Not ("resourceclaims/status", "patch"): Unreserve's patch runs only when another pod
        # reserved the claim since our write (the manifests allow it all the same).
        ("pods/binding", "create"),
        ("resourceclaims", "create"),
        ("resourceclaims", "delete"),
        ("pods/status", "patch"),
        ("events", "create"),
        ("leases", "update"),
        ("resourceslices", "watch"),
    ]:
        assert needed in verbs, needed
    denied = sorted(c for c in calls if not allowed(c))
    assert denied == []
    # The standalone extender's own identity allows the same calls (it runs with --leader-elect).
    standalone = sorted(c for c in calls if not allowed(c, STANDALONE, "dra-extender-standalone"))
    assert standalone == []


def test_the_checker_can_say_no() -> None:
    assert allowed(Request("", "pods/binding", "create", "default"))
    assert not allowed(Request("", "secrets", "get", "default"))
    assert not allowed(Request("resource.k8s.io", "resourceclaims", "deletecollection", "default"))
    assert not allowed(Request("", "pods", "update", "default"))
    assert not allowed(Request("coordination.k8s.io", "leases", "update", "other-namespace"))


def test_the_viewer_role_lists_every_kind_kubectl_dra_reads_and_nothing_more() -> None:
    """manifests/common/viewer-role.yaml: list (and get) on each kind the extender reads
    (extender/cluster/discovery.py WATCHED), no other verb, no other resource."""
    from extender.cluster.discovery import OUTSIDE_DRA, WATCHED

    groups = {
        "PodGroup": "scheduling.k8s.io",
        **{k: v.split("/")[0] if "/" in v else "" for k, v in OUTSIDE_DRA.items()},
    }
    (role,) = [
        d
        for d in rendered(SIDECAR)
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dra-extender-viewer"
    ]
    granted = {
        (group, resource): set(rule["verbs"])
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    wanted = {(groups.get(kind, "resource.k8s.io"), resource) for kind, resource in WATCHED}
    assert set(granted) == wanted
    assert all(verbs == {"get", "list"} for verbs in granted.values())


ACCOUNTS = {SIDECAR: "dra-extender", STANDALONE: "dra-extender-standalone"}
EVICT = Request("", "pods/eviction", "create", "team-a", "trainer-0")


def test_no_deployment_may_evict_by_default() -> None:
    """The permission to evict is the make-room component's (off by default): no Role or
    ClusterRole of either render names the eviction subresource, or any subresource by ``*``."""
    for directory, account in ACCOUNTS.items():
        assert not allowed(EVICT, directory, account)
        for doc in rendered(directory):
            for rule in doc.get("rules", []) if doc["kind"] in ("Role", "ClusterRole") else []:
                assert "pods/eviction" not in rule["resources"] and "*" not in rule["resources"], rule


@pytest.mark.parametrize("directory", [SIDECAR, STANDALONE])
def test_the_make_room_component_grants_exactly_create_on_pods_eviction(
    directory: str, tmp_path: Path
) -> None:
    """Everywhere (the mover evicts in any namespace), to the deployment's own ServiceAccount,
    and nothing more: no other verb, resource or account gains a rule."""
    docs = kustomized(with_component(directory, tmp_path, "make-room"))
    account = ACCOUNTS[directory]
    before, after = rules(directory, account), rules_of(docs, account)
    assert [r for r in after if r not in before] == [
        ({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}, "")
    ]
    assert [r for r in before if r not in after] == []
    assert allows(after, EVICT) and not allows(before, EVICT)
    for verb in ("delete", "update", "patch"):
        assert not allows(after, Request("", "pods", verb, "team-a", "trainer-0"))
    # Every other subject's rules are as they were (the viewer role, people's roles).
    others = {
        s["name"]
        for d in docs
        if d["kind"].endswith("RoleBinding")
        for s in d["subjects"]
        if s["name"] != account
    }
    for subject in others:
        assert rules_of(docs, subject) == rules_of(rendered(directory), subject), subject
