"""The krew plugin (.ci/krew): its manifest follows the krew index's rules and names the archive
.ci/krew/archive builds (the same bytes every run); the launcher in it installs the package on
first use, says why when it cannot, and runs the real ``kubectl-dra``."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zlib
from pathlib import Path

import pytest
import yaml

from tests.shared import REPO

KREW = REPO / ".ci" / "krew"
MANIFEST = yaml.safe_load((KREW / "dra.yaml").read_text())
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def built(tmp_path: Path, name: str = "kubectl-dra.tar.gz") -> Path:
    out = tmp_path / name
    subprocess.run([sys.executable, str(KREW / "archive"), str(out)], check=True, capture_output=True)
    return out


@pytest.mark.skipif(
    "zlib-ng" in zlib.ZLIB_RUNTIME_VERSION, reason="zlib-ng compresses differently: the sha256 is zlib's"
)
def test_the_manifest_names_the_archive_the_script_builds(tmp_path: Path) -> None:
    first, second = built(tmp_path, "a.tar.gz"), built(tmp_path, "b.tar.gz")
    assert first.read_bytes() == second.read_bytes()  # reproducible: the sha256 can be checked
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    assert {p["sha256"] for p in MANIFEST["spec"]["platforms"]} == {digest}, (
        "run `python3 .ci/krew/archive` and put its sha256 in .ci/krew/dra.yaml"
    )
    with tarfile.open(first) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {"kubectl-dra", "constraints.txt", "LICENSE"}
    assert members["kubectl-dra"].mode & 0o111  # executable
    with tarfile.open(first) as tar:
        lock = tar.extractfile("constraints.txt")
        assert lock is not None and lock.read() == (REPO / "constraints.txt").read_bytes()
    for platform in MANIFEST["spec"]["platforms"]:
        assert {f["from"] for f in platform["files"]} == set(members)
        assert platform["bin"] in members


def test_the_manifest_follows_the_krew_index_rules() -> None:
    """The rules of krew's own validation (plugin-manifest docs): the file is named after the
    plugin, a v-prefixed semantic version (the package's), a short description of at most 50
    characters, an https homepage and archive on the version's release, a selector per platform."""
    assert MANIFEST["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert MANIFEST["kind"] == "Plugin"
    assert f"{MANIFEST['metadata']['name']}.yaml" == "dra.yaml"
    spec = MANIFEST["spec"]
    assert spec["version"] == f"v{VERSION}"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", spec["version"])
    assert 0 < len(spec["shortDescription"]) <= 50 and "kubectl" not in spec["shortDescription"].lower()
    assert spec["homepage"].startswith("https://")
    seen = set()
    for platform in spec["platforms"]:
        labels = platform["selector"]["matchLabels"]
        assert labels["os"] in ("linux", "darwin")  # a POSIX shell launcher: no Windows entry
        seen.add(tuple(sorted(labels.items())))
        assert platform["uri"].startswith("https://") and f"/{spec['version']}/" in platform["uri"]
        assert re.fullmatch(r"[0-9a-f]{64}", platform["sha256"])
    assert len(seen) == len(spec["platforms"])  # no two entries for one platform


def test_the_launcher_installs_the_plugins_version() -> None:
    launcher = (KREW / "kubectl-dra").read_text()
    assert f'version="{VERSION}"' in launcher
    assert f"dra-extender {VERSION}" in MANIFEST["spec"]["caveats"]


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    """The launcher as krew leaves it: the archive unpacked (beside the lock it installs with)."""
    folder = tmp_path / "plugin"
    with tarfile.open(built(tmp_path)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "kubectl-dra"


def run_launcher(plugin: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(plugin), *args],
        env={"PATH": os.environ["PATH"], "HOME": str(home), "KUBECTL_DRA_HOME": str(home / "k"), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def installed(tmp_path: Path) -> Path:
    """An environment as the launcher leaves it: made under a name of its own, then linked as
    the version; here its ``kubectl-dra`` and ``python`` are the suite's own."""
    base = tmp_path / "k"
    made = base / f".{VERSION}.abc123"
    (made / "bin").mkdir(parents=True)
    (made / "bin" / "kubectl-dra").symlink_to(Path(sys.executable).parent / "kubectl-dra")
    (made / "bin" / "python").symlink_to(sys.executable)
    (base / VERSION).symlink_to(made.name)
    return made


def test_an_installed_environment_runs_the_real_kubectl_dra(plugin: Path, tmp_path: Path) -> None:
    """Once installed, the launcher execs the environment's kubectl-dra with the arguments as
    given, without asking for a Python (none is needed then)."""
    installed(tmp_path)
    answer = run_launcher(plugin, tmp_path, "--version", KUBECTL_DRA_PYTHON="false")
    assert answer.returncode == 0 and answer.stdout.strip() == f"kubectl-dra {VERSION}", answer.stderr
    usage = run_launcher(plugin, tmp_path, "explain")
    assert usage.returncode == 2 and "NAMESPACE/POD" in usage.stderr


def test_an_environment_whose_python_is_gone_is_made_again(plugin: Path, tmp_path: Path) -> None:
    made = installed(tmp_path)
    (made / "bin" / "python").unlink()
    (made / "bin" / "python").symlink_to(tmp_path / "no-such-python")  # upgraded away
    answer = run_launcher(plugin, tmp_path, "--version", KUBECTL_DRA_PYTHON="false")
    assert answer.returncode == 2 and "needs Python 3.11 or newer" in answer.stderr  # it tried again


def test_without_a_recent_python_it_says_so(plugin: Path, tmp_path: Path) -> None:
    answer = run_launcher(plugin, tmp_path, "--version", KUBECTL_DRA_PYTHON="false")
    assert answer.returncode == 2 and "needs Python 3.11 or newer" in answer.stderr
    assert not (tmp_path / "k").exists()


@pytest.mark.slow
def test_first_use_installs_the_package_and_a_failed_install_leaves_nothing(
    plugin: Path, wheel: Path, tmp_path: Path
) -> None:
    """From this repository's wheel (dependencies not installed: pip's part, and minutes): the
    environment gets dra-extender at the plugin's version and the launcher runs its kubectl-dra;
    an install that fails removes the half-made environment and says so."""
    base = tmp_path / "k"
    failed = run_launcher(
        plugin,
        tmp_path,
        "--version",
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(tmp_path / "none"),
        KUBECTL_DRA_PYTHON=sys.executable,
    )
    assert failed.returncode == 2 and "could not install dra-extender" in failed.stderr
    assert list(base.iterdir()) == []  # nothing half-made is left
    first = run_launcher(
        plugin,
        tmp_path,
        "--version",
        PIP_NO_INDEX="1",
        PIP_NO_DEPS="1",
        PIP_FIND_LINKS=str(wheel.parent),
        KUBECTL_DRA_PYTHON=sys.executable,
    )
    assert f"installing dra-extender {VERSION}" in first.stderr
    home = base / VERSION
    assert home.is_symlink() and (home / "bin" / "kubectl-dra").exists()  # published whole
    # Its dependencies were left out on purpose: the real entry point ran and stopped at the first.
    assert first.returncode != 0 and "ModuleNotFoundError" in first.stderr
