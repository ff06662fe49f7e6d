"""Run one shared conformance case through ``dra-extender simulate`` (the format is FORMAT.md).

The state is the case's objects plus one Node and one Pod that references the claims in order;
the feature gates are those the case's notes name (all other DRA gates off, as upstream runs it).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import yaml

from extender.cli import main
from extender.quantity import parse_quantity
from tests.conformance.plugin_level import PLUGIN_LEVEL

DRA_GATES = (
    "DRAAdminAccess",
    "DRAPrioritizedList",
    "DRAPartitionableDevices",
    "DRADeviceTaints",
    "DRADeviceTaintRules",
    "DRAConsumableCapacity",
    "DRADeviceBindingConditions",
    "DRAResourceClaimDeviceStatus",
    "DRAExtendedResource",
    "DRAListTypeAttributes",
)


def feature_gates(case: dict[str, Any]) -> str:
    """``--feature-gates`` for a case: what "Upstream test enables" names on, every other DRA gate off."""
    enabled: set[str] = set()
    match = re.search(r"Upstream test enables: ([^.]*)\.", case.get("notes") or "")
    if match:
        for part in match.group(1).split(","):
            enabled.update(g.strip() for g in part.split("+"))
    return ",".join(f"{g}={'true' if g in enabled else 'false'}" for g in DRA_GATES)


def state_objects(case: dict[str, Any]) -> list[dict[str, Any]]:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": case["node"], "labels": case.get("nodeLabels") or {}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pod", "namespace": "default", "uid": "pod-uid"},
        "spec": {
            "containers": [{"name": "c", "image": "x"}],
            "resourceClaims": [{"name": c, "resourceClaimName": c} for c in case["claims"]],
        },
    }
    return [*case["objects"], node, pod]


def plugin_expectation(case: dict[str, Any]) -> dict[str, Any]:
    """The case's expectation as kube-scheduler's plugin reports it (see plugin_level.py)."""
    override = PLUGIN_LEVEL.get(case["name"])
    return override[0] if override is not None else dict(case["expect"])


def run_simulate(case: dict[str, Any], directory: Path) -> dict[str, Any]:
    path = directory / f"{case['name']}.yaml"
    path.write_text(yaml.safe_dump_all(state_objects(case)))
    out = io.StringIO()
    argv = ["simulate", str(path), "--pod", "default/pod", "--node", case["node"], "-o", "json"]
    argv += ["--feature-gates", feature_gates(case), "--timeout", "10"]
    with contextlib.redirect_stderr(io.StringIO()):
        code = main(argv, out)
    result: dict[str, Any] = json.loads(out.getvalue())
    fits = result["pods"][0]["nodes"][case["node"]]["fits"]
    assert code == (0 if fits else 1), out.getvalue()  # simulate's documented exit codes
    return result


def _quantities(values: dict[str, Any] | None) -> dict[str, Any]:
    return {k: parse_quantity(str(v)).value for k, v in (values or {}).items()}


def _selector(expected: Any) -> Any:
    if isinstance(expected, str) and expected.startswith("node:"):
        return {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [expected[5:]]}]}
            ]
        }
    return expected


def mismatches(case: dict[str, Any], result: dict[str, Any]) -> list[str]:
    """What differs between the case's expectation and simulate's answer (empty: it passes)."""
    decision = result["pods"][0]["nodes"][case["node"]]
    expect = plugin_expectation(case)
    outcome = expect["outcome"]
    if "reasonContains" in expect and expect["reasonContains"] not in (decision["reason"] or ""):
        return [f"expected a reason containing {expect['reasonContains']!r}, got {decision}"]
    if outcome == "error":
        if not decision["error"] or expect.get("errorContains", "") not in decision["error"]:
            return [f"expected an error containing {expect.get('errorContains')!r}, got {decision}"]
        return []
    if outcome == "unsatisfiable":
        return (
            []
            if not decision["fits"] and not decision["error"]
            else [f"expected unsatisfiable, got {decision}"]
        )
    if not decision["fits"]:
        return [f"expected an allocation, got {decision}"]
    problems = []
    for claim, want in expect["allocations"].items():
        got = decision["allocations"][claim]
        results = got["devices"]["results"]
        ids = [(r["request"], r["driver"], r["pool"], r["device"]) for r in results]
        want_ids = [(r["request"], r["driver"], r["pool"], r["device"]) for r in want["devices"]]
        if expect.get("strict") and ids != want_ids:
            problems.append(f"{claim}: devices {ids} != {want_ids}")
        if not expect.get("strict") and len(ids) != len(want_ids):
            problems.append(f"{claim}: {len(ids)} devices, expected {len(want_ids)}")
        if expect.get("strict"):
            for g, w in zip(results, want["devices"], strict=False):
                for key in ("adminAccess", "tolerations", "bindingConditions", "bindingFailureConditions"):
                    if (g.get(key) or None) != (w.get(key) or None):
                        problems.append(f"{claim}/{g['device']}: {key} {g.get(key)} != {w.get(key)}")
                if _quantities(g.get("consumedCapacity")) != _quantities(w.get("consumedCapacity")):
                    problems.append(
                        f"{claim}/{g['device']}: consumedCapacity {g.get('consumedCapacity')} != {w.get('consumedCapacity')}"
                    )
                if "shareID" in w and bool(g.get("shareID")) != bool(w["shareID"]):
                    problems.append(f"{claim}/{g['device']}: shareID presence differs")
        if "config" in want:
            normalized = [
                {**c, "requests": c.get("requests") or []} for c in got["devices"].get("config", [])
            ]
            if normalized != [{**c, "requests": c.get("requests") or []} for c in want["config"]]:
                problems.append(f"{claim}: config {got['devices'].get('config')} != {want['config']}")
        if "nodeSelector" in want and got.get("nodeSelector") != _selector(want["nodeSelector"]):
            problems.append(
                f"{claim}: nodeSelector {got.get('nodeSelector')} != {_selector(want['nodeSelector'])}"
            )
    return problems
