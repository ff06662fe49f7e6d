"""The wheel: only the extender package, with the examples and the license (issue 14)."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from extender.bundled import ExamplesError, copy_examples
from extender.cli import main
from tests.shared import REPO


def test_the_wheel_installs_only_the_extender_package_with_examples_and_license(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    distribution, version = wheel.name.split("-")[:2]
    assert {n.split("/")[0] for n in names} == {"extender", f"{distribution}-{version}.dist-info"}
    assert "extender/examples/cluster.yaml" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(metadata).decode()


def test_an_unpacked_wheel_finds_its_own_examples(wheel: Path, tmp_path: Path) -> None:
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    found = subprocess.run(
        [sys.executable, "-c", "from extender.bundled import examples_source; print(examples_source())"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found == str(tmp_path / "site" / "extender" / "examples")


def test_examples_command_copies_the_state_and_never_overwrites(tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(["examples", str(tmp_path / "state")], out) == 0
    assert (tmp_path / "state" / "cluster.yaml").read_bytes() == (
        REPO / "examples" / "cluster.yaml"
    ).read_bytes()
    assert f"dra-extender serve --state {tmp_path / 'state'}" in out.getvalue()
    with pytest.raises(ExamplesError, match="not replaced"):
        copy_examples(tmp_path / "state")
    assert main(["examples", str(tmp_path / "state")], io.StringIO()) == 2


def test_the_license_file_is_apache_2() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
