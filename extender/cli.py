"""The ``dra-extender`` command line: one place that builds everything from flags."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from extender.allocator.features import GATES, FeatureGateError, Features, parse_feature_gates
from extender.allocator.releases import (
    DEFAULT_MINOR,
    RELEASES,
    Release,
    ReleaseError,
    parse_release,
    release_of,
)
from extender.defaults import (
    DEFAULT_BINDING_TIMEOUT,
    DEFAULT_BINDING_WAIT,
    DEFAULT_CATCH_UP_WAIT,
    DEFAULT_MAX_BINDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUESTS,
    DEFAULT_MAX_STATE_BYTES,
    DEFAULT_RELEASE_WAIT,
    DEFAULT_SCHEDULER_NAME,
    DEFAULT_SERVER,
    SCORE_POLICIES,
)

# The commands import what they need when they run: ``--help`` and ``--version`` answer without
# the allocator, the Kubernetes client or the server stack (a test runs -X importtime on them).


class _Version(argparse.Action):
    """``--version``, reading the installed version only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from extender import __version__

        print(f"{parser.prog} {__version__}")
        parser.exit()


def kubernetes_version(text: str) -> Release:
    """argparse type: a Kubernetes release the extender knows (``1.36``, ``v1.37.0``)."""
    try:
        return parse_release(text)
    except ReleaseError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


VERSION_HELP = (
    "decide as kube-scheduler of this Kubernetes release does: its DRA gate defaults and the "
    f"rules that changed between releases ({', '.join(r.name for r in RELEASES.values())})"
)


_PATH_CHARACTERS = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@/-]*")


def url_prefix(text: str) -> str:
    """argparse type: the verbs' URL path prefix, as the routes use it: ``/scheduler`` for
    "scheduler", "/scheduler" or "/scheduler/"; "" (the root) for "" or "/". Characters a URL
    path cannot hold unescaped are refused (kube-scheduler's urlPrefix could not reach them)."""
    if not _PATH_CHARACTERS.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a URL path: {text!r} (letters, digits and -._~!$&'()*+,;=:@/ only)"
        )
    if "//" in text.strip("/"):
        raise argparse.ArgumentTypeError(f"not a URL path: {text!r} (an empty segment)")
    return "/" + text.strip("/") if text.strip("/") else ""


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def non_negative_seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0 (0: off)."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    return positive_seconds(text)


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return value


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            found: argparse.ArgumentParser = action.choices[command]
            return found
    return None


