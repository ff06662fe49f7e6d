"""The debug views that kubectl dra and browsers read: /debug/snapshot (replayed offline it
decides as the live extender), the capacity page (/debug/ui: its figures are /debug/capacity's),
and serving them on the ops listener (only with --ops-debug, one at a time)."""

from __future__ import annotations

import asyncio
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi.responses import Response

from extender.cluster.state import as_list_json, object_key
from extender.explain import engine_from_state
from extender.service import debug
from extender.service.app import create_app, create_ops_app
from extender.service.debug_http import (
    CHUNK_BYTES,
    PAGE_NODES,
    EncodedSnapshot,
    OneAtATime,
    SentInTime,
    StreamSlots,
)
from extender.service.runtime import ServeConfig, build_embedded
from extender.statefile import load_objects
from tests.builders import attrs, claim, device, device_class, exact, node, pod, resource_slice
from tests.service.fixtures import binding
from tests.service.harness import Running, run_with_service
from tests.shared import REPO

EXAMPLES = REPO / "examples"


def listed(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": objects}


def identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (str(obj["kind"]), *object_key(obj))


class DataCells(HTMLParser):
    """The page's ``data-`` figures: per table (its id) a list of rows, each the row's own
    attributes and its cells' ``data-*`` attributes with their text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[dict[str, Any]]] = {}
        self._table: str | None = None
        self._cell: dict[str, str] | None = None
        self.svgs = 0
        self.external: list[str] = []
        self.tags: set[str] = set()
        self.attributes: set[str] = set()

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        attrs_ = {k: v or "" for k, v in attributes}
        self.tags.add(tag)
        self.attributes |= set(attrs_)
        for key in ("src", "href"):
            value = attrs_.get(key, "")
            if "//" in value or value.startswith("/"):
                self.external.append(value)  # nothing absolute: the page works under a proxy path
        if tag == "svg":
            self.svgs += 1
        if tag == "table":
            self._table = attrs_.get("id", "")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append({"row": attrs_, "cells": []})
        elif tag == "td" and self._table is not None and self.tables[self._table]:
            self._cell = {k: v for k, v in attrs_.items() if k.startswith("data-")}
            self._cell["text"] = ""
            self.tables[self._table][-1]["cells"].append(self._cell)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        if tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data


def page_figures(html: str) -> DataCells:
    parser = DataCells()
    parser.feed(html)
    return parser


def by_class(parser: DataCells, table: str, attribute: str) -> dict[str, dict[str, int]]:
    """``{class: {attribute value: figure}}`` from a table's rows."""
    out: dict[str, dict[str, int]] = {}
    for row in parser.tables[table]:
        if "data-class" in row["row"]:
            out[row["row"]["data-class"]] = {
                c[attribute]: int(c["text"]) for c in row["cells"] if attribute in c
            }
    return out


def test_the_snapshot_is_the_cache_as_read_and_replays_to_the_live_answers(tmp_path: Path) -> None:
    async def body(r: Running) -> None:
        await r.client.post("/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3"))
        snapshot = (await r.client.get("/debug/snapshot")).json()
        assert snapshot["kind"] == "List"
        held = {identity(o): o for o in snapshot["items"]}
        read, _ = load_objects([str(EXAMPLES)])
        assert held.keys() == {identity(o) for o in read}
        # The bind's writes are in it: the claim as the store now holds it.
        trainer = held[("ResourceClaim", "default", "trainer-gpus")]
        assert trainer == r.store.get("ResourceClaim", "default", "trainer-gpus")
        state = tmp_path / "snapshot.json"
        state.write_bytes(orjson.dumps(snapshot))
        engine = engine_from_state([str(state)], 1 << 26, r.service.engine.config.release, None)
        for namespace, name in sorted(r.service.engine.state.pods):
            live = (await r.client.get(f"/debug/pods/{namespace}/{name}")).json()
            assert debug.pod(engine, engine.state.pods[(namespace, name)]) == live, name

    run_with_service(body)


