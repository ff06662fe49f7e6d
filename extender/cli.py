"""The ``dra-extender`` command line: the root parser, and the subcommands of
:mod:`extender.commands` (each with its flags beside what it runs)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from extender.commands import examples, explain, lint, serve, simulate

# The commands import what they need when they run: ``--help`` and ``--version`` answer without
# the allocator, the Kubernetes client or the server stack (a test runs -X importtime on them).


class _Version(argparse.Action):
    """``--version``, reading the installed version only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from extender import __version__

        print(f"{parser.prog} {__version__}")
        parser.exit()


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            found: argparse.ArgumentParser = action.choices[command]
            return found
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dra-extender",
        description="Kubernetes DRA for any kube-scheduler.",
        epilog="Exit codes: 0 success; 1 (simulate, explain) a pod fits on no node, (lint) hints found; "
        "2 usage or input errors.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (simulate, explain, lint, examples, serve):
        command.add(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # As the subcommand's own error, with its usage (argparse reports them at the top level).
        (_subparser(parser, args.command) or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help(out or sys.stdout)
        return 2
    if args.command == "simulate":
        return simulate.run(args, out or sys.stdout)
    if args.command == "serve":
        return serve.run(args)
    if args.command == "explain":
        if args.pod is None:
            # ``explain --state DIR POD``: --state takes every word after it, the pod included.
            if not (args.state and len(args.state) > 1) or os.path.exists(args.state[-1]):
                parser.error("explain: the following arguments are required: NAMESPACE/POD")
            args.pod = args.state.pop()
        return explain.run(args, out or sys.stdout)
    if args.command == "lint":
        return lint.run(args, out or sys.stdout)
    if args.command == "examples":
        return examples.run(args, out or sys.stdout)
    return 2  # pragma: no cover - argparse enforces the subcommands


if __name__ == "__main__":
    raise SystemExit(main())
