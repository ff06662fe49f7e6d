"""``kubectl dra make-room`` end to end against the fake API server (tests/fakeapi) and an extender
in cluster mode watching it, on a fragmented scene: through the API server's service proxy (as
someone holding only the debug Role) it is the extender's /debug/make-room; from the objects (as
someone holding only the viewer ClusterRole) the same plan, computed here with serve's default
rules or the --make-room-* flags given. Exit codes as explain's: 0 a plan (or no move needed), 1
none, 2 errors. The documented commands run in tests/commands/test_kubectl_dra_fake_api.py; the
real kube-apiserver: tests/realcluster/test_kubectl_dra.py."""

from __future__ import annotations

import contextlib
import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from extender.cluster.kube import load_configuration
from extender.commands.kubectl_dra import COMPUTED, FROM_EXTENDER, main
from extender.service.app import create_app, create_ops_app
from extender.service.cluster_mode import build_cluster
from extender.service.runtime import ServeConfig
from extender.statefile import load_objects
from tests import builders as b
from tests.commands.test_kubectl_dra_fake_api import (
    LOOPBACK,
    SERVICE,
    VIEWER_ROLE,
    World,
    kubectl_dra,
)
from tests.docs_pages import blocks, page_text
from tests.fakeapi.server import FakeApiServer
from tests.integration.servers import cli_server_and_ops, thread_server
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.realcluster.test_kubectl_dra import DEBUG_ROLE, sidecar_endpoint
from tests.realcluster.workload import GPU_CLASS, GPU_DRIVER, gpu_class, gpu_slice
from tests.shared import REPO

#: One worker runs the whole file: the world (the fake API server and the extender) is built once.
pytestmark = pytest.mark.xdist_group("kubectl-dra-make-room")

LONG_AGO = "2026-01-05T08:00:00Z"


def running(name: str, node: str, gpu: int) -> list[dict[str, Any]]:
    """A pod of a ReplicaSet, started long ago, running on ``node`` with a claim holding its GPU
    ``gpu``: it may move (serve's default rules)."""
    claim = b.claim(
        f"{name}-gpu",
        [b.exact("gpu", GPU_CLASS, 1)],
        allocation=b.allocated((GPU_DRIVER, node, f"gpu-{gpu}")),
    )
    claim["status"]["allocation"]["devices"]["results"][0]["request"] = "gpu"
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]
    pod = b.pod(name, [f"{name}-gpu"], node_name=node)
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "uid-rs", "controller": True}
    ]
    pod["status"] = {"phase": "Running", "startTime": LONG_AGO}
    return [claim, pod]


def pending(name: str, gpus: int) -> list[dict[str, Any]]:
    return [b.claim(f"{name}-gpus", [b.exact("gpu", GPU_CLASS, gpus)]), b.pod(name, [f"{name}-gpus"])]


def scene() -> list[dict[str, Any]]:
    """node-a and node-b have two GPUs each, one held by a pod that may move (m-a, m-b): t,
    asking for two, fits nowhere until m-a moves to node-b; p, asking for one, fits as it is;
    big, asking for three, fits nowhere however pods move."""
    return [
        b.node("node-a"),
        b.node("node-b"),
        gpu_class(),
        gpu_slice("node-a", gpus=2),
        gpu_slice("node-b", gpus=2),
        *running("m-a", "node-a", 0),
        *running("m-b", "node-b", 0),
        *pending("t", 2),
        *pending("p", 1),
        *pending("big", 3),
    ]


