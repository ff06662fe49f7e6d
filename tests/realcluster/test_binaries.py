"""Finding the real control plane's binaries: a folder of a version the harness is not written
for is named in the skip's reason, instead of failing obscurely later (a flag that version lacks)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.realcluster import binaries


def fake_folder(root: Path, version: str) -> Path:
    """Executables that answer ``--version`` as that release's kube-apiserver does."""
    folder = root / f"{version}-linux-amd64"
    folder.mkdir(parents=True)
    for name in ("kube-apiserver", "kube-scheduler", "etcd"):
        tool = folder / name
        tool.write_text(f"#!/bin/sh\necho 'Kubernetes v{version}'\n")
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    return folder


@pytest.mark.parametrize(
    ("version", "found"),
    [("1.36.2", True), ("1.37.0", False), ("1.35.4", False)],
    ids=["known", "newer", "older"],
)
def test_only_a_version_the_harness_knows_is_used(tmp_path: Path, version: str, found: bool) -> None:
    folder = fake_folder(tmp_path, version)
    located = binaries.find({"KUBEBUILDER_ASSETS": str(folder), "HOME": str(tmp_path), "PATH": ""})
    if found:
        assert isinstance(located, binaries.Binaries) and located.version == (1, 36, 2)
    else:
        assert isinstance(located, str)
        assert f"are v{version}" in located and "written for 1.36" in located, located
