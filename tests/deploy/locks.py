"""The project's locks (``constraints-test.txt``, ``constraints.txt``) and what is installed.

``python -m tests.deploy.locks`` prints the installed packages whose versions differ from the
test lock (``.ci/newest`` runs it before the suite, to show the drift it tests).
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, distribution, distributions
from pathlib import Path

from packaging.requirements import Requirement

from tests.shared import REPO

TEST_LOCK = REPO / "constraints-test.txt"
RUNTIME_LOCK = REPO / "constraints.txt"
#: A pin as uv writes it: ``name==version``, then markers after `` ; ``.
PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;]+)(?:\s*;\s*(?P<marker>.+))?")


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lock: Path) -> dict[str, str]:
    """The lock's pins, name -> version. Every line that is not a comment must be a pin."""
    found: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = PIN.fullmatch(line.strip())
        assert match, f"{lock.name}: not a pin: {line!r}"
        found[normalized(match["name"])] = match["version"]
    return found


def closure(project: str, extras: tuple[str, ...] = ()) -> set[str]:
    """The installed distributions ``project`` (with ``extras``) needs on this machine, itself
    left out: its requirements, theirs, and so on, with their markers evaluated here."""
    reached: set[str] = set()
    todo: list[tuple[str, tuple[str, ...]]] = [(project, extras)]
    while todo:
        name, wanted = todo.pop()
        for text in distribution(name).requires or []:
            requirement = Requirement(text)
            environments = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if requirement.marker and not any(requirement.marker.evaluate(e) for e in environments):
                continue
            key = normalized(requirement.name)
            if key not in reached:
                reached.add(key)
                todo.append((requirement.name, tuple(sorted(requirement.extras))))
    reached.discard(normalized(project))
    return reached


def installed_version(name: str) -> str | None:
    try:
        return distribution(name).version
    except PackageNotFoundError:
        return None


def drift(lock: Path = TEST_LOCK) -> list[str]:
    """One line per installed package whose version is not the lock's."""
    locked = pins(lock)
    lines = []
    for dist in distributions():
        name = normalized(dist.metadata["Name"])
        if name not in ("pip", "setuptools", "dra-extender") and locked.get(name) != dist.version:
            lines.append(f"  {name}: {locked.get(name, 'not in the lock')} -> {dist.version}")
    return sorted(lines)


def held_back() -> list[str]:
    """One line per exact pin of pyproject.toml whose newest release on the index is another
    (asks the index: for ``.ci/newest``, never for a test)."""
    import subprocess
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = []
    for requirement in map(Requirement, project["dependencies"]):
        pinned = [s.version for s in requirement.specifier if s.operator == "=="]
        if not pinned:
            continue
        answer = subprocess.run(
            [sys.executable, "-m", "pip", "index", "versions", requirement.name],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        newest = re.search(rf"^{re.escape(requirement.name)} \(([^)]+)\)", answer, re.M | re.I)
        if newest is None:
            lines.append(f"  {requirement.name}=={pinned[0]}: the index did not answer")
        elif newest[1] != pinned[0]:
            lines.append(
                f"  {requirement.name}=={pinned[0]}: {newest[1]} is out (pinned on purpose: see pyproject.toml)"
            )
    return lines


if __name__ == "__main__":
    changed = drift()
    print(f"installed versions that differ from {TEST_LOCK.name}:")
    print("\n".join(changed) or "  none: the lock is what is installed")
    print("exact pins of pyproject.toml behind the newest release (not tested here):")
    print("\n".join(held_back()) or "  none")
    sys.exit(0)
