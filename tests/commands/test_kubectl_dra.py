"""``kubectl dra``'s command line (extender/commands/kubectl_dra.py): bad input is refused with
a clear error and exit code 2, before any request. What it answers against a real API server:
tests/realcluster/test_kubectl_dra.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from extender.commands.kubectl_dra import main

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
    assert capsys.readouterr().err.startswith("error: GET /apis/resource.k8s.io")
