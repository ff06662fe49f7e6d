"""``kubectl dra`` end to end on a fresh clone: against the fake API server (tests/fakeapi) and an
extender in cluster mode watching it (the service's own apps on loopback ports, real HTTP).

Every command is answered through the API server's service proxy (as someone holding only the
shipped debug Role: they may list nothing), and from the objects (as someone holding only the
shipped viewer ClusterRole); either way its answer is the extender's own view, or what its live
filter decides. Each reason the extender cannot be asked is named, and the answer computed from
the objects instead; with ``--source extender`` each is an error (exit 2). The same against the
real kube-apiserver: tests/realcluster/test_kubectl_dra.py (skipped where its binaries are
missing); what the fake's proxy and RBAC answer: tests/fakeapi/test_fakeapi.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from extender.cluster.kube import load_configuration
from extender.cluster.state import without_secrets
from extender.commands.kubectl_dra import COMPUTED, FROM_EXTENDER, main
from extender.service.app import create_app, create_ops_app
from extender.service.cluster_mode import build_cluster
from extender.service.runtime import ServeConfig
from tests.builders import allocated, node
from tests.docs_pages import Command, all_commands
from tests.documented_runs import ran as ran_documented
from tests.fakeapi.server import ApiError, FakeApiServer
from tests.integration.servers import thread_server
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.realcluster.controlplane import EXTENDER_NAMESPACE, free_port
from tests.realcluster.test_kubectl_dra import (
    DEBUG_ROLE,
    SIDECAR_SERVICE,
    assert_simulated_as_filtered,
    sidecar_endpoint,
)
from tests.realcluster.workload import (
    GPU_CLASS,
    GPU_DRIVER,
    gpu_class,
    gpu_slice,
    one_gpu_claim,
    pod_with_claims,
)
from tests.shared import REPO

#: One worker runs the whole file: the world (the fake API server and the extender) is built once.
pytestmark = pytest.mark.xdist_group("kubectl-dra-fake-api")

VIEWER_ROLE = REPO / "manifests" / "common" / "viewer-role.yaml"
SERVICE = f"{EXTENDER_NAMESPACE}/{SIDECAR_SERVICE}:metrics"
LOOPBACK = "127.0.0.1"


def held(name: str, on: str) -> dict[str, Any]:
    """A claim for one GPU, allocated gpu-0 of node ``on``."""
    claim = one_gpu_claim(name)
    allocation = allocated((GPU_DRIVER, on, "gpu-0"))
    allocation["devices"]["results"][0]["request"] = "gpu"  # one_gpu_claim's request
    return {**claim, "status": {"allocation": allocation}}


def scene() -> list[dict[str, Any]]:
    """As tests/realcluster/test_kubectl_dra.py: node-a has two GPUs, one held; node-b one, held.
    Pod p asks for one GPU (fits node-a), q for two (fits nowhere); cpu-only asks for none. Claim
    typo (no pod yet) selects an attribute the driver does not publish (``model`` misspelt)."""
    return [
        node("node-a"),
        node("node-b"),
        gpu_class(),
        gpu_slice("node-a", gpus=2),
        gpu_slice("node-b", gpus=1),
        held("held-a", "node-a"),
        held("held-b", "node-b"),
        one_gpu_claim("p-gpu"),
        pod_with_claims("p", ["p-gpu"]),
        one_gpu_claim("q-gpus", count=2),
        pod_with_claims("q", ["q-gpus"]),
        pod_with_claims("cpu-only"),
        one_gpu_claim("typo", selectors=[f'device.attributes["{GPU_DRIVER}"].modle == "a100"']),
    ]


@dataclass
class World:
    """The fake API server holding :func:`scene`, the extender watching it, and three people's
    kubeconfigs: ``viewer`` (the viewer ClusterRole), ``debugger`` (the debug Role only) and
    ``both``."""

    fake: FakeApiServer
    #: The extender's verbs listener (its live filter), and its ops listener with the debug
    #: views (--ops-debug) and without them.
    verbs: str
    ops: str
    bare_ops: str
    people: dict[str, str]

    def view(self, path: str) -> Any:
        """One of the extender's debug views, asked directly."""
        return httpx.get(self.ops + path, timeout=30).json()

    def live_filter(self, pod: str) -> dict[str, Any]:
        """The extender's filter answer for ``pod`` on both nodes, as kube-scheduler asks."""
        sent = {"Pod": self.fake.get("Pod", pod, "default"), "NodeNames": ["node-a", "node-b"]}
        answer: dict[str, Any] = httpx.post(
            self.verbs + "/scheduler/filter", content=orjson.dumps(sent), timeout=30
        ).json()
        return answer

    def expose(self, url: str | None, *, ready: bool = True) -> None:
        """The extender's Service and its Endpoints as the proxy reads them, to ``url``'s port
        on this machine (its one address ready, or not); None: neither. The endpoint's Pod stays
        (the extender watches Pods: its cache is not disturbed)."""
        for kind in ("Service", "Endpoints"):
            with contextlib.suppress(ApiError):
                self.fake.delete_direct(kind, SIDECAR_SERVICE, EXTENDER_NAMESPACE)
        if url is None:
            return
        _pod, service, endpoints = sidecar_endpoint(LOOPBACK, int(url.rsplit(":", 1)[1]))
        if not ready:
            subset = endpoints["subsets"][0]
            subset["notReadyAddresses"] = subset.pop("addresses")
        self.fake.create(service)
        self.fake.create(endpoints)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """The extender in cluster mode, in this process: its verbs app and its ops app (with the
    debug views, as --ops-debug serves them, and without), each served on a loopback port of its
    own as ``dra-extender serve`` runs them; the endpoint's Pod is in the scene from the start."""
    folder = tmp_path_factory.mktemp("kubectl-dra")
    with FakeApiServer() as fake:
        endpoint_pod, _service, _endpoints = sidecar_endpoint(LOOPBACK, 0)
        endpoint_pod["status"] = {"phase": "Running", "podIP": LOOPBACK, "podIPs": [{"ip": LOOPBACK}]}
        for obj in (*scene(), endpoint_pod):
            fake.create(obj)
        service = build_cluster(
            load_configuration(kubeconfig(fake, folder)), ServeConfig(release_from_server=True)
        )
        with (
            thread_server(create_app(service)) as verbs,
            thread_server(create_ops_app(service, debug_views=True)) as ops,
            thread_server(create_ops_app(service, debug_views=False)) as bare_ops,
            httpx.Client(base_url=verbs, timeout=10) as http,
        ):
            wait_until(lambda: ready(http))
            roles = {
                "viewer": [yaml.safe_load(VIEWER_ROLE.read_text())],
                "debugger": [yaml.safe_load(DEBUG_ROLE.read_text())],
            }
            roles["both"] = roles["viewer"] + roles["debugger"]
            people = {}
            for who, granted in roles.items():
                (folder / who).mkdir()
                people[who] = kubeconfig(fake, folder / who, fake.person(f"dra-{who}", *granted))
            world = World(fake, verbs, ops, bare_ops, people)
            world.live_filter("p")  # the extender has decided: its replica is the active one
            yield world


