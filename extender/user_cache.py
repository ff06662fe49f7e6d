"""A per-user cache directory for work worth keeping between runs of the command line (the I/O
edge): today the CEL parser's LALR tables, which take about a tenth of a second to build.

The directory is ``$XDG_CACHE_HOME/dra-extender`` (``~/.cache/dra-extender``), created
private (0700). Its files are loaded with pickle, so a directory another user could write to,
or one that cannot be made, is not used: the caller then builds afresh every time.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_file(name: str) -> str | None:
    """The path for ``name`` in the private cache directory, or None when there is none safe."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = Path(base) / "dra-extender"
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
    except OSError:
        return None
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        return None  # someone else could plant a file there
    return str(directory / name)
