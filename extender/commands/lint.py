"""``dra-extender lint``: claims and templates that name what no driver publishes, offline."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from extender.commands.arguments import max_state_bytes, offline_features, offline_version


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lint = sub.add_parser(
        "lint",
        help="claims and templates that can never match what the cluster's drivers publish",
        description="Checks ResourceClaims and ResourceClaimTemplates against the ResourceSlices and "
        "DeviceClasses of a cluster state: a missing class, a selector or constraint on an attribute "
        "or capacity no device of the class's drivers publishes (with a published name that is "
        "close), a count larger than any node offers. Hints only: kube-scheduler decides as before.",
    )
    lint.add_argument("state", nargs="+", help="the cluster: YAML/JSON files or directories (a snapshot)")
    lint.add_argument(
        "--filename",
        "-f",
        action="append",
        metavar="PATH",
        help="check the claims and templates of these files (repeatable) instead of the state's own "
        "(every claim not allocated yet, every template)",
    )
    lint.add_argument("--output", "-o", choices=("json", "text"), default="text")
    offline_version(lint)
    max_state_bytes(lint)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from extender.allocator.features import FeatureGateError
    from extender.cluster.state import KINDS
    from extender.lint import FOUND, lint, render
    from extender.statefile import StateFileError, load_objects

    try:
        features = offline_features("", args.kubernetes_version)
        cluster, problems = load_objects(args.state, max_bytes=args.max_state_bytes, kinds=KINDS)
        checked = None
        if args.filename:
            checked, more = load_objects(
                args.filename,
                max_bytes=args.max_state_bytes,
                kinds=("ResourceClaim", "ResourceClaimTemplate"),
            )
            problems += more
    except (FeatureGateError, StateFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = lint(cluster, features, checked)
    result["problems"][:0] = problems
    out.write(render(result, args.output))
    return FOUND if result["findings"] else 0
