"""``dra-extender explain``: why a pod fits on no node, and which claims hold what it needs."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from extender.allocator.releases import DEFAULT_MINOR
from extender.commands.arguments import VERSION_HELP, kubernetes_version, max_state_bytes
from extender.defaults import DEFAULT_SERVER


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    explain.add_argument(
        "--kubernetes-version",
        type=kubernetes_version,
        metavar="VERSION",
        help=f"with --state: {VERSION_HELP}; default 1.{DEFAULT_MINOR} (a running extender decides as "
        "it was started)",
    )
    max_state_bytes(explain)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from extender.explain import ExplainError, TlsClient, fits_somewhere, from_server, from_state, render

    try:
        if args.state:
            explained = from_state(args.state, args.pod, args.max_state_bytes, args.kubernetes_version)
        elif args.kubernetes_version is not None:
            raise ExplainError(
                "--kubernetes-version goes with --state: a running extender decides as it was started"
            )
        else:
            explained = from_server(
                args.server, args.pod, TlsClient(args.ca_file, args.cert_file, args.key_file)
            )
    except ExplainError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out.write(render(explained, args.output))
    return 0 if fits_somewhere(explained) else 1