def test_the_snapshot_keeps_what_orjson_cannot_encode(tmp_path: Path) -> None:
    # A field the extender does not read (an int attribute that large is refused, as
    # kube-apiserver refuses it).
    huge = resource_slice("big", [device("d0", vendorSerial=2**70)], pool="p", node="n")
    state = tmp_path / "state.json"
    state.write_text(json.dumps(listed([node("n"), device_class("c", "true"), huge])))  # orjson: 2**70 no
    service, _store = build_embedded([str(state)], ServeConfig())
    try:
        snapshot = json.loads(as_list_json(service.engine.state.held()))
        (kept,) = [o for o in snapshot["items"] if o["kind"] == "ResourceSlice"]
        assert kept["spec"]["devices"][0]["vendorSerial"] == 2**70
    finally:
        service.worker.stop()


def test_the_page_shows_the_capacity_views_figures() -> None:
    async def body(r: Running) -> None:
        await r.client.post("/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3"))
        response = await r.client.get("/debug/ui")
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in response.headers["content-security-policy"]
        figures = (await r.client.get("/debug/capacity")).json()
        page = page_figures(response.text)
        assert page.external == []
        assert by_class(page, "class-table", "data-state") == figures["devicesByClass"]
        assert by_class(page, "fit-table", "data-fit") == figures["podsThatFit"]
        stranded = {cls: dict(list(s.items())[1:]) for cls, s in figures["strandedFor"].items()}
        assert by_class(page, "fit-table", "data-stranded") == stranded
        nodes = [row["row"]["data-node"] for row in page.tables["node-table"] if "data-node" in row["row"]]
        assert nodes == sorted(r.service.engine.state.nodes)
        pending = [row["row"]["data-pod"] for row in page.tables["pending-table"] if "data-pod" in row["row"]]
        assert "default/rdma-worker" in pending and "default/trainer" not in pending  # bound now
        assert page.svgs > len(figures["devicesByClass"])  # a bar per class, a histogram, node bars

    run_with_service(body)


def test_the_page_pages_nodes_and_narrows_to_one_class(tmp_path: Path) -> None:
    count = PAGE_NODES + 5
    objects = [device_class("gpu", 'device.driver == "driver-a"'), device_class("other", "false")]
    for i in range(count):
        objects += [
            node(f"n{i:03}"),
            resource_slice(f"s{i}", [device("g0")], pool=f"n{i:03}", node=f"n{i:03}"),
        ]
    state = tmp_path / "state.json"
    state.write_bytes(orjson.dumps(listed(objects)))

    async def body(r: Running) -> None:
        first = page_figures((await r.client.get("/debug/ui?class=gpu")).text)
        second = page_figures((await r.client.get("/debug/ui?class=gpu&page=2")).text)
        rows = [len([x for x in p.tables["node-table"] if "data-node" in x["row"]]) for p in (first, second)]
        assert rows == [PAGE_NODES, 5]
        assert "page=2" in (await r.client.get("/debug/ui?class=gpu")).text
        beyond = page_figures((await r.client.get("/debug/ui?class=gpu&page=99")).text)
        assert len([x for x in beyond.tables["node-table"] if "data-node" in x["row"]]) == 5  # the last
        none = page_figures((await r.client.get("/debug/ui?class=other")).text)
        assert [x for x in none.tables["node-table"] if "data-node" in x["row"]] == []

    run_with_service(body, paths=[str(state)])


BAD_QUERIES = {
    "a page of zero": "/debug/ui?page=0",
    "a page that is not a number": "/debug/ui?page=two",
    "a count below one": "/debug/capacity?count=0",
    "an unknown format": "/debug/capacity?format=xml",
    "a limit that is not a number": "/debug/decisions?limit=x",
}


