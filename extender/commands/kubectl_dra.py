"""``kubectl dra`` (the ``kubectl-dra`` executable kubectl finds on the PATH): the extender's
answers from a laptop with a kubeconfig, no access to the pod network needed.

First it asks the running extender, through the API server's service proxy
(:mod:`extender.cluster.extender_proxy`; ``--extender`` names the Service): ``snapshot`` is then
the extender's cache as it holds it, ``explain``, ``capacity`` and ``make-room`` its own views
(binds in flight included), and ``simulate`` and ``pending`` decide on that snapshot. When it
cannot (no right to proxy, no such Service, an extender without ``--ops-debug``), it says why
and computes from the objects the user's own credentials can list (the kinds the extender reads,
:mod:`extender.cluster.discovery`); ``--source`` forces either. Every command says on stderr
which it did. Decisions made here are the API server's Kubernetes release's (the nearest one
known, as the extender itself does, with a warning) with the release's default gates, unless
``--kubernetes-version`` and ``--feature-gates`` say otherwise. A kind the credentials may not
list is named in a warning; ``snapshot`` goes on without it, a decision does not (it would be
wrong, not partial), except for PodDisruptionBudgets, which only preemption reads.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import orjson
import yaml

from extender import __version__
from extender.cluster.extender_proxy import DEFAULT_SERVICE, ExtenderService
from extender.commands.arguments import FITS, FITS_NOWHERE, USAGE, kubernetes_version, make_room_flags

if TYPE_CHECKING:
    from extender.allocator.releases import Release
    from extender.cluster.discovery import Listing
    from extender.cluster.kube import RawKube
    from extender.scheduling.engine import Engine

COMPUTED = "computed from the objects your credentials can list (the extender itself was not asked)"
#: Said when the answer came from the running extender (``{service}``: where).
FROM_EXTENDER = "from the extender's cache at {service}, through the API server's service proxy"
SOURCES = ("auto", "extender", "objects")
#: Kinds a decision may do without (as cluster mode's informers: only preemption reads them).
OPTIONAL_KINDS = frozenset({"PodDisruptionBudget"})


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl dra",
        description="Dynamic Resource Allocation as dra-extender decides it, from kubectl.",
        epilog="Exit codes: 0 success; 1 (explain, simulate, pending) a pod fits on no node, "
        "(make-room) no plan makes room, (lint) hints found; 2 usage, credentials or API errors.",
    )
    parser.add_argument("--version", action="version", version=f"kubectl-dra {__version__}")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", help="the kubeconfig context to use (default: its current one)")
    parser.add_argument(
        "--extender",
        default=DEFAULT_SERVICE,
        type=_service,
        metavar="NS/SERVICE:PORT",
        help=f"the extender's ops port, reached through the API server's service proxy "
        f"(default {DEFAULT_SERVICE}; the standalone deployment: dra-extender/dra-extender:metrics)",
    )
    parser.add_argument(
        "--source",
        choices=SOURCES,
        default="auto",
        help="auto (default): ask the extender, and compute from the objects you can list when it "
        "cannot be asked; extender or objects: only that",
    )
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
    simulate = sub.add_parser(
        "simulate",
        help="decide every pending pod (or one) on the objects listed",
        description="dra-extender simulate on a snapshot taken now.",
    )
    simulate.add_argument("--pod", help="only this pod (NAMESPACE/NAME)")
    simulate.add_argument("--node", help="only this node")
    capacity = sub.add_parser(
        "capacity",
        help="devices per node and class: total, allocated, free; how many pods of a shape fit",
        description="As the extender's /debug/capacity, on the objects listed.",
    )
    capacity.add_argument("--class", dest="device_class", metavar="CLASS", help="one shape: this DeviceClass")
    capacity.add_argument(
        "--count", type=_positive, metavar="N", help="with --class: N devices per pod (default 1)"
    )
    make_room = sub.add_parser(
        "make-room",
        help="which running pods to move so that a pending pod (or N devices of a class) fits on one node",
        description="As the extender's /debug/make-room: the node to free, the pods to move off it in "
        "order and where each goes, or per node why no plan exists. Read-only: nothing is evicted. "
        "Computed from the objects, the --make-room-* rules apply (serve's defaults); the extender "
        "plans with its own.",
    )
    make_room.add_argument(
        "pod", nargs="?", metavar="NAMESPACE/POD", help="the pending pod (NAME alone: namespace default)"
    )
    make_room.add_argument(
        "--class", dest="device_class", metavar="CLASS", help="instead of a pod: devices of this DeviceClass"
    )
    make_room.add_argument(
        "--count", type=_positive, metavar="N", help="with --class: N devices on one node (default 1)"
    )
    make_room_flags(make_room.add_argument_group("rules, when computed from the objects"))
    pending = sub.add_parser(
        "pending",
        help="pods waiting for devices: where each would fit now, or why nowhere",
        description="Every pod not bound yet that asks for devices (claims, or extended resources "
        "a DeviceClass stands for), decided as simulate does.",
    )
    lint = sub.add_parser(
        "lint",
        help="claims and templates that can never match what the cluster's drivers publish",
        description="As dra-extender lint, on the objects listed: every ResourceClaim not allocated "
        "yet and every ResourceClaimTemplate (or those of -f files, before you apply them), checked "
        "against the ResourceSlices and DeviceClasses: a missing class, an attribute or capacity no "
        "device of the class's drivers publishes (with the close published name), a constraint one "
        "side cannot meet, a count no node offers. Hints only.",
    )
    lint.add_argument(
        "--filename",
        "-f",
        action="append",
        metavar="PATH",
        help="check the claims and templates of these files (repeatable) instead of the cluster's",
    )
    for command in (explain, simulate, capacity, make_room, pending, lint):
        command.add_argument("--output", "-o", choices=("json", "text"), default="text")
        command.add_argument(
            "--kubernetes-version",
            type=kubernetes_version,
            metavar="VERSION",
            help="decide as this release (default: the API server's)",
        )
        command.add_argument(
            "--feature-gates",
            default="",
            metavar="GATES",
            help="NAME=true|false,... as kube-scheduler is started with (default: the release's defaults)",
        )
    return parser


def _service(text: str) -> ExtenderService:
    try:
        return ExtenderService.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a positive integer, not {text!r}")
    return int(text)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in ("capacity", "make-room") and args.count is not None and args.device_class is None:
        parser.error("--count goes with --class")
    if args.command == "make-room" and (args.pod is None) == (args.device_class is None):
        parser.error("make-room: give NAMESPACE/POD or --class CLASS" + (", not both" if args.pod else ""))
    from extender.allocator.features import FeatureGateError
    from extender.cluster.api import ClusterAPIError
    from extender.cluster.kube import KubeConfigError
    from extender.explain import ExplainError
    from extender.statefile import StateFileError

    try:
        return _run(args, out or sys.stdout)
    except (KubeConfigError, ClusterAPIError, ExplainError, StateFileError, FeatureGateError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return USAGE


def _run(args: argparse.Namespace, out: TextIO) -> int:
    from extender.cluster.api import ClusterAPIError
    from extender.cluster.extender_proxy import NotReachable, ViewRefused
    from extender.explain import ExplainError

    raw, server_release = _connect(args.kubeconfig, args.context)
    release = getattr(args, "kubernetes_version", None) or server_release  # snapshot has none
    if args.source != "objects":
        try:
            return _from_extender(raw, args, release, out)
        except ViewRefused as exc:
            raise ExplainError(f"the extender at {args.extender} answered: {exc}") from None
        except NotReachable as exc:
            if args.source == "extender":
                raise ClusterAPIError(f"the extender cannot be asked: {exc}") from None
            print(f"kubectl dra: the extender cannot be asked: {exc}", file=sys.stderr)
    listing = _listed(raw)
    if args.command == "snapshot":
        _warn_refused(listing.refused)
        print(f"kubectl dra: snapshot {COMPUTED}", file=sys.stderr)
        return _snapshot_written(listing.objects, args.output)
    missing = {kind: why for kind, why in listing.refused.items() if kind not in OPTIONAL_KINDS}
    if missing:
        kinds = ", ".join(f"{kind} ({why})" for kind, why in missing.items())
        raise ClusterAPIError(
            f"cannot decide without listing {kinds}; `kubectl dra snapshot` writes what it can"
        )
    _warn_refused(listing.refused)
    print(f"kubectl dra: answers {COMPUTED}", file=sys.stderr)
    if args.command in ("simulate", "pending", "lint"):
        return _decide_on(listing.objects, release, args, out)
    from extender.commands.arguments import offline_features
    from extender.explain import engine_from_state

    with _state_file(listing.objects) as (state, limit):
        engine = engine_from_state(
            [str(state)], limit, release, offline_features(args.feature_gates, release)
        )
    if args.command == "capacity":
        from extender.service import debug

        out.write(
            _rendered("capacity", debug.capacity_view(engine, args.device_class, args.count), args.output)
        )
        return FITS
    if args.command == "make-room":
        return _make_room(engine, args, out)
    return _explain(engine, args.pod, args.output, out)


def _from_extender(raw: RawKube, args: argparse.Namespace, release: Release, out: TextIO) -> int:
    """The command answered by the running extender's views (``NotReachable`` if it cannot be)."""
    from extender.cluster.extender_proxy import ViewRefused, ask

    service: ExtenderService = args.extender

    def asked(view: str, what: str, query: dict[str, str] | None = None) -> Any:
        answer, replica = ask(raw, service, view, query)
        print(
            f"kubectl dra: {what} {FROM_EXTENDER.format(service=service)} (replica {replica.name})",
            file=sys.stderr,
        )
        if replica.named and not replica.active:
            since = (
                "has decided nothing since it started"
                if replica.last_decision is None
                else f"last decided {replica.last_decision:.0f} s ago"
            )
            print(
                f"kubectl dra: warning: replica {replica.name} {since}: it may be a standby (its "
                "kube-scheduler does not lead), whose views lack binds in flight and decisions; "
                "or nothing was scheduled meanwhile",
                file=sys.stderr,
            )
        if not isinstance(answer, dict):
            raise ViewRefused(f"{view}: not a JSON object")
        return answer

    if args.command == "explain":
        from extender.explain import fits_somewhere, render, split_pod

        namespace, name = split_pod(args.pod)
        explained = asked(f"pods/{namespace}/{name}", "answer")
        out.write(render(explained, args.output))
        return FITS if fits_somewhere(explained) else FITS_NOWHERE
    if args.command == "capacity":
        query = {"class": args.device_class} if args.device_class else {}
        query.update({"count": str(args.count)} if args.count else {})
        out.write(_rendered("capacity", asked("capacity", "answer", query), args.output))
        return FITS
    if args.command == "make-room":
        from extender.explain import split_pod

        if args.device_class is not None:
            query = {"class": args.device_class, "count": str(args.count or 1)}
        else:
            query = {"pod": "/".join(split_pod(args.pod))}
        if _rules_given(args):
            print(
                "kubectl dra: warning: --make-room-* apply only to a plan computed from the objects "
                "(--source objects); the extender plans with its own rules, as its answer shows",
                file=sys.stderr,
            )
        planned = asked("make-room", "answer", query)
        out.write(_rendered("make-room", planned, args.output))
        return FITS if planned.get("found") else FITS_NOWHERE
    what = "snapshot" if args.command == "snapshot" else "decided on a snapshot"
    objects: list[dict[str, Any]] = list(asked("snapshot", what).get("items") or [])
    if args.command == "snapshot":
        return _snapshot_written(objects, args.output)
    return _decide_on(objects, release, args, out)


