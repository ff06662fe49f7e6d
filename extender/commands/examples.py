"""``dra-extender examples``: the example cluster state, copied out of the package."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    examples = sub.add_parser(
        "examples",
        help="copy the example cluster state into a directory (for serve --state and simulate)",
        description="Write the example cluster state (nodes, GPU and NIC slices, classes, claims, pods) "
        "into DIR, so that `dra-extender serve --state DIR` works outside a checkout.",
    )
    examples.add_argument("directory", metavar="DIR", help="where to write the files (created)")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from extender.bundled import ExamplesError, copy_examples

    try:
        copied = copy_examples(Path(args.directory))
    except (ExamplesError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.write(f"wrote {len(copied)} files; run: dra-extender serve --state {args.directory}\n")
    return 0
