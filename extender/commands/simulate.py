"""``dra-extender simulate``: what filter would answer for a cluster state, offline."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from extender.allocator.features import GATES, FeatureGateError, parse_feature_gates
from extender.commands.arguments import max_state_bytes, offline_features, offline_version, positive_seconds


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = sub.add_parser(
        "simulate",
        help="answer offline what filter would answer for a cluster state",
        description="For each pending pod (or --pod) and each node (or --node): would the pod's "
        "ResourceClaims fit, with which devices, or why not.",
    )
    sim.add_argument("state", nargs="+", help="YAML/JSON files (multi-document or kind: List) or directories")
    max_state_bytes(sim)
    sim.add_argument("--pod", help="only this pod (NAMESPACE/NAME)")
    sim.add_argument("--node", help="only this node")
    sim.add_argument("--output", "-o", choices=("json", "text"), default="text")
    sim.add_argument(
        "--feature-gates",
        default="",
        help="comma-separated NAME=true|false; locked gates may be changed here to emulate older releases "
        f"(known: {', '.join(sorted(GATES))})",
    )
    offline_version(sim)
    sim.add_argument(
        "--timeout",
        type=positive_seconds,
        default=1.0,
        help="allocation time budget per node, seconds (default 1)",
    )
    sim.add_argument(
        "--preempt",
        action="store_true",
        help="answer as serve --device-preemption does (devices kept for nominated pods; nodes where "
        "preemption may help say so) and, for a pod that fits nowhere, which lower-priority pods "
        "(spec.priority) to evict on which node, as the preempt verb answers",
    )


def run(args: argparse.Namespace, out: TextIO) -> int:
    import orjson

    from extender.cluster.state import KINDS, ClusterState
    from extender.simulate import SelectionError, SimulationRequest, render_text, simulate, unschedulable
    from extender.statefile import StateFileError, load_objects

    try:
        release = args.kubernetes_version
        features = offline_features(args.feature_gates, release)
        if not parse_feature_gates(args.feature_gates, allow_locked=True, release=release).get(
            "DynamicResourceAllocation", True
        ):
            raise FeatureGateError(
                "DynamicResourceAllocation=false would leave nothing to simulate: without it "
                "kube-scheduler ignores ResourceClaims altogether"
            )
        objects, problems = load_objects(args.state, max_bytes=args.max_state_bytes, kinds=KINDS)
    except (FeatureGateError, StateFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    state = ClusterState.from_objects(objects)
    state.problems[:0] = problems
    try:
        result = simulate(
            state,
            features,
            SimulationRequest(args.pod, args.node, args.timeout, args.preempt, release),
        )
    except SelectionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output == "json":
        out.write(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        out.write(render_text(result) + "\n")
    return 1 if unschedulable(result) else 0
