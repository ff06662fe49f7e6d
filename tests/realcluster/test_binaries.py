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


#: name -> (the binaries' version, found)
VERSIONS: dict[str, tuple[str, bool]] = {
    "the oldest supported": ("1.34.9", True),
    "1.35": ("1.35.6", True),
    "the reference": ("1.36.3", True),
    "the current release": ("1.37.0", True),
    "the next, planned": ("1.38.0", True),
    "too old": ("1.33.4", False),
    "unknown and newer": ("1.39.0", False),
    "another major": ("2.36.0", False),
}


@pytest.mark.parametrize("case", list(VERSIONS))
def test_every_supported_release_is_used_and_others_are_named(tmp_path: Path, case: str) -> None:
    version, found = VERSIONS[case]
    folder = fake_folder(tmp_path, version)
    located = binaries.find({"KUBEBUILDER_ASSETS": str(folder), "HOME": str(tmp_path), "PATH": ""})
    if found:
        assert isinstance(located, binaries.Binaries), located
        assert located.version == tuple(int(n) for n in version.split("."))
        assert located.release.minor == located.version[1]
    else:
        assert isinstance(located, str)
        assert f"are v{version}" in located and "runs 1.34 to 1.38" in located, located


def test_no_binaries_is_one_short_line(tmp_path: Path) -> None:
    located = binaries.find({"HOME": str(tmp_path), "PATH": ""})
    assert isinstance(located, str)
    assert located.startswith("no kube-apiserver and kube-scheduler found (looked in "), located