def _decide_on(objects: list[dict[str, Any]], release: Release, args: argparse.Namespace, out: TextIO) -> int:
    """``simulate``, ``pending`` or ``lint`` on these objects."""
    if args.command == "lint":
        return _lint(objects, release, args, out)
    with _state_file(objects) as (state, limit):
        if args.command == "simulate":
            return _simulate(state, limit, release.name, args, out)
        from extender.commands.kubectl_dra_pending import pending

        return pending(state, limit, release.name, args.feature_gates, objects, args.output, out)


@contextlib.contextmanager
def _state_file(objects: list[dict[str, Any]]) -> Iterator[tuple[Path, int]]:
    """``objects`` as a state file for as long as the block runs, and the size limit to read it
    with (the snapshot is ours: no limit but its own)."""
    with tempfile.TemporaryDirectory(prefix="kubectl-dra-") as folder:
        state = Path(folder) / "snapshot.json"
        _write(state, objects, compact=True)
        yield state, state.stat().st_size + 1


def _connect(kubeconfig: str | None, context: str | None) -> tuple[RawKube, Release]:
    """A client with the user's credentials, and the release to decide as: the API server's, or
    the nearest known."""
    from kubernetes import client as k8s

    from extender.cluster.kube import RawKube, load_user_configuration
    from extender.service.versions import ServerVersion, release_for

    raw = RawKube(k8s.ApiClient(load_user_configuration(kubeconfig, context)))
    release, warning = release_for(ServerVersion.read(raw, attempts=1))
    if warning is not None:
        print(f"kubectl dra: warning: {warning}", file=sys.stderr)
    return raw, release


