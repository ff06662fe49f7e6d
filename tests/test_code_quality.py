"""The code stays ruff-clean and mypy-clean (strict): checked as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.shared import REPO


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, check=False
    )


def test_ruff_lint() -> None:
    result = run("ruff", "check", "extender", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format() -> None:
    result = run("ruff", "format", "--check", "extender", "tests", "bench")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def _imports_of_package(package: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (anywhere in it, TYPE_CHECKING too).

    ``from a.b import c`` counts as importing ``a.b.c`` when that is a module, else ``a.b``.
    """
    import ast

    root = package.parent
    modules = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in package.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module not in modules:
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    found.add(sub if sub in modules else node.module)
        graph[name] = found - {name}
    return graph


def test_no_import_circles_in_the_package() -> None:
    """Every module imports only lower layers: no module reaches itself through its imports
    (a package's ``__init__`` re-exporting its own modules is the one allowed edge down)."""
    graph = _imports_of_package(REPO / "extender")

    def below(module: str, target: str) -> bool:
        # A package importing its own submodules is how re-exports work: not a circle.
        return target.startswith(module + ".")

    circles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            module, path = stack.pop()
            for nxt in graph.get(module, ()):
                if below(module, nxt) and module == start:
                    continue
                if nxt == start:
                    circles.append(" -> ".join([*path, nxt]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert circles == []


def _lengths(folder: Path) -> dict[str, int]:
    return {p.relative_to(REPO).as_posix(): len(p.read_text().splitlines()) for p in folder.rglob("*.py")}


def test_no_module_is_too_long_to_read() -> None:
    assert {path: n for path, n in _lengths(REPO / "extender").items() if n > 700} == {}


#: Where modules are cut along concepts at about 500 lines: a longer one says in its docstring
#: why its concept needs more ("Longer than the other modules, as one concept: ...").
CUT_AT_500 = ("extender/scheduling", "extender/commands")


def test_long_modules_of_the_scheduling_core_say_why() -> None:
    import ast

    unexplained = []
    for folder in CUT_AT_500:
        for path, n in _lengths(REPO / folder).items():
            if n <= 500:
                continue
            doc = ast.get_docstring(ast.parse((REPO / path).read_text())) or ""
            if "Longer than the other modules" not in doc:
                unexplained.append(f"{path} ({n} lines)")
    assert unexplained == []


#: The scheduling core's rooms and what each may never reach, directly or through the package's
#: other modules (extender/scheduling/__init__.py and each room's docstring say why).
S = "extender.scheduling"
NEVER_REACHES = {
    # Deciding is pure: a snapshot in, answers out.
    f"{S}.decide": ("extender.cluster.api", f"{S}.preempt", f"{S}.inflight", f"{S}.write", f"{S}.engine"),
    # Preempting is pure too, and decides only through the decide room.
    f"{S}.preempt": ("extender.cluster.api", f"{S}.inflight", f"{S}.write", f"{S}.engine"),
    # The tracker and the snapshots over it hold in-flight state; they write nothing.
    f"{S}.inflight": ("extender.cluster.api", f"{S}.write", f"{S}.engine"),
    # The write room is called by the verbs, never the other way round.
    f"{S}.write": (f"{S}.engine", f"{S}.assembly"),
}


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        for nxt in graph.get(stack.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _in(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


def test_each_scheduling_room_reaches_only_what_it_may() -> None:
    graph = _imports_of_package(REPO / "extender")
    broken = []
    for room, never in NEVER_REACHES.items():
        members = [m for m in graph if _in(m, room)]
        assert members, f"no modules in {room}"
        for module in members:
            for reached in _reach(graph, module):
                bad = next((n for n in never if _in(reached, n)), None)
                if bad is not None:
                    broken.append(f"{module} reaches {reached}")
    assert broken == []
