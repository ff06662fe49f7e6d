"""``dra-extender simulate`` as a user runs it: outputs, selection and failures."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml

from extender.cli import main
from tests import zygote
from tests.allocator.test_derived_attributes import NUMA, numa_claim
from tests.builders import (
    allocated,
    claim,
    container,
    device,
    device_class,
    exact,
    node,
    pod,
    pod_disruption_budget,
    reserve,
    resource_slice,
    with_allocatable,
)
from tests.scheduling.decide.test_node_allocatable_137 import NUMA0, NUMA0_STATUS, worker_slice
from tests.shared import REPO

EXAMPLES = REPO / "examples"


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out)
    return code, out.getvalue()


def test_json_output_has_the_documented_shape() -> None:
    code, text = run("simulate", str(EXAMPLES), "-o", "json")
    assert code == 1  # default/oversized fits nowhere
    result = json.loads(text)
    pods = {f"{p['namespace']}/{p['name']}": p for p in result["pods"]}
    assert "default/batch-job" not in pods  # already bound
    trainer = pods["default/trainer"]["nodes"]
    assert trainer["gpu-node-3"]["fits"] and trainer["gpu-node-3"]["error"] is None
    allocation = trainer["gpu-node-3"]["allocations"]["trainer-gpus"]
    assert len(allocation["devices"]["results"]) == 4
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["gpu-node-3"]
    assert not trainer["gpu-node-1"]["fits"] and "allocations" not in trainer["gpu-node-1"]
    assert trainer["gpu-node-1"]["reason"].startswith("cannot allocate all claims")
    # batch-job holds gpu-0 and gpu-1 of gpu-node-1: inference-0 gets gpu-2 there.
    inference = pods["default/inference-0"]["nodes"]["gpu-node-1"]["allocations"]
    assert inference["inference-0-gpu-x7k2p"]["devices"]["results"][0]["device"] == "gpu-2"


def test_pod_and_node_selection() -> None:
    code, text = run(
        "simulate", str(EXAMPLES), "--pod", "default/rdma-worker", "--node", "gpu-node-2", "-o", "json"
    )
    result = json.loads(text)
    assert code == 0 and [p["name"] for p in result["pods"]] == ["rdma-worker"]
    assert list(result["pods"][0]["nodes"]) == ["gpu-node-2"]


def test_text_output_is_a_table() -> None:
    code, text = run("simulate", str(EXAMPLES), "--pod", "default/oversized")
    assert code == 1
    assert "NODE" in text and "FITS" in text and "needs 9 devices; 8 match, 2 of them in use" in text


def test_unknown_pod_node_gate_and_file_fail_cleanly(tmp_path: Path) -> None:
    assert run("simulate", str(EXAMPLES), "--pod", "default/nope")[0] == 2
    assert run("simulate", str(EXAMPLES), "--node", "nope")[0] == 2
    assert run("simulate", str(EXAMPLES), "--feature-gates", "NoSuchGate=true")[0] == 2
    assert run("simulate", str(tmp_path / "missing.yaml"))[0] == 2


def test_feature_gates_change_the_answer(tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(
        (EXAMPLES / "cluster.yaml").read_text()
        + "\n---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: prio, namespace: default, uid: u1}\n"
        "spec: {devices: {requests: [{name: r, firstAvailable: [{name: a, deviceClassName: gpu.example.com}]}]}}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: prio-pod, namespace: default, uid: u2}\n"
        "spec: {containers: [{name: c, image: x}], resourceClaims: [{name: r, resourceClaimName: prio}]}\n"
    )
    _, on = run("simulate", str(state), "--pod", "default/prio-pod", "--node", "gpu-node-2", "-o", "json")
    _, off = run(
        "simulate",
        str(state),
        "--pod",
        "default/prio-pod",
        "--node",
        "gpu-node-2",
        "-o",
        "json",
        "--feature-gates",
        "DRAPrioritizedList=false",
    )
    assert json.loads(on)["pods"][0]["nodes"]["gpu-node-2"]["fits"]
    # PreFilter reports it as Unschedulable (a reason), not as an error.
    assert (
        "DRAPrioritizedList feature is disabled"
        in json.loads(off)["pods"][0]["nodes"]["gpu-node-2"]["reason"]
    )


def test_the_console_script_runs() -> None:
    result = zygote.run(
        [sys.executable, "-m", "extender.cli", "simulate", str(EXAMPLES), "--pod", "default/web"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert "no claims to allocate" in result.stdout


#: (name, arguments, exit code, what stdout or stderr says); documented in --help and docs/simulate-and-explain.md.
EXIT_CODES: list[tuple[str, list[str], int, str]] = [
    ("every pending pod, one fits nowhere", ["simulate", str(EXAMPLES)], 1, "pod default/oversized"),
    ("a pod that fits", ["simulate", str(EXAMPLES), "--pod", "default/trainer"], 0, "yes"),
    (
        "a pod that fits nowhere",
        ["simulate", str(EXAMPLES), "--pod", "default/oversized"],
        1,
        "needs 9 devices",
    ),
    (
        "fits nowhere, json",
        ["simulate", str(EXAMPLES), "--pod", "default/oversized", "-o", "json"],
        1,
        '"fits": false',
    ),
    ("a bound pod", ["simulate", str(EXAMPLES), "--pod", "default/batch-job"], 0, "is bound to gpu-node-1"),
    ("an unknown pod", ["simulate", str(EXAMPLES), "--pod", "default/nope"], 2, "not found"),
    ("a zero time budget", ["simulate", str(EXAMPLES), "--timeout", "0"], 2, "positive number of seconds"),
    (
        "DRA switched off",
        ["simulate", str(EXAMPLES), "--feature-gates", "DynamicResourceAllocation=false"],
        2,
        "would leave nothing to simulate",
    ),
    ("no command", [], 2, "usage: dra-extender"),
    ("version", ["--version"], 0, "dra-extender "),
]


@pytest.mark.parametrize(
    ("argv", "code", "says"), [c[1:] for c in EXIT_CODES], ids=[c[0] for c in EXIT_CODES]
)
def test_exit_codes(argv: list[str], code: int, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    try:
        got = main(argv, out)
    except SystemExit as exc:  # argparse's own exits (--version, bad values)
        got = int(exc.code or 0)
    captured = capsys.readouterr()
    assert got == code
    assert says in out.getvalue() + captured.out + captured.err
    assert "Traceback" not in captured.err


def test_two_claims_competing_for_one_device_are_said_to_compete() -> None:
    code, text = run("simulate", str(REPO / "tests" / "data" / "competing.yaml"))
    assert code == 1
    assert "request gpu: needs 1 device; 1 match" in text
    assert "each request fits alone, but they compete for the same devices: together they need 2" in text


def test_a_multi_line_cel_error_continues_under_its_row(tmp_path: Path) -> None:
    broken = (
        (REPO / "tests" / "data" / "competing.yaml")
        .read_text()
        .replace('device.driver == "gpu.example.com"', 'device.driver == "gpu.example.com" &&')
    )
    (tmp_path / "state.yaml").write_text(broken)
    code, text = run("simulate", str(tmp_path / "state.yaml"))
    assert code == 1
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("  n1 "))
    detail_column = lines[row].index("no    ") + len("no    ")
    continuation = lines[row + 1 :]
    assert continuation and all(line[:detail_column].strip() == "" for line in continuation)
    assert "CEL compile error" in text


def preemption_state(tmp_path: Path, low_priority: int) -> str:
    low = pod("low", ["low-claim"], node_name="node-1")
    low["spec"]["priority"] = low_priority
    held = claim(
        "low-claim", allocation=allocated(("driver-a", "pool-1", "d0"), ("driver-a", "pool-1", "d1"))
    )
    reserve(held, "low")
    high = pod("high", ["wanted"])
    high["spec"]["priority"] = 1000
    objects = [
        device_class(),
        node("node-1"),
        resource_slice("s", [device("d0"), device("d1")]),
        held,
        low,
        claim("wanted", requests=[exact(count=2)]),
        high,
    ]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def test_simulate_preempt_names_the_pods_to_evict(tmp_path: Path) -> None:
    state = preemption_state(tmp_path, low_priority=1)
    code, text = run("simulate", state, "--pod", "default/high", "--preempt")
    assert code == 1  # it does not fit without an eviction
    assert "preemption: on node-1 evict default/low" in text
    assert "preemption may help: lower-priority pods hold devices it could use" in text  # as filter says
    code, out = run("simulate", state, "--pod", "default/high", "--preempt", "-o", "json")
    assert json.loads(out)["pods"][0]["preemption"] == {"node-1": ["default/low"]}
    assert "preemption" not in run("simulate", state, "--pod", "default/high")[1]


def test_simulate_preempt_spares_a_pod_a_disruption_budget_protects(tmp_path: Path) -> None:
    objects: list[dict[str, object]] = [
        device_class(),
        node("node-1"),
        resource_slice("s", [device("d0"), device("d1")]),
    ]
    for i, app in enumerate(["guarded", "plain"]):
        held = claim(f"{app}-claim", allocation=allocated(("driver-a", "pool-1", f"d{i}")))
        reserve(held, app)
        objects += [held, pod(app, [f"{app}-claim"], node_name="node-1", priority=1, labels={"app": app})]
    objects += [
        pod_disruption_budget("keep-guarded", {"app": "guarded"}, allowed=0),
        claim("wanted", requests=[exact(count=1)]),
        pod("high", ["wanted"], priority=1000),
    ]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    code, out = run("simulate", str(path), "--pod", "default/high", "--preempt", "-o", "json")
    assert code == 1  # the pod fits nowhere until the eviction
    assert json.loads(out)["pods"][0]["preemption"] == {"node-1": ["default/plain"]}


def test_simulate_preempt_says_when_no_eviction_helps(tmp_path: Path) -> None:
    state = preemption_state(tmp_path, low_priority=5000)  # more important than the pending pod
    code, text = run("simulate", state, "--pod", "default/high", "--preempt")
    assert code == 1 and "preemption: evicting lower-priority pods frees enough on no node" in text


# --- --kubernetes-version ---------------------------------------------------------------------------


def _tainted_state(tmp_path: Path) -> Path:
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "drain"},
        "spec": {"deviceSelector": {"device": "d0"}, "taint": {"key": "drain", "effect": "NoSchedule"}},
    }
    objects = [
        device_class(),
        node(),
        resource_slice("s", [device("d0")]),
        rule,
        claim(),
        pod("p", ["claim-0"]),
    ]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


@pytest.mark.parametrize(
    ("version", "fits"), [("1.35", True), ("1.36", True), ("1.37", False), ("1.38", False)]
)
def test_simulate_decides_as_the_release_given(version: str, fits: bool, tmp_path: Path) -> None:
    """DeviceTaintRules count from 1.37 on (GA, on by default); in 1.36 the gate is beta and off,
    in 1.35 alpha and off, so kube-scheduler of those releases places the pod."""
    code, text = run("simulate", str(_tainted_state(tmp_path)), "--kubernetes-version", version, "-o", "json")
    answer = json.loads(text)["pods"][0]["nodes"]["node-1"]
    assert (code, answer["fits"]) == ((0, True) if fits else (1, False))


@pytest.mark.parametrize(("version", "fits"), [("1.36", True), ("1.37", False)])
def test_explain_offline_decides_as_the_release_given(version: str, fits: bool, tmp_path: Path) -> None:
    """The same rule as simulate's (kubectl dra explain passes the API server's release)."""
    state = str(_tainted_state(tmp_path))
    code, text = run("explain", "default/p", "--state", state, "--kubernetes-version", version, "-o", "json")
    assert (code, json.loads(text)["nodes"]["node-1"]["fits"]) == ((0, True) if fits else (1, False))


def test_explain_takes_a_release_only_offline(capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run("explain", "default/p", "--kubernetes-version", "1.36", "--server", "http://127.0.0.1:1")
    assert code == 2
    assert "--kubernetes-version goes with --state" in capsys.readouterr().err


def test_simulate_refuses_an_unknown_release_and_a_gate_the_release_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = str(_tainted_state(tmp_path))
    with pytest.raises(SystemExit) as exited:
        run("simulate", state, "--kubernetes-version", "1.33")
    assert exited.value.code == 2
    assert "Kubernetes 1.33 is not supported" in capsys.readouterr().err
    code, _ = run(
        "simulate", state, "--kubernetes-version", "1.36", "--feature-gates", "DRAOptionalNodeOperations=true"
    )
    assert code == 2
    assert "unrecognized feature gate: DRAOptionalNodeOperations (Kubernetes 1.36)" in capsys.readouterr().err


def test_an_error_on_one_node_makes_the_pod_unschedulable_in_simulate() -> None:
    """kube-scheduler ends the attempt at a Filter error on any node (a timeout from 1.36),
    whatever the other nodes answered: simulate counts the pod as not scheduled."""
    from typing import Any

    from extender.simulate import unschedulable

    result: dict[str, Any] = {
        "pods": [
            {
                "namespace": "default",
                "name": "p",
                "nodes": {
                    "node-1": {"fits": True, "error": None},
                    "node-2": {"fits": False, "error": "node node-2: timed out trying to allocate devices"},
                },
            }
        ]
    }
    assert unschedulable(result) == ["default/p"]
    result["pods"][0]["nodes"]["node-2"]["error"] = None
    assert unschedulable(result) == []


def test_simulate_answers_with_derived_attributes_on(tmp_path: Path) -> None:
    """DRADerivedAttributes (1.37): upstream's integration case through simulate. On: the two
    drivers' devices on the same NUMA node; off: the error every 1.37 allocator reports."""
    state = tmp_path / "state.yaml"
    objects = [
        node(),
        device_class("class-a", 'device.driver == "driver-a"'),
        device_class("class-b", 'device.driver == "driver-b"'),
        *NUMA,
        numa_claim(),
        pod("numa-pod", ["claim-0"]),
    ]
    state.write_text(yaml.safe_dump_all(objects))
    argv = ["simulate", str(state), "--pod", "default/numa-pod", "-o", "json"]
    code, on = run(*argv, "--feature-gates", "DRADerivedAttributes=true")
    assert code == 0
    decision = json.loads(on)["pods"][0]["nodes"]["node-1"]
    results = decision["allocations"]["claim-0"]["devices"]["results"]
    assert [(r["request"], r["device"]) for r in results] == [("req-a", "device-a2"), ("req-b", "device-b1")]
    code, off = run(*argv)
    assert code == 1
    assert json.loads(off)["pods"][0]["nodes"]["node-1"]["error"].endswith(
        "request req-a: cannot handle request with derived attributes, the feature is disabled"
    )