@pytest.mark.parametrize("path", BAD_QUERIES.values(), ids=BAD_QUERIES.keys())
def test_bad_queries_get_400_with_the_reason(path: str) -> None:
    async def body(r: Running) -> None:
        response = await r.client.get(path)
        assert response.status_code == 400 and "must be" in response.json()["Error"]

    run_with_service(body)


def test_the_ops_listener_serves_the_views_only_with_ops_debug() -> None:
    async def body(r: Running) -> None:
        for views, status in ((False, 404), (True, 200)):
            app = create_ops_app(r.service, debug_views=views)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://ops") as ops:
                for path in (
                    "/debug/ui",
                    "/debug/snapshot",
                    "/debug/capacity",
                    "/debug/pods/default/trainer",
                ):
                    assert (await ops.get(path)).status_code == status, (views, path)
                assert (await ops.get("/readyz")).status_code == 200
                assert (await ops.post("/scheduler/filter", content=b"{}")).status_code in (404, 405)

    run_with_service(body)


def test_a_second_view_asked_while_one_is_computed_gets_429() -> None:
    gate = OneAtATime()
    release = asyncio.Event()

    async def slow() -> Response:
        await release.wait()
        return Response("done")

    async def main() -> list[int]:
        handler = gate.wrap(slow)

        async def ask() -> Response:
            return await handler()

        first = asyncio.create_task(ask())
        await asyncio.sleep(0)
        second = await handler()
        release.set()
        done = await first
        third = await handler()  # the first is done: the gate is open again
        return [done.status_code, second.status_code, third.status_code]

    assert asyncio.run(main()) == [200, 429, 200]


def test_a_failing_view_opens_the_gate_again() -> None:
    gate = OneAtATime()

    async def broken() -> Response:
        raise RuntimeError("boom")

    async def fine() -> Response:
        return Response("ok")

    async def main() -> int:
        with pytest.raises(RuntimeError):
            await gate.wrap(broken)()
        return (await gate.wrap(fine)()).status_code

    assert asyncio.run(main()) == 200


def many_nodes(tmp_path: Path, count: int = 400) -> Path:
    """A cluster whose capacity takes more than one 10 ms slice of the engine's loop."""
    objects: list[dict[str, Any]] = [device_class("gpu", 'device.driver == "driver-a"')]
    for i in range(count):
        name = f"n{i:03}"
        devices = [device(f"g{j}", attributes=attrs(productName="A100")) for j in range(8)]
        objects += [node(name), resource_slice(f"s{i}", devices, pool=name, node=name)]
    state = tmp_path / "state.json"
    state.write_bytes(orjson.dumps(listed(objects)))
    return state


LISTENERS = {
    "the ops listener with --ops-debug: one at a time": (True, [200, 429]),
    "the verbs listener: as many as --max-concurrency admits": (False, [200, 200]),
}


@pytest.mark.parametrize(("ops", "statuses"), LISTENERS.values(), ids=LISTENERS.keys())
def test_two_views_asked_at_once(tmp_path: Path, ops: bool, statuses: list[int]) -> None:
    """The first computes in slices, giving the loop back; the second arrives meanwhile."""
    service, _store = build_embedded([str(many_nodes(tmp_path))], ServeConfig())
    app = create_ops_app(service, debug_views=True) if ops else create_app(service)

    async def main() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://x", timeout=60) as client:
            answers = await asyncio.gather(client.get("/debug/ui"), client.get("/debug/capacity"))
        return sorted(a.status_code for a in answers)

    try:
        assert asyncio.run(main()) == statuses
    finally:
        service.worker.stop()


HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


