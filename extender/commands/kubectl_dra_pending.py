"""``kubectl dra pending``: simulate's answer for every pod not bound yet that asks for devices,
a line each (the nodes it fits, or the reasons it fits nowhere). Split from
:mod:`extender.commands.kubectl_dra`, which connects, lists and chooses the source."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import orjson

from extender.commands.arguments import FITS, FITS_NOWHERE


def dra_extender_simulate(argv: list[str], out: TextIO) -> int:
    """``dra-extender simulate ARGV``: the same flags and the same code (commands/simulate.py)."""
    from extender.commands import simulate

    parser = argparse.ArgumentParser(prog="dra-extender")
    simulate.add(parser.add_subparsers(dest="command"))
    return simulate.run(parser.parse_args(["simulate", *argv]), out)


def asks_for_devices(pod: Mapping[str, Any], extended: frozenset[str]) -> bool:
    """A pod's spec asks for devices: claims, or an extended resource a DeviceClass stands for."""
    spec = pod.get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    return any(
        name in extended
        for c in containers
        for part in ("requests", "limits")
        for name in ((c.get("resources") or {}).get(part) or {})
    )


def pending(
    state: Path,
    limit: int,
    release: str,
    gates: str,
    objects: list[dict[str, Any]],
    output: str,
    out: TextIO,
) -> int:
    """simulate's answer for every pod not bound yet that asks for devices, a line each: the
    nodes it fits, or the reasons it fits nowhere (the commonest first). A node's error ends the
    pod's attempt, as in simulate."""
    import io

    extended = frozenset(
        str(o["spec"]["extendedResourceName"])
        for o in objects
        if o.get("kind") == "DeviceClass" and (o.get("spec") or {}).get("extendedResourceName")
    )
    asking = {
        (str(o["metadata"].get("namespace", "default")), str(o["metadata"].get("name")))
        for o in objects
        if o.get("kind") == "Pod" and asks_for_devices(o, extended)
    }
    answer = io.StringIO()
    command = [str(state), "-o", "json", "--max-state-bytes", str(limit)]
    code = dra_extender_simulate(
        [*command, "--kubernetes-version", release, "--feature-gates", gates], answer
    )
    if code not in (FITS, FITS_NOWHERE):
        return code
    result = orjson.loads(answer.getvalue())
    for problem in result.get("problems") or []:
        print(f"kubectl dra: warning: {problem}", file=sys.stderr)
    rows = pending_rows(result, asking)
    if output == "json":
        listed = [
            {"pod": pod, "fitsOn": fits, "error": error, "reasons": why} for pod, fits, error, why in rows
        ]
        out.write(orjson.dumps({"pods": listed}, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for pod, fits, error, why in rows:
            if error:
                line = f"cannot be scheduled: {error}"
            elif fits:
                line = f"fits on {len(fits)} node(s): {', '.join(fits[:5])}" + (
                    " ..." if len(fits) > 5 else ""
                )
            else:
                reason, count = next(iter(why.items()), ("no node to try", 0))
                line = f"fits nowhere ({count} node(s): {reason})"
            out.write(f"{pod}  {line}\n")
        if not rows:
            out.write("no pending pod asks for devices\n")
    return FITS_NOWHERE if any(error or not fits for _, fits, error, _ in rows) else FITS


def pending_rows(
    result: Mapping[str, Any], asking: set[tuple[str, str]]
) -> list[tuple[str, list[str], str | None, dict[str, int]]]:
    """From simulate's JSON: per pod of ``asking`` (pod, the nodes it fits, the error that ends
    its attempt if a node has one, the reasons of the nodes that do not fit, counted)."""
    rows = []
    for pod in result.get("pods") or []:
        if (pod["namespace"], pod["name"]) not in asking:
            continue
        nodes: dict[str, Any] = pod.get("nodes") or {}
        error = next((node["error"] for node in nodes.values() if node.get("error")), None)
        fits = [name for name, node in nodes.items() if node.get("fits")]
        reasons: dict[str, int] = {}
        for node in nodes.values():
            if not node.get("fits") and not node.get("error"):
                why = node.get("reason") or "does not fit"
                reasons[why] = reasons.get(why, 0) + 1
        ranked = dict(sorted(reasons.items(), key=lambda kv: -kv[1]))
        rows.append((f"{pod['namespace']}/{pod['name']}", fits, error, ranked))
    return rows