@pytest.fixture
def world(served: World) -> Iterator[World]:
    """The module's world, the extender exposed through its Service; as such again afterwards."""
    served.expose(served.ops)
    yield served
    served.expose(served.ops)


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str
    #: Where ``snapshot`` wrote.
    written: Path


def kubectl_dra(world: World, who: str, folder: Path, *args: str) -> Ran:
    """``kubectl dra --kubeconfig (who's) ARGS`` in this process; ``{file}`` in ARGS: a file in
    ``folder``."""
    written = folder / "snapshot.json"
    argv = ["--kubeconfig", world.people[who], *(a.format(file=written) for a in args)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv, out)
    return Ran(code, out.getvalue(), err.getvalue(), written)


# --- each command's answer, and what it equals ---------------------------------------------------


def identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def snapshot_is_the_extenders(world: World, ran: Ran) -> None:
    """The objects the extender decides from, as its /debug/snapshot shows them (what a snapshot
    shows of a Pod: the same whether the extender's cache or the API server listed it)."""
    items = json.loads(ran.written.read_text())["items"]
    shown = [without_secrets(o) if o["kind"] == "Pod" else o for o in items]
    assert sorted(shown, key=identity) == sorted(world.view("/debug/snapshot")["items"], key=identity)
    assert {("Pod", "default", "p"), ("ResourceClaim", "default", "held-a")} <= {identity(o) for o in items}


