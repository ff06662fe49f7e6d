"""Where the real control plane's binaries are found, the way controller-runtime's envtest looks.

1. ``KUBEBUILDER_ASSETS``: a folder holding ``etcd``, ``kube-apiserver`` and ``kube-scheduler``
   (``kube-controller-manager`` too, for the tests that need the real resourceclaim controller);
2. setup-envtest's default folder, ``$XDG_DATA_HOME/kubebuilder-envtest/k8s/<version>-linux-amd64``
   (``~/.local/share`` when unset), newest version first;
3. ``/usr/local/kubebuilder/bin``.

``etcd`` is also taken from ``PATH`` (Debian's ``etcd-server`` installs it). Nothing here builds
or downloads a binary: where one is missing, the tests that need it are skipped with a line that
says which one and how to provide it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.realcluster.releases import SUPPORTED_MINORS, HarnessRelease, supported_range

REQUIRED = ("kube-apiserver", "kube-scheduler")
OPTIONAL = ("kube-controller-manager",)

HOW_TO_PROVIDE = (
    "put the official release binaries of one Kubernetes version (as setup-envtest downloads "
    "them: kube-apiserver, kube-scheduler, optionally kube-controller-manager, and etcd) in a "
    "folder named by KUBEBUILDER_ASSETS, or in ~/.local/share/kubebuilder-envtest/k8s/"
    "<version>-linux-amd64 or /usr/local/kubebuilder/bin; etcd may come from PATH "
    "(apt-get install etcd-server)"
)


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    kube_controller_manager: Path | None
    #: Where kube-apiserver was found.
    folder: Path
    #: ``kube-apiserver --version``'s, as (major, minor, patch).
    version: tuple[int, int, int] = (0, 0, 0)

    @property
    def release(self) -> HarnessRelease:
        """What the harness starts these binaries with (tests/realcluster/releases.py)."""
        return HarnessRelease(self.version[1])


def version_of(kube_apiserver: Path) -> tuple[int, int, int] | None:
    """``kube-apiserver --version`` ("Kubernetes v1.36.2") as numbers; None when it says otherwise."""
    try:
        out = subprocess.run(
            [str(kube_apiserver), "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"v(\d+)\.(\d+)\.(\d+)", out)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", path.name.split("-")[0]))


def candidate_folders(env: dict[str, str] | None = None) -> list[Path]:
    env = dict(os.environ) if env is None else env
    folders: list[Path] = []
    if env.get("KUBEBUILDER_ASSETS"):
        folders.append(Path(env["KUBEBUILDER_ASSETS"]))
    data_home = Path(env.get("XDG_DATA_HOME") or Path(env.get("HOME", "~")).expanduser() / ".local/share")
    envtest = data_home / "kubebuilder-envtest" / "k8s"
    if envtest.is_dir():
        folders += sorted(
            (p for p in envtest.iterdir() if p.is_dir() and p.name.endswith("-linux-amd64")),
            key=_version_key,
            reverse=True,
        )
    folders.append(Path("/usr/local/kubebuilder/bin"))
    return folders


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def for_bench() -> Binaries:
    """The binaries for a benchmark command; without them, the reason on stderr and exit status 2."""
    located = find()
    if isinstance(located, str):
        print(f"real control plane: {located}; {HOW_TO_PROVIDE}", file=sys.stderr)
        raise SystemExit(2)
    return located


def release_of_binaries() -> HarnessRelease:
    """The release of the binaries found, for a module that must choose before starting a plane
    of its own; skipped (as :func:`find` says) without them."""
    import pytest

    located = find()
    if isinstance(located, str):
        pytest.skip(skip_reason(located))
    return located.release


def skip_reason(reason: str) -> str:
    """A test's skip line for :func:`find`'s reason."""
    return f"real control plane: {reason} (see docs/real-control-plane.md)"


def find(env: dict[str, str] | None = None) -> Binaries | str:
    """The binaries, or one short line saying what is missing (:data:`HOW_TO_PROVIDE` and
    docs/real-control-plane.md say how to provide them)."""
    folders = candidate_folders(env)
    for folder in folders:
        if not all(_executable(folder / name) for name in REQUIRED):
            continue
        etcd = folder / "etcd"
        if not _executable(etcd):
            found = shutil.which("etcd", path=(env or os.environ).get("PATH"))
            if found is None:
                return f"no etcd beside {folder} nor on PATH"
            etcd = Path(found)
        version = version_of(folder / "kube-apiserver")
        if version is None:
            return f"{folder / 'kube-apiserver'} --version names no version"
        if version[0] != 1 or version[1] not in SUPPORTED_MINORS:
            return (
                f"the binaries in {folder} are v{'.'.join(map(str, version))}; the real-control-plane "
                f"harness runs {supported_range()} (tests/realcluster/releases.py)"
            )
        kcm = folder / "kube-controller-manager"
        return Binaries(
            etcd=etcd,
            kube_apiserver=folder / "kube-apiserver",
            kube_scheduler=folder / "kube-scheduler",
            kube_controller_manager=kcm if _executable(kcm) else None,
            folder=folder,
            version=version,
        )
    looked = ", ".join(str(f) for f in folders)
    return f"no {' and '.join(REQUIRED)} found (looked in {looked})"
