"""The locks are whole and are what the README's commands install (issue 38)."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.deploy.locks import RUNTIME_LOCK, TEST_LOCK, closure, installed_version, pins
from tests.shared import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_test_lock_pins_everything_the_project_and_its_test_extra_reach() -> None:
    missing = closure("dra-extender", ("test",)) - set(pins(TEST_LOCK))
    assert not missing, f"not in {TEST_LOCK.name} (run: bash .ci/lock): {sorted(missing)}"


def test_the_runtime_lock_is_the_runtime_part_of_the_test_lock() -> None:
    runtime, test = pins(RUNTIME_LOCK), pins(TEST_LOCK)
    missing = closure("dra-extender") - set(runtime)
    assert not missing, f"not in {RUNTIME_LOCK.name} (run: bash .ci/lock): {sorted(missing)}"
    differ = {
        name: (version, test.get(name)) for name, version in runtime.items() if test.get(name) != version
    }
    assert not differ, f"{RUNTIME_LOCK.name} and {TEST_LOCK.name} pick differently: {differ}"


@pytest.mark.locked
def test_what_is_installed_is_the_lock() -> None:
    locked = pins(TEST_LOCK)
    differ = {
        name: (locked.get(name), installed_version(name))
        for name in closure("dra-extender", ("test",))
        if installed_version(name) != locked.get(name)
    }
    assert not differ, f"installed versions are not {TEST_LOCK.name}'s (lock, installed): {differ}"


def test_the_build_backend_is_pinned_exactly() -> None:
    (backend,) = PYPROJECT["build-system"]["requires"]
    assert re.fullmatch(r"hatchling==\d+(\.\d+)+", backend), backend


def test_the_package_metadata_keeps_ranges() -> None:
    # Users who pip install the package are not pinned by the locks: only the two exact pins
    # pyproject.toml explains (the client's models, cel-python's grammar).
    exact = sorted(r.split("==")[0] for r in PYPROJECT["project"]["dependencies"] if "==" in r)
    assert exact == ["cel-python", "kubernetes"]
