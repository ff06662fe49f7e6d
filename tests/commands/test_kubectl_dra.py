"""``kubectl dra``'s command line (extender/commands/kubectl_dra.py): bad input is refused with
a clear error and exit code 2, before any request. What it answers against a real API server:
tests/realcluster/test_kubectl_dra.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from extender.commands.kubectl_dra import main
from extender.commands.kubectl_dra_pending import asks_for_devices, pending_rows

# (case, arguments, what stderr says)
REFUSED: list[tuple[str, list[str], str]] = [
    ("no command", [], "the following arguments are required: COMMAND"),
    ("snapshot without a file", ["snapshot"], "the following arguments are required: --output/-o"),
    ("explain without a pod", ["explain"], "the following arguments are required: NAMESPACE/POD"),
    ("an unknown output", ["explain", "p", "-o", "wide"], "invalid choice: 'wide'"),
    (
        "a count that is not a positive integer",
        ["capacity", "--class", "gpu", "--count", "0"],
        "a positive integer",
    ),
    ("a count without a class", ["capacity", "--count", "2"], "--count goes with --class"),
    ("a release the extender does not know", ["simulate", "--kubernetes-version", "1.33"], "not supported"),
]


@pytest.mark.parametrize(("case", "args", "says"), REFUSED, ids=[c[0] for c in REFUSED])
def test_bad_command_lines_are_refused(
    case: str, args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


def test_an_unreadable_kubeconfig_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    assert main(["--kubeconfig", str(broken), "snapshot", "-o", str(tmp_path / "s.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: kubeconfig {broken}: ")
    assert not (tmp_path / "s.json").exists()


def test_a_server_that_does_not_answer_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    assert main(["--kubeconfig", str(kubeconfig), "explain", "default/p"]) == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith("error: the API server did not answer: GET /api/v1/namespaces/dra-extender/services/")
    )
    assert main(["--kubeconfig", str(kubeconfig), "--source", "objects", "explain", "default/p"]) == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .startswith("error: API discovery of resource.k8s.io: GET /apis/resource.k8s.io")
    )


def test_a_kubeconfig_that_is_not_yaml_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [\n")
    assert main(["--kubeconfig", str(broken), "pending"]) == 2
    assert capsys.readouterr().err.startswith(f"error: kubeconfig {broken}: ")


# (case, the pod's spec, extended resources a DeviceClass stands for, asks for devices?)
ASKING: list[tuple[str, dict[str, Any], frozenset[str], bool]] = [
    ("a claim", {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}, frozenset(), True),
    (
        "CPU only",
        {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
        frozenset(),
        False,
    ),
    (
        "an extended resource a class stands for",
        {"containers": [{"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}]},
        frozenset({"example.com/gpu"}),
        True,
    ),
    (
        "an extended resource of a device plugin",
        {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        frozenset({"example.com/gpu"}),
        False,
    ),
    (
        "in an init container",
        {
            "containers": [],
            "initContainers": [{"name": "i", "resources": {"requests": {"example.com/gpu": "1"}}}],
        },
        frozenset({"example.com/gpu"}),
        True,
    ),
]


@pytest.mark.parametrize(("case", "spec", "extended", "asks"), ASKING, ids=[c[0] for c in ASKING])
def test_which_pods_ask_for_devices(
    case: str, spec: dict[str, Any], extended: frozenset[str], asks: bool
) -> None:
    assert asks_for_devices({"spec": spec}, extended) is asks


def test_pending_rows_read_simulate_as_kube_scheduler_would() -> None:
    def node(fits: bool, reason: str | None = None, error: str | None = None) -> dict[str, Any]:
        return {"fits": fits, "reason": reason, "error": error}

    result = {
        "pods": [
            {"namespace": "a", "name": "fits", "nodes": {"n1": node(True), "n2": node(False, "full")}},
            {
                "namespace": "a",
                "name": "nowhere",
                "nodes": {"n1": node(False, "x"), "n2": node(False, "y"), "n3": node(False, "y")},
            },
            {
                "namespace": "a",
                "name": "error",
                "nodes": {"n1": node(True), "n2": node(False, None, "CEL error")},
            },
            {"namespace": "a", "name": "cpu-only", "nodes": {"n1": node(True)}},
        ]
    }
    rows = pending_rows(result, {("a", "fits"), ("a", "nowhere"), ("a", "error")})
    assert rows == [
        ("a/fits", ["n1"], None, {"full": 1}),
        ("a/nowhere", [], None, {"y": 2, "x": 1}),  # the commonest reason first
        ("a/error", ["n1"], "CEL error", {}),  # a node's error ends the attempt
    ]
