"""Every manifest validates offline against the Kubernetes OpenAPI schemas (oldest and newest supported)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.shared import REPO

#: Kubernetes versions with resource.k8s.io/v1: the oldest we support, and the newest.
VERSIONS = ("1.34.0", "1.37.0")
#: manifests/monitoring/ holds Prometheus Operator objects (CRDs, no schema here): checked by
#: kustomize, promtool and tests/deploy/test_monitoring.py instead.
FILES = sorted(f for f in (REPO / "manifests").glob("**/*.yaml") if f.parent.name != "monitoring") + sorted(
    (REPO / "examples" / "workload").glob("*.yaml")
)


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


CASES = [
    (f, i, v)
    for f in FILES
    if f.name != "kustomization.yaml"
    for i, _ in enumerate(documents(f))
    for v in VERSIONS
]


@pytest.mark.parametrize(
    ("path", "index", "version"), CASES, ids=[f"{p.parent.name}/{p.name}#{i}@{v}" for p, i, v in CASES]
)
def test_manifest_is_valid(path: Path, index: int, version: str) -> None:
    doc = documents(path)[index]
    kubernetes_validate.validate(doc, version, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    for directory in (
        REPO / "manifests",
        REPO / "manifests" / "standalone",
        REPO / "manifests" / "common",
        REPO / "manifests" / "monitoring",
    ):
        kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
        listed = {r for r in kustomization["resources"] if r.endswith(".yaml")}
        assert listed == {f.name for f in directory.glob("*.yaml") if f.name != "kustomization.yaml"}


def test_an_unknown_field_would_fail() -> None:
    doc = documents(REPO / "manifests" / "service.yaml")[0]
    doc["spec"]["portz"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, VERSIONS[0], strict=True)


def test_deployment_runs_the_scheduler_with_the_configmap_and_a_hardened_extender() -> None:
    deployment = documents(REPO / "manifests" / "deployment.yaml")[0]
    pod = deployment["spec"]["template"]["spec"]
    containers = {c["name"]: c for c in pod["containers"]}
    scheduler, extender = containers["kube-scheduler"], containers["dra-extender"]
    config_flag = next(a for a in scheduler["command"] if a.startswith("--config="))
    mount = scheduler["volumeMounts"][0]["mountPath"]
    assert config_flag == f"--config={mount}/config.yaml"
    generated = yaml.safe_load((REPO / "scheduler-config" / "kustomization.yaml").read_text())
    assert pod["volumes"][0]["configMap"]["name"] == generated["configMapGenerator"][0]["name"]
    assert deployment["spec"]["replicas"] == 2 and pod["affinity"]["podAntiAffinity"]
    assert "--leader-elect" not in extender["args"]  # see the comment in deployment.yaml
    for c in (scheduler, extender):
        assert c["securityContext"]["readOnlyRootFilesystem"] and c["securityContext"]["capabilities"][
            "drop"
        ] == ["ALL"]
        assert c["livenessProbe"] and c["readinessProbe"] and c["resources"]["requests"]
    assert extender["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["securityContext"]["runAsNonRoot"]