#: The plan for t: free node-a by moving m-a onto node-b's free GPU.
T_PLAN = {
    "node": "node-a",
    "search": "exact",
    "moves": [
        {
            "pod": "default/m-a",
            "uid": "uid-m-a",
            "priority": 0,
            "toNode": "node-b",
            "devices": [f"{GPU_DRIVER}/node-b/gpu-1"],
        }
    ],
    "devices": [f"{GPU_DRIVER}/node-a/gpu-0", f"{GPU_DRIVER}/node-a/gpu-1"],
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The extender in cluster mode, in this process, with serve's default make-room rules (as
    ``dra-extender serve`` runs it: pods younger than 300 s stay), exposed through its Service."""
    from extender.cli import _parser
    from extender.serve_command import serve_config

    folder = tmp_path_factory.mktemp("kubectl-dra-make-room")
    rules = serve_config(_parser().parse_args(["serve"])).engine.make_room
    with FakeApiServer() as fake:
        endpoint_pod, _service, _endpoints = sidecar_endpoint(LOOPBACK, 0)
        endpoint_pod["status"] = {"phase": "Running", "podIP": LOOPBACK, "podIPs": [{"ip": LOOPBACK}]}
        for obj in (*scene(), endpoint_pod):
            fake.create(obj)
        config = ServeConfig(release_from_server=True)
        config = dataclasses.replace(config, engine=dataclasses.replace(config.engine, make_room=rules))
        service = build_cluster(load_configuration(kubeconfig(fake, folder)), config)
        with (
            thread_server(create_app(service)) as verbs,
            thread_server(create_ops_app(service, debug_views=True)) as ops,
            httpx.Client(base_url=verbs, timeout=10) as http,
        ):
            wait_until(lambda: ready(http))
            roles = {
                "viewer": [yaml.safe_load(VIEWER_ROLE.read_text())],
                "debugger": [yaml.safe_load(DEBUG_ROLE.read_text())],
            }
            people = {}
            for who, granted in roles.items():
                (folder / who).mkdir()
                people[who] = kubeconfig(fake, folder / who, fake.person(f"dra-{who}", *granted))
            built = World(fake, verbs, ops, ops, people)
            built.expose(ops)
            sent = {"Pod": fake.get("Pod", "p", "default"), "NodeNames": ["node-a", "node-b"]}
            httpx.post(verbs + "/scheduler/filter", content=orjson.dumps(sent), timeout=30)  # it decided
            yield built


#: (arguments, exit code, what the JSON answer holds)
ASKED: dict[str, tuple[list[str], int, dict[str, Any]]] = {
    "a pod that needs a move": (["default/t"], 0, {"found": True, "needsMoves": True, "plan": T_PLAN}),
    "a pod's NAME alone: namespace default": (["t"], 0, {"found": True, "plan": T_PLAN}),
    "a pod that fits as it is": (
        ["default/p"],
        0,
        {"found": True, "needsMoves": False, "summary": "fits on node-a without moving a pod"},
    ),
    "a pod no move can help": (
        ["default/big"],
        1,
        {"found": False, "noPlan": {"kind": "impossible", "problem": None}},
    ),
    "a shape that needs a move": (
        ["--class", GPU_CLASS, "--count", "2"],
        0,
        {"target": {"deviceClass": GPU_CLASS, "count": 2, "priority": 0}, "plan": T_PLAN},
    ),
    "a class that does not exist": (
        ["--class", "nope"],
        1,
        {"found": False, "noPlan": {"problem": "DeviceClass nope not found"}},
    ),
}


def holds(found: Any, expected: Any) -> bool:
    if isinstance(expected, dict) and isinstance(found, dict):
        return all(k in found and holds(found[k], v) for k, v in expected.items())
    return bool(found == expected)


def view_query(args: list[str]) -> str:
    if args[0] == "--class":
        count = args[args.index("--count") + 1] if "--count" in args else "1"
        return f"class={args[1]}&count={count}"
    return "pod=" + (args[0] if "/" in args[0] else f"default/{args[0]}")


@pytest.mark.parametrize(("args", "code", "expected"), ASKED.values(), ids=ASKED.keys())
def test_through_the_service_proxy_it_is_the_extenders_view(
    world: World, args: list[str], code: int, expected: dict[str, Any], tmp_path: Path
) -> None:
    ran = kubectl_dra(world, "debugger", tmp_path, "make-room", *args, "-o", "json")
    assert ran.code == code, ran.err
    answer = orjson.loads(ran.out)
    assert answer == world.view(f"/debug/make-room?{view_query(args)}") and holds(answer, expected), answer
    assert FROM_EXTENDER.format(service=SERVICE) in ran.err and "warning" not in ran.err


@pytest.mark.parametrize(("args", "code", "expected"), ASKED.values(), ids=ASKED.keys())
def test_from_the_objects_it_plans_as_the_extender_with_serves_rules(
    world: World, args: list[str], code: int, expected: dict[str, Any], tmp_path: Path
) -> None:
    ran = kubectl_dra(world, "viewer", tmp_path, "--source", "objects", "make-room", *args, "-o", "json")
    assert ran.code == code, ran.err
    answer = orjson.loads(ran.out)
    assert answer == world.view(f"/debug/make-room?{view_query(args)}") and holds(answer, expected), answer
    assert answer["rules"]["minAgeSeconds"] == 300.0
    assert COMPUTED in ran.err and "warning" not in ran.err


def test_the_text_table_lists_the_move_then_the_target(world: World, tmp_path: Path) -> None:
    for who, source in (("debugger", "extender"), ("viewer", "objects")):
        ran = kubectl_dra(world, who, tmp_path, "--source", source, "make-room", "default/t")
        assert ran.code == 0, ran.err
        lines = ran.out.splitlines()
        assert lines[:2] == [
            "make room for pod default/t (priority 0)",
            "fits on node-a after moving 1 pod (exact search)",
        ]
        assert lines[4].split() == ["1", "default/m-a", "0", "node-b", f"{GPU_DRIVER}/node-b/gpu-1"]
        assert lines[5].split()[:3] == ["then", "default/t", "node-a"]


# (the flags, where the answer comes from, exit code, what it says)
RULE_FLAGS: dict[str, tuple[list[str], str, int, str]] = {
    "no pod is old enough": (
        ["--make-room-min-age", "1e12"],
        "objects",
        1,
        "  node-a: 1 of 2 devices held by pods younger than the minimum age",
    ),
    "ReplicaSets are recreated whatever kinds are added": (
        ["--make-room-controller-kind", "LeaderWorkerSet"],
        "objects",
        0,
        "fits on node-a after moving 1 pod (exact search)",
    ),
    "the extender plans with its own rules, and says so": (
        ["--make-room-min-age", "1e12"],
        "extender",
        0,
        "fits on node-a after moving 1 pod (exact search)",
    ),
}


@pytest.mark.parametrize(("flags", "source", "code", "said"), RULE_FLAGS.values(), ids=RULE_FLAGS.keys())
def test_the_rule_flags_apply_where_it_computes_itself(
    world: World, flags: list[str], source: str, code: int, said: str, tmp_path: Path
) -> None:
    who = "viewer" if source == "objects" else "debugger"
    ran = kubectl_dra(world, who, tmp_path, "--source", source, "make-room", "default/t", *flags)
    assert ran.code == code, ran.err
    assert said in ran.out.splitlines(), ran.out
    warned = "warning: --make-room-* apply only to a plan computed from the objects" in ran.err
    assert warned == (source == "extender")


# (arguments, what the error says) -- each exits 2
ERRORS: dict[str, tuple[list[str], str]] = {
    "neither a pod nor a class": ([], "make-room: give NAMESPACE/POD or --class CLASS"),
    "both a pod and a class": (
        ["default/t", "--class", GPU_CLASS],
        "make-room: give NAMESPACE/POD or --class CLASS, not both",
    ),
    "a count without a class": (["default/t", "--count", "2"], "--count goes with --class"),
    "a count of zero": (["--class", GPU_CLASS, "--count", "0"], "a positive integer, not '0'"),
}


@pytest.mark.parametrize(("args", "said"), ERRORS.values(), ids=ERRORS.keys())
def test_usage_errors_exit_2(args: list[str], said: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
        main(["make-room", *args], io.StringIO())
    assert exited.value.code == 2 and said in err.getvalue(), err.getvalue()


@pytest.mark.parametrize("source", ["extender", "objects"])
def test_an_unknown_pod_is_an_error(world: World, source: str, tmp_path: Path) -> None:
    who = "viewer" if source == "objects" else "debugger"
    ran = kubectl_dra(world, who, tmp_path, "--source", source, "make-room", "default/nobody")
    assert (ran.code, ran.out) == (2, "")
    said = {
        "extender": f"error: the extender at {SERVICE} answered: pod default/nobody not found",
        "objects": "error: pod default/nobody not found (or not listed)",
    }
    assert ran.err.splitlines()[-1] == said[source]


# --- on the embedded default ------------------------------------------------------------------------

#: What ``kubectl dra make-room default/l4-batch`` says on the embedded default (examples/).
EMBEDDED_ANSWER = [
    "make room for pod default/l4-batch (priority 0)",
    "fits on gpu-node-1 after moving 1 pod (exact search)",
    "",
    "STEP  POD                           PRIORITY  TO NODE     DEVICES",
    "1     default/embedder-6f9c4-abcde  0         gpu-node-2  l4.example.com/gpu-node-2/l4-2",
    "then  default/l4-batch                        gpu-node-1  l4.example.com/gpu-node-1/l4-0, "
    "l4.example.com/gpu-node-1/l4-1, l4.example.com/gpu-node-1/l4-2, l4.example.com/gpu-node-1/l4-3",
    "",
    "rules: pods at or below priority 0 may move, if owned by Job, ReplicaSet, StatefulSet, started at "
    "least 300 s ago; at most 3 moves",
]


def test_the_page_shows_the_embedded_defaults_answer_as_it_is() -> None:
    """docs/kubectl-and-browser.md shows :data:`EMBEDDED_ANSWER`, which the test below gets."""
    shown = [
        block.body.rstrip("\n").split("\n")
        for block in blocks(page_text("docs/kubectl-and-browser.md"))
        if block.body.startswith(EMBEDDED_ANSWER[0])
    ]
    assert shown == [EMBEDDED_ANSWER]


def test_on_the_embedded_default_both_sources_give_the_plan_with_a_move(tmp_path: Path) -> None:
    """The example objects (examples/) in the fake API server, and ``dra-extender serve --state
    examples/ --ops-debug`` behind its Service: the extender's answer through the proxy and the
    one computed from the objects are the same plan, moving one pod."""
    objects, _problems = load_objects([str(REPO / "examples")])
    with FakeApiServer() as fake, cli_server_and_ops("--state", "examples/", "--ops-debug") as (_verbs, ops):
        for obj in objects:
            fake.create(obj)
        endpoint_pod, service, endpoints = sidecar_endpoint(LOOPBACK, int(ops.rsplit(":", 1)[1]))
        endpoint_pod["status"] = {"phase": "Running", "podIP": LOOPBACK, "podIPs": [{"ip": LOOPBACK}]}
        for obj in (endpoint_pod, service, endpoints):
            fake.create(obj)
        roles = {
            "viewer": [yaml.safe_load(VIEWER_ROLE.read_text())],
            "debugger": [yaml.safe_load(DEBUG_ROLE.read_text())],
        }
        people = {}
        for who, granted in roles.items():
            (tmp_path / who).mkdir()
            people[who] = kubeconfig(fake, tmp_path / who, fake.person(f"dra-{who}", *granted))
        embedded = World(fake, "", ops, ops, people)
        for who, source in (("debugger", "extender"), ("viewer", "objects")):
            ran = kubectl_dra(embedded, who, tmp_path, "--source", source, "make-room", "default/l4-batch")
            assert ran.code == 0, ran.err
            assert ran.out.splitlines() == EMBEDDED_ANSWER, ran.out
            shape = kubectl_dra(
                embedded,
                who,
                tmp_path,
                "--source",
                source,
                "make-room",
                "--class",
                "l4.example.com",
                "--count",
                "4",
            )
            assert shape.code == 0 and shape.out.splitlines()[4] == EMBEDDED_ANSWER[4], shape.out