def explain_is_the_extenders(world: World, ran: Ran) -> None:
    explained = json.loads(ran.out)
    assert explained == world.view("/debug/pods/default/p")
    assert [explained["nodes"][n]["fits"] for n in ("node-a", "node-b")] == [True, False]


def capacity_is_the_extenders(world: World, ran: Ran) -> None:
    view = json.loads(ran.out)
    assert view == world.view(f"/debug/capacity?class={GPU_CLASS}&count=1")
    free = {n["node"]: (n["total"], n["allocated"], n["free"]) for n in view["nodes"]}
    assert free == {"node-a": (2, 1, 1), "node-b": (1, 1, 0)} and view["shape"]["byNode"] == {"node-a": 1}


def simulate_is_the_live_filter(world: World, ran: Ran) -> None:
    (decided,) = json.loads(ran.out)["pods"]
    assert_simulated_as_filtered(decided, world.live_filter("p"))


def pending_is_the_live_filter(world: World, ran: Ran) -> None:
    """Each pod waiting for devices (not cpu-only): the nodes the live filter passes, or the
    reasons it gives, counted."""
    pods = {p["pod"]: p for p in json.loads(ran.out)["pods"]}
    assert set(pods) == {"default/p", "default/q"}
    for name in ("p", "q"):
        live = world.live_filter(name)
        reasons = Counter({**live["FailedNodes"], **live["FailedAndUnresolvableNodes"]}.values())
        assert (pods[f"default/{name}"]["fitsOn"], pods[f"default/{name}"]["reasons"]) == (
            live["NodeNames"],
            dict(reasons),
        )
    assert pods["default/q"]["fitsOn"] == []


def lint_finds_the_typo(world: World, ran: Ran) -> None:
    """The claim that can never match, and no other (q fits nowhere now, but could)."""
    [finding] = json.loads(ran.out)["findings"]
    assert (finding["name"], finding["check"], finding["didYouMean"]) == (
        "typo",
        "attribute",
        f"{GPU_DRIVER}/model",
    )


# command -> (its arguments, exit code, what its answer equals)
COMMANDS: dict[str, tuple[list[str], int, Callable[[World, Ran], None]]] = {
    "snapshot": (["snapshot", "-o", "{file}"], 0, snapshot_is_the_extenders),
    "explain": (["explain", "default/p", "-o", "json"], 0, explain_is_the_extenders),
    "capacity": (
        ["capacity", "--class", GPU_CLASS, "--count", "1", "-o", "json"],
        0,
        capacity_is_the_extenders,
    ),
    "simulate": (["simulate", "--pod", "default/p", "-o", "json"], 0, simulate_is_the_live_filter),
    "pending": (["pending", "-o", "json"], 1, pending_is_the_live_filter),  # q fits nowhere
    "lint": (["lint", "-o", "json"], 1, lint_finds_the_typo),
}


def answered(world: World, ran: Ran, command: str) -> None:
    _args, code, check = COMMANDS[command]
    assert ran.code == code, ran.err
    check(world, ran)


@pytest.mark.parametrize("command", COMMANDS)
def test_through_the_service_proxy_each_command_is_the_extenders_answer(
    world: World, command: str, tmp_path: Path
) -> None:
    """Holding only the debug Role (it may list nothing): answered by the extender, which says so."""
    ran = kubectl_dra(world, "debugger", tmp_path, *COMMANDS[command][0])
    answered(world, ran, command)
    assert FROM_EXTENDER.format(service=SERVICE) in ran.err and "(replica " in ran.err
    assert "kubectl dra: warning" not in ran.err and COMPUTED not in ran.err  # the active replica answered
    if command == "snapshot":  # the extender's cache as it holds it, to the letter
        assert json.loads(ran.written.read_text())["items"] == world.view("/debug/snapshot")["items"]