def test_strings_from_the_cluster_are_escaped_on_the_page(tmp_path: Path) -> None:
    """Names and messages come from objects anyone with create rights on pods or classes wrote."""
    objects = [
        node("n"),
        resource_slice("s", [device("g0")], pool="n", node="n"),
        device_class(f"c{HOSTILE}", f'device.driver == "{HOSTILE}" &&'),  # does not compile
        device_class("gpu", "true"),
        pod(f"p{HOSTILE}", claims=["c"], scheduler="default-scheduler"),
        claim("c", [exact(cls="gpu")]),
    ]
    state = tmp_path / "state.json"
    state.write_bytes(orjson.dumps(listed(objects)))

    async def body(r: Running) -> None:
        page = (await r.client.get(f"/debug/ui?class=x{HOSTILE}")).text
        assert "<script" not in page and "<img" not in page
        assert "&lt;script&gt;" in page  # shown, as text
        parsed = page_figures(page)
        assert parsed.external == []
        assert not {"script", "img"} & parsed.tags  # no element came from the strings
        assert not [a for a in parsed.attributes if a.startswith("on")]  # nor any handler

    run_with_service(body, paths=[str(state)])


def test_the_snapshot_is_shared_for_a_moment_and_names_the_replica() -> None:
    async def body(r: Running) -> None:
        first = await r.client.get("/debug/snapshot")
        assert first.headers["x-dra-extender-last-decision-seconds"] == "never"
        assert first.headers["x-dra-extender-replica"] and first.headers["cache-control"] == "no-store"
        assert int(first.headers["content-length"]) == len(first.content)
        await r.client.post("/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3"))
        shared = await r.client.get("/debug/snapshot")
        assert shared.content == first.content  # within SNAPSHOT_SECONDS: the same bytes
        assert float(shared.headers["x-dra-extender-last-decision-seconds"]) < 60  # the bind
        pods = [o for o in shared.json()["items"] if o["kind"] == "Pod"]
        assert pods and all("annotations" not in p["metadata"] for p in pods)

    run_with_service(body)


def test_a_shared_snapshot_is_encoded_again_once_its_moment_passed() -> None:
    now = [0.0]
    calls: list[int] = []

    async def held() -> list[dict[str, Any] | bytes]:
        calls.append(1)
        return [node(f"n{len(calls)}")]

    async def main() -> list[bytes]:
        snapshots = EncodedSnapshot(held, seconds=2.0, clock=lambda: now[0])
        first = await snapshots.get()
        now[0] = 1.9
        same = await snapshots.get()
        now[0] = 2.0
        later = await snapshots.get()
        return [first, same, later]

    first, same, later = asyncio.run(main())
    assert first is same and later != first and len(calls) == 2
    assert b"n2" in later


def test_snapshots_sent_at_once_are_capped() -> None:
    slots = StreamSlots(2)
    assert [slots.take(), slots.take(), slots.take()] == [True, True, False]
    slots.give_back()
    assert slots.take()


def test_a_client_that_stops_reading_is_cut_off_and_its_slot_given_back() -> None:
    """uvicorn waits for the socket to drain before each chunk: a client that never reads holds
    the send, and the answer's deadline ends it."""
    given_back: list[int] = []
    sent: list[dict[str, Any]] = []
    stalled = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) == 3:  # the head and one chunk went out; then the client stops reading
            await stalled.wait()

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    answer = SentInTime(b"x" * (3 * CHUNK_BYTES), {}, lambda: given_back.append(1), seconds=0.05)
    asyncio.run(answer({"type": "http"}, receive, send))
    assert given_back == [1]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body", "http.response.body"]
    assert all(m.get("more_body") for m in sent[1:])  # never told it was complete


def test_a_snapshot_read_to_the_end_gives_its_slot_back() -> None:
    given_back: list[int] = []
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request"}

    body = b"y" * (CHUNK_BYTES + 10)
    asyncio.run(SentInTime(body, {"X-A": "b"}, lambda: given_back.append(1))({"type": "http"}, receive, send))
    assert given_back == [1]
    assert b"".join(m.get("body", b"") for m in sent[1:]) == body and sent[-1]["more_body"] is False
    assert (b"content-length", str(len(body)).encode()) in sent[0]["headers"]
