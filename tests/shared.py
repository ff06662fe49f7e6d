"""Where the shared sample cases live: a copy in tests/shared_cases/, and ../shared when present."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPY = REPO / "tests" / "shared_cases"


def shared_dir() -> Path | None:
    """The shared/ folder beside the repository (or ``$DRA_SHARED_DIR``), if there is one."""
    configured = os.environ.get("DRA_SHARED_DIR")
    path = Path(configured) if configured else REPO.parent / "shared"
    return path if path.is_dir() else None


def case_files(pattern: str) -> list[tuple[str, Path]]:
    """(label, path) of every sample-case file matching ``pattern`` (relative, e.g. ``cel/*.yaml``).

    The copy always runs; a file of ../shared runs too when the copy lacks it or differs from it,
    so CI follows updates of shared/ and a fresh clone still has every case.
    """
    files = [(f"copy/{p.relative_to(COPY)}", p) for p in sorted(COPY.glob(pattern))]
    if not files:
        raise FileNotFoundError(f"no sample cases match {COPY / pattern}")
    outside = shared_dir()
    if outside is not None:
        for path in sorted(outside.glob(pattern)):
            mine = COPY / path.relative_to(outside)
            if not mine.is_file() or mine.read_bytes() != path.read_bytes():
                files.append((f"shared/{path.relative_to(outside)}", path))
    return files