@pytest.mark.parametrize("command", COMMANDS)
def test_from_the_objects_each_command_answers_as_the_extender(
    world: World, command: str, tmp_path: Path
) -> None:
    """``--source objects``, holding only the viewer ClusterRole: computed from what it lists,
    without asking the extender, and the same answer."""
    proxied = len(world.fake.calls("GET", "/proxy/"))
    ran = kubectl_dra(world, "viewer", tmp_path, "--source", "objects", *COMMANDS[command][0])
    answered(world, ran, command)
    assert COMPUTED in ran.err and "cannot be asked" not in ran.err and "kubectl dra: warning" not in ran.err
    assert len(world.fake.calls("GET", "/proxy/")) == proxied


# --- why the extender cannot be asked ------------------------------------------------------------


def no_service(world: World) -> None:
    world.expose(None)


def no_ready_endpoint(world: World) -> None:
    world.expose(world.ops, ready=False)


def nothing_listens(world: World) -> None:
    world.expose(f"http://{LOOPBACK}:{free_port()}")


def without_ops_debug(world: World) -> None:
    world.expose(world.bare_ops)


@dataclass(frozen=True)
class Fallback:
    """A way the extender cannot be asked: who asks, what the world is then, what kubectl dra
    says; each case asks with another command, so that every command falls back once."""

    who: str
    arrange: Callable[[World], None] | None
    said: str
    command: str


FALLBACKS = {
    "403 forbidden to proxy": Fallback(
        "viewer",
        None,
        f"not allowed to reach {SERVICE} through the API server (403: services "
        f'"{SIDECAR_SERVICE}:metrics" is forbidden: User "dra-viewer" cannot get resource "services/proxy"',
        "explain",
    ),
    "404 no Service": Fallback(
        "both",
        no_service,
        f'no Service {EXTENDER_NAMESPACE}/{SIDECAR_SERVICE} (404: endpoints "{SIDECAR_SERVICE}" not found)',
        "capacity",
    ),
    "503 no ready endpoint": Fallback(
        "both",
        no_ready_endpoint,
        f"{SERVICE} has no ready endpoint, or did not answer (503: no endpoints available for service "
        f'"{SIDECAR_SERVICE}:metrics")',
        "simulate",
    ),
    "503 an endpoint that does not answer": Fallback(
        "both",
        nothing_listens,
        f"{SERVICE} has no ready endpoint, or did not answer (503: error trying to reach service: "
        f"dial tcp {LOOPBACK}:",
        "pending",
    ),
    "404 from an extender without --ops-debug": Fallback(
        "both",
        without_ops_debug,
        f"{SERVICE} answers, but not with the debug views: its extender runs without --ops-debug",
        "snapshot",
    ),
}


@pytest.mark.parametrize("case", FALLBACKS.values(), ids=FALLBACKS.keys())
def test_each_reason_the_extender_cannot_be_asked_is_said_and_the_objects_answer(
    world: World, case: Fallback, tmp_path: Path
) -> None:
    if case.arrange is not None:
        case.arrange(world)
    ran = kubectl_dra(world, case.who, tmp_path, *COMMANDS[case.command][0])
    answered(world, ran, case.command)
    assert f"kubectl dra: the extender cannot be asked: {case.said}" in ran.err
    assert COMPUTED in ran.err


@pytest.mark.parametrize("case", FALLBACKS.values(), ids=FALLBACKS.keys())
def test_with_source_extender_each_reason_is_an_error(world: World, case: Fallback, tmp_path: Path) -> None:
    if case.arrange is not None:
        case.arrange(world)
    ran = kubectl_dra(world, case.who, tmp_path, "--source", "extender", *COMMANDS[case.command][0])
    assert (ran.code, ran.out) == (2, ""), ran.err
    assert ran.err.splitlines()[-1].startswith(f"error: the extender cannot be asked: {case.said}")
    assert COMPUTED not in ran.err and not ran.written.exists()


# --- what is an error whatever the source allows -----------------------------------------------------

ASKED = (
    f"/api/v1/namespaces/{EXTENDER_NAMESPACE}/services/{SIDECAR_SERVICE}:metrics/proxy/debug/pods/default/p"
)

