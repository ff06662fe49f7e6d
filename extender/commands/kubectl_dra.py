"""``kubectl dra`` (the ``kubectl-dra`` executable kubectl finds on the PATH): the extender's
answers from a laptop with a kubeconfig, no access to the pod network needed.

This first form computes from the objects the user's own credentials can list (the kinds the
extender reads, :mod:`extender.cluster.discovery`), and says so: ``snapshot`` writes them in the
state-file format that ``dra-extender simulate`` and ``serve --state`` read, ``explain`` and
``simulate`` decide on them as the extender would (as the API server's Kubernetes release,
unless ``--kubernetes-version`` says otherwise). What only a running extender knows (binds in
flight, devices held after prioritize) is not in such a snapshot.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import orjson
import yaml

from extender import __version__

COMPUTED = "computed from the objects your credentials can list (the extender itself was not asked)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl dra",
        description="Dynamic Resource Allocation as dra-extender decides it, from kubectl.",
        epilog="Exit codes: 0 success; 1 (explain, simulate) a pod fits on no node; 2 usage, "
        "credentials or API errors.",
    )
    parser.add_argument("--version", action="version", version=f"kubectl-dra {__version__}")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context to use (default: its current one)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    snapshot = sub.add_parser(
        "snapshot",
        help="write the objects the extender decides from, as a state file",
        description="Every Node, Pod, ResourceSlice, DeviceClass, ResourceClaim(Template), "
        "DeviceTaintRule, PodDisruptionBudget and PodGroup your credentials can list, as one "
        "kind: List, for dra-extender simulate and serve --state.",
    )
    snapshot.add_argument("--output", "-o", required=True, metavar="FILE", help="FILE.json or FILE.yaml")
    explain = sub.add_parser(
        "explain",
        help="per node: does the pod fit, with which devices, or why not",
        description="As the extender's filter would answer now, on the objects listed.",
    )
    explain.add_argument("pod", metavar="NAMESPACE/POD", help="the pod (NAME alone: namespace default)")
    explain.add_argument("--output", "-o", choices=("json", "text"), default="text")
    simulate = sub.add_parser(
        "simulate",
        help="decide every pending pod (or one) on the objects listed",
        description="dra-extender simulate on a snapshot taken now.",
    )
    simulate.add_argument("--pod", help="only this pod (NAMESPACE/NAME)")
    simulate.add_argument("--node", help="only this node")
    simulate.add_argument("--output", "-o", choices=("json", "text"), default="text")
    capacity = sub.add_parser(
        "capacity",
        help="devices per node and class: total, allocated, free; how many pods of a shape fit",
        description="As the extender's /debug/capacity, on the objects listed.",
    )
    capacity.add_argument("--class", dest="device_class", metavar="CLASS", help="one shape: this DeviceClass")
    capacity.add_argument(
        "--count", type=_positive, metavar="N", help="with --class: N devices per pod (default 1)"
    )
    capacity.add_argument("--output", "-o", choices=("json", "text"), default="text")
    pending = sub.add_parser(
        "pending",
        help="pods waiting for devices: where each would fit now, or why nowhere",
        description="Every pod not bound yet that asks for devices, decided as simulate does.",
    )
    pending.add_argument("--output", "-o", choices=("json", "text"), default="text")
    for command in (explain, simulate, capacity, pending):
        command.add_argument(
            "--kubernetes-version",
            metavar="VERSION",
            help="decide as this release (default: the API server's)",
        )
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    args = _parser().parse_args(argv)
    out = out or sys.stdout
    from extender.cluster.api import ClusterAPIError
    from extender.cluster.kube import KubeConfigError

    try:
        objects, version = _listed(args.kubeconfig, args.context)
    except (KubeConfigError, ClusterAPIError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"kubectl dra: {COMMAND_NOTE[args.command]}{COMPUTED}", file=sys.stderr)
    if args.command == "snapshot":
        _write(Path(args.output), objects)
        print(f"kubectl dra: {len(objects)} objects written to {args.output}", file=sys.stderr)
        return 0
    from extender.cli import main as dra_extender

    with tempfile.TemporaryDirectory(prefix="kubectl-dra-") as folder:
        state = Path(folder) / "snapshot.json"
        _write(state, objects)
        release = args.kubernetes_version or version
        deciding_as = ["--kubernetes-version", release] if release else []
        if args.command == "explain":
            return dra_extender(
                ["explain", args.pod, "--state", str(state), "-o", args.output, *deciding_as], out
            )
        if args.command == "capacity":
            return _capacity(state, release, args.device_class, args.count, args.output, out)
        if args.command == "pending":
            return _pending(state, deciding_as, args.output, out)
        command = ["simulate", str(state), "-o", args.output]
        command += ["--pod", args.pod] if args.pod else []
        command += ["--node", args.node] if args.node else []
        return dra_extender([*command, *deciding_as], out)


#: What precedes the note on where the answer came from, per command.
COMMAND_NOTE = {
    "snapshot": "snapshot ",
    "explain": "answers ",
    "simulate": "answers ",
    "capacity": "answers ",
    "pending": "answers ",
}


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a positive integer, not {text!r}")
    return int(text)


def _capacity(
    state: Path, release: str | None, device_class: str | None, count: int | None, output: str, out: TextIO
) -> int:
    from extender.commands.arguments import kubernetes_version
    from extender.explain import engine_from_state
    from extender.service import debug

    if count is not None and device_class is None:
        print("error: --count goes with --class", file=sys.stderr)
        return 2
    engine = engine_from_state([str(state)], release=kubernetes_version(release) if release else None)
    view = debug.capacity_view(engine, device_class, count)
    out.write(_rendered("capacity", view, output))
    return 0


def _pending(state: Path, deciding_as: list[str], output: str, out: TextIO) -> int:
    """simulate's answer for every pending pod, a line each: the nodes it fits, or the reason
    on the nodes it fits nowhere (the most common one first)."""
    import io

    from extender.cli import main as dra_extender

    answer = io.StringIO()
    code = dra_extender(["simulate", str(state), "-o", "json", *deciding_as], answer)
    if code not in (0, 1):
        return code
    pods: list[tuple[str, list[str], dict[str, int]]] = []  # (pod, nodes it fits, reasons counted)
    for pod in orjson.loads(answer.getvalue())["pods"]:
        nodes = pod.get("nodes", {})
        fits = [name for name, node in nodes.items() if node.get("fits")]
        reasons: dict[str, int] = {}
        for node in nodes.values():
            if not node.get("fits"):
                why = node.get("error") or node.get("reason") or "does not fit"
                reasons[why] = reasons.get(why, 0) + 1
        ranked = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))
        pods.append((f"{pod['namespace']}/{pod['name']}", fits, ranked))
    if output == "json":
        listed = [{"pod": name, "fitsOn": fits, "reasons": why} for name, fits, why in pods]
        out.write(orjson.dumps({"pods": listed}, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for name, fits, why in pods:
            if fits:
                line = f"fits on {len(fits)} node(s): {', '.join(fits[:5])}" + (
                    " ..." if len(fits) > 5 else ""
                )
            else:
                reason, count = next(iter(why.items()), ("no node", 0))
                line = f"fits nowhere ({count} node(s): {reason})"
            out.write(f"{name}  {line}\n")
        if not pods:
            out.write("no pending pod asks for devices\n")
    return 1 if any(not fits for _, fits, _ in pods) else 0


def _rendered(view: str, data: dict[str, Any], output: str) -> str:
    from extender.service import debug

    if output == "json":
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    return debug.render_text(view, data)


def _listed(kubeconfig: str | None, context: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """Every object of the kinds the extender reads that these credentials can list (a warning
    on stderr for each kind refused), and the API server's release as "1.N" if it says."""
    from kubernetes import client as k8s

    from extender.cluster.discovery import discover_once, list_all, watched
    from extender.cluster.kube import RawKube, load_user_configuration

    raw = RawKube(k8s.ApiClient(load_user_configuration(kubeconfig, context)))
    paths, served = discover_once(raw)
    paths = dataclasses.replace(paths, pod_groups=raw.pod_group_version())
    listing = list_all(raw, watched(paths, served, device_taint_rules=True), paths)
    for kind, why in listing.refused.items():
        print(f"kubectl dra: warning: {kind} objects not listed: {why}", file=sys.stderr)
    server = raw.server_version()
    return listing.objects, f"{server[0]}.{server[1]}" if server is not None else None


def _write(path: Path, objects: list[dict[str, Any]]) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    if path.suffix in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    else:
        path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    raise SystemExit(main())
