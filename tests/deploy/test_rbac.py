"""The RBAC rules in manifests/ cover every API call the service makes (from the fake's request log)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.deploy.test_rendered import SIDECAR, STANDALONE, rendered
from tests.fakeapi.server import FakeApiServer
from tests.integration.servers import cli_server
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import EXAMPLE_NODES, TRAINER, args_names, binding
from tests.shared import REPO

Call = tuple[str, str, str, str]  # (apiGroup, resource[/subresource], verb, namespace)


def api_call(method: str, target: str) -> Call:
    parsed = urllib.parse.urlsplit(target)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    parts = [p for p in parsed.path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {
        "GET": "get" if named else ("watch" if query.get("watch", "").lower() in ("1", "true") else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }[method]
    return (group, resource, verb, namespace)


def rules(directory: str = SIDECAR, account: str = "dra-extender") -> list[tuple[dict[str, Any], str]]:
    """(rule, namespace) pairs: '' for cluster-wide rules bound to the ServiceAccount, as rendered."""
    docs = list(rendered(directory))
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


def allowed(call: Call, directory: str = SIDECAR, account: str = "dra-extender") -> bool:
    group, resource, verb, namespace = call
    for rule, scope in rules(directory, account):
        if scope and scope != namespace:
            continue
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
            return True
    return False


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
    # Discovery needs no RBAC rule (system:discovery covers every authenticated user).
    calls = {api_call(method, target) for method, target, _ in fake.requests if not discovery(target)}
    verbs = {(c[1], c[2]) for c in calls}
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


def discovery(target: str) -> bool:
    path = urllib.parse.urlsplit(target).path.strip("/").split("/")
    # /version, like discovery, is open to every client (ClusterRole system:public-info-viewer).
    return path in (["api"], ["apis"], ["version"]) or (
        path[0] == "apis" and len(path) <= 3 and path[-1] in ("resource.k8s.io", "v1", "v1beta1", "v1beta2")
    )


def test_the_checker_can_say_no() -> None:
    assert allowed(("", "pods/binding", "create", "default"))
    assert not allowed(("", "secrets", "get", "default"))
    assert not allowed(("resource.k8s.io", "resourceclaims", "deletecollection", "default"))
    assert not allowed(("", "pods", "update", "default"))
    assert not allowed(("coordination.k8s.io", "leases", "update", "other-namespace"))


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
