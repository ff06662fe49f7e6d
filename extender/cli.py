"""The ``dra-extender`` command line: one place that builds everything from flags."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TextIO

import orjson

from extender.allocator import FeatureGateError, Features, parse_feature_gates
from extender.allocator.features import GATES
from extender.cluster.state import ClusterState
from extender.simulate import SelectionError, SimulationRequest, render_text, simulate
from extender.statefile import StateFileError, load_objects


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dra-extender", description="Kubernetes DRA for any kube-scheduler."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser(
        "simulate",
        help="answer offline what filter would answer for a cluster state",
        description="For each pending pod (or --pod) and each node (or --node): would the pod's "
        "ResourceClaims fit, with which devices, or why not.",
    )
    sim.add_argument("state", nargs="+", help="YAML/JSON files (multi-document or kind: List) or directories")
    sim.add_argument("--pod", help="only this pod (NAMESPACE/NAME)")
    sim.add_argument("--node", help="only this node")
    sim.add_argument("--output", "-o", choices=("json", "text"), default="text")
    sim.add_argument(
        "--feature-gates",
        default="",
        help="comma-separated NAME=true|false; locked gates may be changed here to emulate older releases "
        f"(known: {', '.join(sorted(GATES))})",
    )
    sim.add_argument("--timeout", type=float, default=1.0, help="allocation time budget per node, seconds")
    return parser


def _features(text: str) -> Features:
    gates = parse_feature_gates(text, allow_locked=True)
    for name, value in gates.items():
        spec = GATES[name]
        if spec.locked and value != spec.default:
            print(
                f"warning: feature gate {name} is locked to {str(spec.default).lower()} in Kubernetes 1.37; "
                "emulating an older release",
                file=sys.stderr,
            )
    return Features.from_gates(gates)


def run_simulate(args: argparse.Namespace, out: TextIO) -> int:
    try:
        features = _features(args.feature_gates)
        objects, problems = load_objects(args.state)
    except (FeatureGateError, StateFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    state = ClusterState.from_objects(objects)
    state.problems[:0] = problems
    try:
        result = simulate(state, features, SimulationRequest(args.pod, args.node, args.timeout))
    except SelectionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output == "json":
        out.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(render_text(result) + "\n")
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "simulate":
        return run_simulate(args, out or sys.stdout)
    return 2  # pragma: no cover - argparse enforces the subcommands


if __name__ == "__main__":
    raise SystemExit(main())