def max_state_bytes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-state-bytes",
        type=positive_int,
        default=DEFAULT_MAX_STATE_BYTES,
        metavar="BYTES",
        help=f"refuse a state file larger than this (default {DEFAULT_MAX_STATE_BYTES})",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dra-extender",
        description="Kubernetes DRA for any kube-scheduler.",
        epilog="Exit codes: 0 success; 1 (simulate, explain) a pod fits on no node; 2 usage or input errors.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
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
    sim.add_argument(
        "--kubernetes-version",
        type=kubernetes_version,
        default=release_of(DEFAULT_MINOR),
        metavar="VERSION",
        help=f"{VERSION_HELP}; default 1.{DEFAULT_MINOR}",
    )
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

    explain = sub.add_parser(
        "explain",
        help="why a pod fits on no node, and which claims hold the devices it needs",
        description="Per node: does NAMESPACE/POD fit, with which devices, or why not, and for the "
        "nodes where it does not, the claims (and their pods) holding devices its requests select. "
        "Asks a running extender (--server) or answers offline from state files (--state).",
    )
    explain.add_argument(
        "pod", metavar="NAMESPACE/POD", nargs="?", help="the pod (NAME alone: namespace default)"
    )
    source = explain.add_mutually_exclusive_group()
    source.add_argument(
        "--server",
        default=DEFAULT_SERVER,
        help=f"the extender's verbs listener (default {DEFAULT_SERVER})",
    )
    source.add_argument("--state", nargs="+", metavar="PATH", help="state files or directories (offline)")
    explain.add_argument("--ca-file", help="CA that signed the extender's serving certificate (https)")
    explain.add_argument("--cert-file", help="client certificate, when the extender requires one (mTLS)")
    explain.add_argument("--key-file", help="the client certificate's private key")
    explain.add_argument("--output", "-o", choices=("json", "text"), default="text")
    max_state_bytes(explain)

    examples = sub.add_parser(
        "examples",
        help="copy the example cluster state into a directory (for serve --state and simulate)",
        description="Write the example cluster state (nodes, GPU and NIC slices, classes, claims, pods) "
        "into DIR, so that `dra-extender serve --state DIR` works outside a checkout.",
    )
    examples.add_argument("directory", metavar="DIR", help="where to write the files (created)")

    serve = sub.add_parser(
        "serve",
        help="run the extender service (filter, prioritize, bind) for kube-scheduler",
        description="Serve kube-scheduler's extender verbs under --prefix, plus /healthz, /readyz, "
        "/metrics and /debug/*. With --state the cluster lives in memory, read from state files "
        "(the embedded default).",
    )
    serve.add_argument(
        "--state", nargs="+", metavar="PATH", help="state files or directories (embedded mode)"
    )
    max_state_bytes(serve)
    serve.add_argument(
        "--kubeconfig", help="run against this cluster (default when running in a pod: the in-cluster config)"
    )
    serve.add_argument(
        "--api-timeout",
        type=positive_seconds,
        help="seconds to wait for one API server request (cluster mode, default 30)",
    )
    serve.add_argument(
        "--cache-stale-after",
        type=positive_seconds,
        help="cluster mode: seconds an informer may be unable to list or watch before the cache "
        "counts as stale: not ready, binds refused (default 30)",
    )
    serve.add_argument(
        "--leader-elect",
        action="store_true",
        help="cluster mode with several replicas: hold a coordination.k8s.io Lease; "
        "only the holder is ready and binds",
    )
    serve.add_argument(
        "--leader-elect-namespace",
        default=os.environ.get("POD_NAMESPACE", "kube-system"),
        help="namespace of the Lease (default $POD_NAMESPACE, else kube-system)",
    )
    serve.add_argument(
        "--leader-elect-name", default="dra-extender", help="name of the Lease (default dra-extender)"
    )
    serve.add_argument(
        "--leader-elect-lease-duration", type=positive_seconds, default=15.0, help="seconds (default 15)"
    )
    serve.add_argument(
        "--leader-elect-renew-deadline", type=positive_seconds, default=10.0, help="seconds (default 10)"
    )
    serve.add_argument(
        "--leader-elect-retry-period", type=positive_seconds, default=2.0, help="seconds (default 2)"
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address of the verbs and debug views (default 127.0.0.1: only the scheduler in the "
        "same pod can reach them; anything else needs --tls-client-ca-file)",
    )
    serve.add_argument(
        "--port", type=port_number, default=8888, help="their port (default 8888; 0: any free port)"
    )
    serve.add_argument(
        "--ops-host",
        help="address of /healthz, /readyz and /metrics for kubelet and Prometheus (default 0.0.0.0 in "
        "cluster mode; 127.0.0.1 in embedded mode, a laptop or a CI job)",
    )
    serve.add_argument(
        "--ops-port", type=port_number, default=8889, help="their port (default 8889; 0: any free port)"
    )
    serve.add_argument(
        "--max-concurrency",
        type=positive_int,
        default=DEFAULT_MAX_REQUESTS,
        help="requests other than binds (filter, prioritize, preempt, debug views) served at once; "
        f"more get 503 (default {DEFAULT_MAX_REQUESTS})",
    )
    serve.add_argument(
        "--max-binds",
        type=positive_int,
        default=DEFAULT_MAX_BINDS,
        help="binds in flight at once, counted apart so that binds never crowd out filter and "
        f"prioritize; more get 503 (default {DEFAULT_MAX_BINDS})",
    )
    serve.add_argument(
        "--max-connections",
        type=positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        help="open connections per listener; while this many are open, requests get 503 "
        f"(default {DEFAULT_MAX_CONNECTIONS})",
    )
    serve.add_argument(
        "--prefix",
        type=url_prefix,
        default="/scheduler",
        help="URL path prefix of the verbs: 'scheduler' and '/scheduler/' mean /scheduler, '/' the "
        "root (default /scheduler)",
    )
    serve.add_argument(
        "--feature-gates", default="", help="comma-separated NAME=true|false (Kubernetes names)"
    )
    serve.add_argument(
        "--score-policy",
        choices=SCORE_POLICIES,
        default="binpack",
        help="prioritize: binpack (fewest free devices left) or spread (default binpack)",
    )
    serve.add_argument(
        "--node-timeout",
        type=positive_seconds,
        default=1.0,
        help="allocation budget per node, seconds (default 1)",
    )
    serve.add_argument(
        "--filter-budget",
        type=positive_seconds,
        default=3.0,
        help="allocation budget of one filter call over all nodes, seconds; keep it below the "
        "scheduler's httpTimeout (default 3)",
    )
    serve.add_argument(
        "--binding-timeout",
        type=positive_seconds,
        default=DEFAULT_BINDING_TIMEOUT,
        help="DynamicResourcesArgs.bindingTimeout: how long an allocated claim may wait for its "
        "devices' binding conditions before it is released for other devices, seconds "
        f"(default {DEFAULT_BINDING_TIMEOUT:g})",
    )
    serve.add_argument(
        "--binding-conditions-wait",
        type=positive_seconds,
        default=DEFAULT_BINDING_WAIT,
        help="how long one bind waits for binding conditions before answering 'not yet' (the "
        "claims stay allocated; kube-scheduler's retry waits again); keep it below the "
        f"scheduler's httpTimeout (default {DEFAULT_BINDING_WAIT:g})",
    )
    serve.add_argument(
        "--catch-up-wait",
        type=positive_seconds,
        default=DEFAULT_CATCH_UP_WAIT,
        help="how long filter, preempt and bind wait for the cache to show claims that the pod "
        "kube-scheduler sent names (its watch can be ahead of the extender's), seconds "
        f"(default {DEFAULT_CATCH_UP_WAIT:g})",
    )
    serve.add_argument(
        "--release-wait",
        type=positive_seconds,
        default=DEFAULT_RELEASE_WAIT,
        help="how long a preemptor's bind holds the devices of its victims' claims, waiting for "
        "kube-controller-manager to release them, before it fails; keep it below the scheduler's "
        f"httpTimeout (default {DEFAULT_RELEASE_WAIT:g})",
    )
    serve.add_argument(
        "--hold-after-prioritize",
        type=non_negative_seconds,
        default=0.0,
        help="after prioritize, keep the devices a pod would get on its single best-scored node "
        "for it this many seconds, until its bind or next filter (0, the default: off; see README)",
    )
    serve.add_argument(
        "--kubernetes-version",
        type=kubernetes_version,
        metavar="VERSION",
        help=f"{VERSION_HELP}; default: the API server's version (cluster mode), "
        f"1.{DEFAULT_MINOR} (embedded)",
    )
    serve.add_argument(
        "--device-preemption",
        action="store_true",
        help="for kube-scheduler 1.38 or newer (which hands the preempt verb nodes only extenders "
        "rejected): report nodes where evicting lower-priority pods would free enough devices as "
        "Unschedulable instead of Unresolvable, and keep the devices a preemption freed for the "
        "nominated pod. Off (the default): every device rejection is Unresolvable, as the in-tree "
        "plugin reports it; older schedulers fail the preemption otherwise",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=positive_int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"largest accepted request body (default {DEFAULT_MAX_BODY_BYTES})",
    )
    serve.add_argument(
        "--scheduler-name",
        action="append",
        metavar="NAME",
        help="bind only pods whose spec.schedulerName is NAME (repeatable; default "
        f"{DEFAULT_SCHEDULER_NAME}, the manifests' scheduler)",
    )
    serve.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM)")
    serve.add_argument("--tls-key-file", help="the certificate's private key (PEM)")
    serve.add_argument("--tls-client-ca-file", help="require client certificates signed by this CA (mTLS)")
    serve.add_argument(
        "--tls-client-name",
        action="append",
        metavar="NAME",
        help="with --tls-client-ca-file: accept only client certificates with this common name or "
        "DNS name (repeatable)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="debug adds a line per filter and prioritize call (default info)",
    )
    serve.add_argument(
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="text: 'TIME LEVEL logger: message key=value...'; json: one object per line (default text)",
    )
    return parser