def _listed(raw: RawKube) -> Listing:
    """Every kind the extender reads, as these credentials list them."""
    from extender.cluster.api import ClusterAPIError
    from extender.cluster.discovery import discover_once, list_all, watched

    try:
        paths, served = discover_once(raw)
    except ClusterAPIError as exc:
        raise ClusterAPIError(f"API discovery of resource.k8s.io: {exc}") from None
    try:
        paths = dataclasses.replace(paths, pod_groups=raw.pod_group_version())
    except ClusterAPIError as exc:  # as cluster mode: PodGroups are not read then
        print(
            f"kubectl dra: warning: PodGroup versions not read ({exc}); PodGroups left out", file=sys.stderr
        )
    return list_all(raw, watched(paths, served, device_taint_rules=True), paths)


def _warn_refused(refused: Mapping[str, str]) -> None:
    for kind, why in refused.items():
        print(f"kubectl dra: warning: {kind} objects not listed: {why}", file=sys.stderr)


def _lint(objects: list[dict[str, Any]], release: Release, args: argparse.Namespace, out: TextIO) -> int:
    from extender.commands.arguments import offline_features
    from extender.lint import FOUND, lint, render
    from extender.statefile import load_objects

    checked = None
    if args.filename:
        checked, problems = load_objects(args.filename, kinds=("ResourceClaim", "ResourceClaimTemplate"))
        for problem in problems:
            print(f"kubectl dra: warning: {problem}", file=sys.stderr)
    result = lint(objects, offline_features(args.feature_gates, release), checked)
    out.write(render(result, args.output))
    return FOUND if result["findings"] else FITS


