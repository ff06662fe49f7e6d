"""Where the project's shared sample cases live (``../shared`` beside the repository)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The shared/ folder; its absence is an error, never a reason to skip conformance."""
    configured = os.environ.get("DRA_SHARED_DIR")
    path = Path(configured) if configured else REPO.parent / "shared"
    if not path.is_dir():
        raise FileNotFoundError(
            f"shared sample cases not found at {path}; clone next to shared/ or set DRA_SHARED_DIR"
        )
    return path
