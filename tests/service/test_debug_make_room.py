"""/debug/make-room over the real app (httpx through its ASGI transport, and a served
``dra-extender serve --state examples/``): on the embedded default, with serve's own rules, the
pending pod l4-batch (examples/make-room.yaml) gets a plan that moves one pod; a pod that fits
already says so; bad queries get 400 with the reason, an unknown pod 404; the formats, the
headers and the ops listener are the other views'. What the view holds:
tests/service/test_make_room_view.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import yaml

from extender.cli import _parser
from extender.defaults import REPLICA_HEADER
from extender.serve_command import serve_config
from extender.service.app import create_ops_app
from extender.service.runtime import ServeConfig
from tests.integration.servers import cli_server
from tests.service.harness import Running, run_with_service
from tests.shared import REPO

EXAMPLES = str(REPO / "examples")
#: The embedded default's plan for l4-batch (examples/make-room.yaml): free gpu-node-1 by moving
#: its one L4 pod onto gpu-node-2's free L4s.
L4_PLAN: dict[str, Any] = {
    "node": "gpu-node-1",
    "search": "exact",
    "moves": [
        {
            "pod": "default/embedder-6f9c4-abcde",
            "uid": "uid-pod-embedder-6f9c4-abcde",
            "priority": 0,
            "toNode": "gpu-node-2",
            "devices": ["l4.example.com/gpu-node-2/l4-2"],
        }
    ],
    "devices": [f"l4.example.com/gpu-node-1/l4-{i}" for i in range(4)],
}


def served_config() -> ServeConfig:
    """``dra-extender serve --state examples/`` as its flags configure it (serve's rules: 300 s)."""
    return serve_config(_parser().parse_args(["serve", "--state", EXAMPLES]))


def run(body: Any) -> Any:
    return run_with_service(body, served_config())


def test_on_the_embedded_default_the_pending_l4_pod_gets_a_plan_with_a_move() -> None:
    async def body(r: Running) -> None:
        answer = await r.client.get("/debug/make-room?pod=default/l4-batch")
        assert answer.status_code == 200
        data = answer.json()
        assert data["target"] == {"pod": "default/l4-batch", "priority": 0}
        assert (data["found"], data["needsMoves"], data["plan"], data["noPlan"]) == (
            True,
            True,
            L4_PLAN,
            None,
        )
        assert data["summary"] == "fits on gpu-node-1 after moving 1 pod (exact search)"
        assert data["rules"]["minAgeSeconds"] == 300.0 and data["rules"]["maxMoves"] == 3
        shape = (await r.client.get("/debug/make-room?class=l4.example.com&count=4")).json()
        assert shape["target"] == {"deviceClass": "l4.example.com", "count": 4, "priority": 0}
        assert shape["plan"] == L4_PLAN

    run(body)


# (query, what the answer says)
ANSWERS: dict[str, tuple[str, str]] = {
    "a pod that fits already": ("pod=default/trainer", "fits on gpu-node-3 without moving a pod"),
    "a bound pod": ("pod=default/batch-job", "bound to gpu-node-1: nothing to make room for"),
    "a pod that fits nowhere, however pods move": (
        "pod=default/oversized",
        "no plan: impossible (no node fits the target even with every pod that may move gone)",
    ),
    "a shape that fits already": ("class=gpu.example.com&count=8", "fits on gpu-node-2 without moving a pod"),
    "a class alone asks for one device": ("class=l4.example.com", "fits on gpu-node-1 without moving a pod"),
}


@pytest.mark.parametrize(("query", "summary"), ANSWERS.values(), ids=ANSWERS.keys())
def test_each_answer_says_what_it_found(query: str, summary: str) -> None:
    async def body(r: Running) -> None:
        answer = await r.client.get(f"/debug/make-room?{query}")
        assert answer.status_code == 200 and answer.json()["summary"] == summary

    run(body)


def test_no_plan_says_why_per_node_in_the_explain_style() -> None:
    async def body(r: Running) -> None:
        text = (await r.client.get("/debug/make-room?pod=default/oversized&format=text")).text
        reasons = (await r.client.get("/debug/make-room?pod=default/oversized")).json()["noPlan"]["reasons"]
        assert set(reasons) == {"cpu-node-1", "gpu-node-1", "gpu-node-2", "gpu-node-3"}
        # batch-job holds two GPUs of gpu-node-1 and no controller recreates it.
        assert reasons["gpu-node-1"] == "2 of 8 devices held by pods that no controller recreates"
        for node, why in reasons.items():
            assert f"  {node}: {why}\n" in text

    run(body)


def test_the_text_table_lists_the_moves_in_order_then_the_target() -> None:
    async def body(r: Running) -> None:
        answer = await r.client.get("/debug/make-room?pod=default/l4-batch&format=text")
        assert answer.headers["content-type"].startswith("text/plain")
        lines = answer.text.splitlines()
        assert lines[:2] == [
            "make room for pod default/l4-batch (priority 0)",
            "fits on gpu-node-1 after moving 1 pod (exact search)",
        ]
        assert lines[3].split() == ["STEP", "POD", "PRIORITY", "TO", "NODE", "DEVICES"]
        assert lines[4].split() == [
            "1",
            "default/embedder-6f9c4-abcde",
            "0",
            "gpu-node-2",
            "l4.example.com/gpu-node-2/l4-2",
        ]
        assert lines[5].split()[:3] == ["then", "default/l4-batch", "gpu-node-1"]
        assert lines[-1].startswith(
            "rules: pods at or below priority 0 may move, if owned by Job, ReplicaSet"
        )
        as_yaml = await r.client.get("/debug/make-room?pod=default/l4-batch&format=yaml")
        assert yaml.safe_load(as_yaml.text)["plan"] == L4_PLAN

    run(body)


BAD_QUERIES = {
    "neither pod nor class": ("", "give pod=NAMESPACE/NAME or class=CLASS (with count=N)"),
    "both pod and class": (
        "pod=default/l4-batch&class=l4.example.com",
        "give pod=NAMESPACE/NAME or class=CLASS (with count=N), not both",
    ),
    "a count of zero": ("class=l4.example.com&count=0", "count must be a positive integer, not '0'"),
    "a count that is not a number": ("class=l4.example.com&count=two", "count must be a positive integer"),
    "a negative count": ("class=l4.example.com&count=-1", "count must be a positive integer"),
    "a count with a pod": ("pod=default/l4-batch&count=2", "count goes with class, not with pod"),
    "a pod without its namespace": ("pod=l4-batch", "pod must be NAMESPACE/NAME, not 'l4-batch'"),
    "a pod with an empty name": ("pod=default/", "pod must be NAMESPACE/NAME"),
    "a pod with an empty namespace": ("pod=/l4-batch", "pod must be NAMESPACE/NAME"),
    "a pod with two slashes": ("pod=a/b/c", "pod must be NAMESPACE/NAME"),
    "an empty class": ("class=", "class must name a DeviceClass"),
    "an unknown format": ("pod=default/l4-batch&format=xml", "format must be one of json, text, yaml"),
}


@pytest.mark.parametrize(("query", "said"), BAD_QUERIES.values(), ids=BAD_QUERIES.keys())
def test_bad_queries_get_400_with_the_reason(query: str, said: str) -> None:
    async def body(r: Running) -> None:
        answer = await r.client.get(f"/debug/make-room?{query}")
        assert answer.status_code == 400 and answer.json()["Error"].startswith(said), answer.text

    run(body)


def test_an_unknown_pod_is_404_as_for_debug_pods() -> None:
    async def body(r: Running) -> None:
        answer = await r.client.get("/debug/make-room?pod=default/nobody")
        assert answer.status_code == 404
        assert answer.json() == {"Error": "pod default/nobody not found"}
        assert (await r.client.get("/debug/pods/default/nobody")).json() == answer.json()

    run(body)


def test_the_headers_are_the_other_views_and_the_ops_listener_serves_it_only_with_ops_debug() -> None:
    async def body(r: Running) -> None:
        answer = await r.client.get("/debug/make-room?pod=default/l4-batch")
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["cache-control"] == "no-store"
        assert answer.headers[REPLICA_HEADER]
        for views, status in ((False, 404), (True, 200)):
            app = create_ops_app(r.service, debug_views=views)
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://ops"
            ) as ops:
                assert (await ops.get("/debug/make-room?pod=default/l4-batch")).status_code == status

    run(body)


def test_dra_extender_serve_on_the_embedded_default_answers_it() -> None:
    """The embedded default as the README starts it (``serve --state examples/``), over TCP."""
    with cli_server("--state", "examples/") as url:
        answer = httpx.get(f"{url}/debug/make-room", params={"pod": "default/l4-batch"}, timeout=30)
        assert answer.status_code == 200 and answer.json()["plan"] == L4_PLAN
        text = httpx.get(f"{url}/debug/make-room?class=l4.example.com&count=4&format=text", timeout=30).text
        assert "1     default/embedder-6f9c4-abcde  0         gpu-node-2" in text