def _features(text: str, release: Release) -> Features:
    gates = parse_feature_gates(text, allow_locked=True, release=release)
    for name, value in gates.items():
        spec = release.gates[name]
        if spec.locked and value != spec.default:
            print(
                f"warning: feature gate {name} is locked to {str(spec.default).lower()} in Kubernetes "
                f"{release.name}; emulating an older release (--kubernetes-version does it fully)",
                file=sys.stderr,
            )
    return Features.from_gates(gates, release)


def run_simulate(args: argparse.Namespace, out: TextIO) -> int:
    import orjson

    from extender.cluster.state import KINDS, ClusterState
    from extender.simulate import SelectionError, SimulationRequest, render_text, simulate, unschedulable
    from extender.statefile import StateFileError, load_objects

    try:
        release = args.kubernetes_version
        features = _features(args.feature_gates, release)
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


def run_explain(args: argparse.Namespace, out: TextIO) -> int:
    from extender.explain import ExplainError, TlsClient, fits_somewhere, from_server, from_state, render

    try:
        if args.state:
            explained = from_state(args.state, args.pod, args.max_state_bytes)
        else:
            explained = from_server(
                args.server, args.pod, TlsClient(args.ca_file, args.cert_file, args.key_file)
            )
    except ExplainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.write(render(explained, args.output))
    return 0 if fits_somewhere(explained) else 1


def run_examples(args: argparse.Namespace, out: TextIO) -> int:
    from extender.bundled import ExamplesError, copy_examples

    try:
        copied = copy_examples(Path(args.directory))
    except (ExamplesError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.write(f"wrote {len(copied)} files; run: dra-extender serve --state {args.directory}\n")
    return 0


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
        return run_simulate(args, out or sys.stdout)
    if args.command == "serve":
        from extender.serve_command import run_serve

        return run_serve(args)
    if args.command == "explain":
        if args.pod is None:
            # ``explain --state DIR POD``: --state takes every word after it, the pod included.
            if not (args.state and len(args.state) > 1) or os.path.exists(args.state[-1]):
                parser.error("explain: the following arguments are required: NAMESPACE/POD")
            args.pod = args.state.pop()
        return run_explain(args, out or sys.stdout)
    if args.command == "examples":
        return run_examples(args, out or sys.stdout)
    return 2  # pragma: no cover - argparse enforces the subcommands


if __name__ == "__main__":
    raise SystemExit(main())
