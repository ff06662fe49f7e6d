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
    for command in (explain, simulate):
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
        command = ["simulate", str(state), "-o", args.output]
        command += ["--pod", args.pod] if args.pod else []
        command += ["--node", args.node] if args.node else []
        return dra_extender([*command, *deciding_as], out)


#: What precedes the note on where the answer came from, per command.
COMMAND_NOTE = {"snapshot": "snapshot ", "explain": "answers ", "simulate": "answers "}


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