def test_simulate_answers_with_the_1_37_gates_on(tmp_path: Path) -> None:
    """Issue 28's check: with 1.37's PodGroup claims, node-allocatable devices (second API) and
    derived attributes on, simulate decides (exit 2 would be a refusal): the derived-attribute
    pod gets its devices, and the node-allocatable pod the statuses its bind would record."""
    gates = "DRAWorkloadResourceClaims=true,GenericWorkload=true,DRANodeAllocatableResources=true,DRADerivedAttributes=true"
    objects = [
        node(),
        with_allocatable(node("worker"), {"cpu": "10", "memory": "10Gi", "pods": 32}),
        device_class("class-a", 'device.driver == "driver-a"'),
        device_class("class-b", 'device.driver == "driver-b"'),
        device_class("cls", 'device.driver == "dra.example.com"'),
        *NUMA,
        numa_claim(),
        pod("numa-pod", ["claim-0"]),
        worker_slice(NUMA0),
        claim("node-allocatable-claim", [exact("req-0", "cls")]),
        pod(
            "cpu-pod",
            ["node-allocatable-claim"],
            containers=[
                {
                    **container("c1", {"cpu": "1"}),
                    "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "node-allocatable-claim"}]},
                }
            ],
        ),
    ]
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(objects))
    code, text = run("simulate", str(state), "--feature-gates", gates, "-o", "json")
    assert code == 0, text
    pods = {p["name"]: p["nodes"] for p in json.loads(text)["pods"]}
    results = pods["numa-pod"]["node-1"]["allocations"]["claim-0"]["devices"]["results"]
    assert [r["device"] for r in results] == ["device-a2", "device-b1"]
    assert pods["cpu-pod"]["worker"]["nodeAllocatableResourceClaimStatuses"] == [NUMA0_STATUS]


def test_a_subcommand_s_unknown_flag_gets_its_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["serve", "--bogus"])
    err = capsys.readouterr().err
    assert caught.value.code == 2
    assert err.startswith("usage: dra-extender serve ") and "error: unrecognized arguments: --bogus" in err


def test_examples_into_a_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["examples", str(target)]) == 2
    assert (
        capsys.readouterr().err
        == f"error: {target}: exists and is not a directory; give a directory to write the examples into\n"
    )
