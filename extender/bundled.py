"""The example cluster state shipped with the package (``dra-extender examples DIR``).

A wheel carries ``examples/`` as ``extender/examples``; a checkout (editable install) reads the
repository's ``examples/`` directly.
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path


class ExamplesError(Exception):
    pass


def examples_source() -> Path:
    packaged = resources.files("extender") / "examples"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[1] / "examples"
    if checkout.is_dir():
        return checkout
    raise ExamplesError("this installation carries no examples")


def copy_examples(target: Path) -> list[Path]:
    """Copy the example state files into ``target`` (created; existing files are not replaced)."""
    source = examples_source()
    if target.exists() and not target.is_dir():
        raise ExamplesError(
            f"{target}: exists and is not a directory; give a directory to write the examples into"
        )
    copied = []
    for path in sorted(
        p for p in source.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml", ".json")
    ):
        destination = target / path.relative_to(source)
        if destination.exists():
            raise ExamplesError(f"{destination} exists: not replaced")
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, destination)
        copied.append(destination)
    return copied