# (case, --source, what the last line says)
HUNG_UP: list[tuple[str, str, str]] = [
    ("auto: not a reason to fall back", "auto", f"error: the API server did not answer: GET {ASKED}"),
    ("extender", "extender", f"error: the API server did not answer: GET {ASKED}"),
    ("objects", "objects", "error: API discovery of resource.k8s.io: GET /apis/resource.k8s.io"),
]


@pytest.mark.parametrize(("case", "source", "said"), HUNG_UP, ids=[c[0] for c in HUNG_UP])
def test_an_api_server_that_hangs_up_is_an_error(case: str, source: str, said: str, tmp_path: Path) -> None:
    """It accepts each connection and closes it unanswered (an outage of the fake)."""
    with FakeApiServer() as fake:
        fake.faults.outage(60)
        argv = ["--kubeconfig", kubeconfig(fake, tmp_path), "--source", source, "explain", "default/p"]
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main(argv, io.StringIO()) == 2
    assert err.getvalue().splitlines()[-1].startswith(said), err.getvalue()


def test_a_pod_the_extender_does_not_know_is_an_error_not_a_reason_to_fall_back(
    world: World, tmp_path: Path
) -> None:
    ran = kubectl_dra(world, "both", tmp_path, "explain", "default/nobody")
    assert (ran.code, ran.out) == (2, "")
    assert (
        ran.err.splitlines()[-1] == f"error: the extender at {SERVICE} answered: pod default/nobody not found"
    )


# --- the commands the README and docs/ give, as written ---------------------------------------------

#: The pod the documented commands name, asking for one GPU (it fits node-a).
DOCUMENTED_POD = "my-pod"


def documented_kubectl_dra() -> list[Command]:
    return [c for c in all_commands() if c.text.startswith("kubectl dra ") and "--help" not in c.text]


@pytest.fixture(scope="module")
def documented_pod(served: World) -> Iterator[None]:
    """``default/my-pod``, as the documented commands name it, from the first documented command
    on (they come last in this file: the scene of the tests above stays as it is); the extender
    has it in its cache and its snapshot."""
    world = served
    world.fake.create(one_gpu_claim(f"{DOCUMENTED_POD}-gpu"))
    world.fake.create(pod_with_claims(DOCUMENTED_POD, [f"{DOCUMENTED_POD}-gpu"]))
    wait_until(lambda: world.live_filter(DOCUMENTED_POD)["NodeNames"] == ["node-a"])
    # The snapshot view is encoded once per 2 s window (debug_http.py): until it holds the pod.
    wait_until(lambda: DOCUMENTED_POD in json.dumps(world.view("/debug/snapshot")))
    yield
    world.fake.delete_direct("Pod", DOCUMENTED_POD, "default")
    world.fake.delete_direct("ResourceClaim", f"{DOCUMENTED_POD}-gpu", "default")
    wait_until(lambda: DOCUMENTED_POD not in json.dumps(world.view("/debug/snapshot")))


@pytest.mark.parametrize("command", documented_kubectl_dra(), ids=lambda c: c.where)
def test_each_documented_command_runs_as_written(
    world: World, documented_pod: None, command: Command, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its words as the page gives them, in a folder of its own (``-o state.json`` writes
    there), as someone holding the viewer ClusterRole and the debug Role (the page's two
    bindings): it answers from the extender, exits 0, or 1 where a pending pod fits nowhere (q),
    and says nothing is wrong."""
    monkeypatch.chdir(tmp_path)
    words = shlex.split(command.text)
    assert words[:2] == ["kubectl", "dra"]
    ran = kubectl_dra(world, "both", tmp_path, *words[2:])
    assert ran.code in (0, 1), ran.err
    assert FROM_EXTENDER.format(service=SERVICE) in ran.err, ran.err
    assert "error:" not in ran.err and "warning" not in ran.err, ran.err
    if "-o" in words:
        written = tmp_path / words[words.index("-o") + 1]
        assert json.loads(written.read_text())["items"], command.text
    else:
        assert ran.out.strip(), command.text
    if DOCUMENTED_POD in command.text:
        assert DOCUMENTED_POD in ran.out and "node-a" in ran.out, ran.out
    ran_documented(command.text)


def test_the_documents_give_kubectl_dra_commands() -> None:
    assert len({c.text for c in documented_kubectl_dra()}) >= 5
