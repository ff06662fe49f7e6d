"""Failover under load (tests/realcluster/failover.py) at the issue's size: 800 pods arriving
at 12 a second on 100 nodes x 8 GPUs, the leader killed, frozen and cut off from kube-apiserver
in turn, for the standalone and the sidecar deployment, on one real control plane.

Prints each run's summary (JSON): per fault, the seconds until another member led and until
the first bind after that; pods bound; the store's violations; the writes the API server
refused (by the store fence, abandoned by a cut-off sender, otherwise). Exit status 1 when a
pod was not bound, a device was given twice, a claim was left held, or a write was refused
other than by the fence.

Needs the real binaries (tests/realcluster/binaries.py says where they are looked for).
Run: ``python -m bench.failover_bench`` (``--pods 800 --rate 12``, ``--deployments sidecar``,
``--json FILE``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tests.realcluster import binaries as found
from tests.realcluster.conftest import empty
from tests.realcluster.controlplane import running
from tests.realcluster.failover import SIDECAR, STANDALONE, failover


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=800)
    parser.add_argument("--rate", type=float, default=12.0, help="pods created per second")
    kinds = [STANDALONE, SIDECAR]
    parser.add_argument("--deployments", nargs="+", default=kinds, choices=kinds)
    parser.add_argument("--json", help="write the summaries here")
    args = parser.parse_args(argv)
    located = found.for_bench()
    summaries = []
    failed = False
    with tempfile.TemporaryDirectory() as folder, running(located, Path(folder)) as plane:
        for kind in args.deployments:
            empty(plane.api)
            r = failover(plane, kind, nodes=-(-args.pods // 8), pods=args.pods, rate=args.rate)
            summary = r.summary()
            summaries.append(summary)
            print(json.dumps(summary, indent=1), flush=True)
            failed |= bool(r.bound < args.pods or r.violations or r.refused_otherwise or r.member_problems)
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