def _simulate(state: Path, limit: int, release: str, args: argparse.Namespace, out: TextIO) -> int:
    command = [str(state), "-o", args.output, "--max-state-bytes", str(limit)]
    command += ["--kubernetes-version", release, "--feature-gates", args.feature_gates]
    command += ["--pod", args.pod] if args.pod else []
    command += ["--node", args.node] if args.node else []
    from extender.commands.kubectl_dra_pending import dra_extender_simulate

    return dra_extender_simulate(command, out)


def _explain(engine: Engine, pod: str, output: str, out: TextIO) -> int:
    from extender.explain import ExplainError, fits_somewhere, render, split_pod
    from extender.service import debug

    namespace, name = split_pod(pod)
    found = engine.state.pods.get((namespace, name))
    if found is None:
        raise ExplainError(f"pod {namespace}/{name} not found (or not listed)")
    explained = debug.pod(engine, found)
    out.write(render(explained, output))
    return FITS if fits_somewhere(explained) else FITS_NOWHERE


def _make_room(engine: Engine, args: argparse.Namespace, out: TextIO) -> int:
    """The make-room plan computed here, with the rules of the command's --make-room-* flags."""
    from extender.commands.arguments import make_room_rules
    from extender.explain import ExplainError, split_pod
    from extender.model.core import Pod
    from extender.scheduling.preempt.make_room import Shape
    from extender.service import debug

    target: Pod | Shape
    if args.device_class is not None:
        target = Shape(args.device_class, args.count or 1)
    else:
        namespace, name = split_pod(args.pod)
        found = engine.state.pods.get((namespace, name))
        if found is None:
            raise ExplainError(f"pod {namespace}/{name} not found (or not listed)")
        target = found
    planned = debug.make_room_view(engine, target, make_room_rules(args))
    out.write(_rendered("make-room", planned, args.output))
    return FITS if planned["found"] else FITS_NOWHERE


def _rules_given(args: argparse.Namespace) -> bool:
    """Whether any --make-room-* rule differs from its default (serve's)."""
    defaults = argparse.ArgumentParser()
    make_room_flags(defaults)
    return any(
        getattr(args, a.dest) != a.default for a in defaults._actions if a.dest.startswith("make_room")
    )


def _rendered(view: str, data: dict[str, Any], output: str) -> str:
    from extender.service import debug

    if output == "json":
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    return debug.render_text(view, data)


def _snapshot_written(objects: list[dict[str, Any]], output: str) -> int:
    _write(Path(output), objects)
    print(f"kubectl dra: {len(objects)} objects written to {output}", file=sys.stderr)
    return FITS


def _write(path: Path, objects: list[dict[str, Any]], *, compact: bool = False) -> None:
    document = {"apiVersion": "v1", "kind": "List", "items": objects}
    if path.suffix in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(document, sort_keys=False))
    else:
        path.write_bytes(orjson.dumps(document, option=0 if compact else orjson.OPT_INDENT_2) + b"\n")


if __name__ == "__main__":
    raise SystemExit(main())
