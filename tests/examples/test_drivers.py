"""The driver catalogue (examples/drivers/, issue 53): each driver's demo claims, simulated on the slices
and classes the same driver publishes. Per demo pod: the nodes it fits on and the devices it gets on
each, or why it fits nowhere."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from extender.cli import main
from extender.statefile import expand
from tests.examples.driver_cases import collect
from tests.shared import REPO

DRIVERS = REPO / "examples" / "drivers"


def simulate(state: Path, pod: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main(["simulate", str(state), "--pod", pod, "-o", "json"], out)
    result = json.loads(out.getvalue())
    assert result["problems"] == []
    [decided] = result["pods"]
    return code, decided["nodes"]


def devices(decision: dict[str, Any]) -> dict[str, list[str]]:
    """request -> devices (driver/pool/device), over the pod's claims."""
    got: dict[str, list[str]] = {}
    for allocation in decision["allocations"].values():
        for r in allocation["devices"]["results"]:
            got.setdefault(r["request"], []).append(f"{r['driver']}/{r['pool']}/{r['device']}")
    return got


FITS, FITS_NOWHERE = collect()


@pytest.mark.parametrize(("state", "pod", "fits", "not_on"), [c[1:] for c in FITS], ids=[c[0] for c in FITS])
def test_a_demo_claim_fits_where_the_driver_publishes_devices(
    state: str, pod: str, fits: dict[str, dict[str, list[str]]], not_on: list[str]
) -> None:
    code, nodes = simulate(DRIVERS / state, pod)
    assert code == 0
    unfit = dict(n.partition(": ")[::2] for n in not_on)  # "node" or "node: what its reason says"
    assert sorted(nodes) == sorted([*fits, *unfit])
    for node, expected in fits.items():
        assert nodes[node]["fits"] and nodes[node]["error"] is None, node
        assert devices(nodes[node]) == expected, node
    for node, says in unfit.items():
        assert not nodes[node]["fits"], node
        reason = nodes[node]["reason"] or nodes[node]["error"]
        if says:
            assert says in reason, node
        else:
            assert reason.endswith("no device matches (no devices published for this node)"), node


@pytest.mark.parametrize(
    ("state", "pod", "why"), [c[1:] for c in FITS_NOWHERE], ids=[c[0] for c in FITS_NOWHERE]
)
def test_a_demo_claim_that_fits_nowhere_says_why(state: str, pod: str, why: dict[str, str]) -> None:
    code, nodes = simulate(DRIVERS / state, pod)
    assert code == 1
    assert sorted(nodes) == sorted(why)
    for node, says in why.items():
        assert not nodes[node]["fits"]
        assert says in (nodes[node]["reason"] or nodes[node]["error"]), node


def test_every_pending_demo_pod_is_in_a_case_table() -> None:
    cases = {(c[1], c[2]) for c in FITS} | {(c[1], c[2]) for c in FITS_NOWHERE}
    for state in sorted(p for p in DRIVERS.iterdir() if p.is_dir()):
        out = io.StringIO()
        main(["simulate", str(state), "-o", "json"], out)
        pods = {(state.name, f"{p['namespace']}/{p['name']}") for p in json.loads(out.getvalue())["pods"]}
        assert pods == {c for c in cases if c[0] == state.name}, state.name


def test_the_catalogue_is_not_part_of_the_default_examples_state() -> None:
    """``examples/`` (the embedded default) reads only its own top-level files; the driver catalogue
    under examples/drivers/ is loaded only when named."""
    assert not any("drivers" in p.parts for p in expand([REPO / "examples"]))


@pytest.mark.parametrize("state", sorted(p.name for p in DRIVERS.iterdir() if p.is_dir()))
def test_each_file_cites_its_upstream_tag(state: str) -> None:
    for path in sorted((DRIVERS / state).glob("*.yaml")):
        head = path.read_text().split("\napiVersion:", 1)[0]
        assert "https://github.com/" in head and (" at tag v" in head or " at commit " in head), path
