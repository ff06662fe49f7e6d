"""The HTTP layer in process: verbs, status codes, debug views, metrics; bad input changes nothing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.service.runtime import ServeConfig
from tests.builders import allocated, attrs, claim, device, device_class, exact, node, pod, resource_slice
from tests.service.fixtures import (
    EXAMPLE_NODES,
    INFERENCE,
    TRAINER,
    WEB,
    args_names,
    args_nodes,
    binding,
    scheduler_node,
    scheduler_pod,
)
from tests.service.harness import Running, claim_status, run_with_service
from tests.service.test_metrics import value


def test_filter_names_mode() -> None:
    async def body(r: Running) -> None:
        resp = await r.client.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES))
        assert resp.status_code == 200
        out = resp.json()
        assert out["NodeNames"] == ["gpu-node-3"] and out["Nodes"] is None and out["Error"] == ""
        assert set(out["FailedAndUnresolvableNodes"]) == {"cpu-node-1", "gpu-node-1", "gpu-node-2"}
        assert out["FailedNodes"] == {}

    run_with_service(body)


def test_filter_full_node_list_mode_uses_the_sent_nodes() -> None:
    async def body(r: Running) -> None:
        nodes = [scheduler_node(n) for n in EXAMPLE_NODES]
        resp = await r.client.post("/scheduler/filter", content=args_nodes(TRAINER, nodes))
        out = resp.json()
        assert out["NodeNames"] is None
        assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["gpu-node-3"]
        assert out["Nodes"]["items"][0] == nodes[3]

    run_with_service(body)


def test_unknown_nodes_are_rejected_not_errors() -> None:
    async def body(r: Running) -> None:
        out = (
            await r.client.post("/scheduler/filter", content=args_names(TRAINER, ["gpu-node-3", "ghost"]))
        ).json()
        assert out["NodeNames"] == ["gpu-node-3"]
        assert "not known" in out["FailedAndUnresolvableNodes"]["ghost"]

    run_with_service(body)


def test_pods_without_claims_take_the_fast_path() -> None:
    async def body(r: Running) -> None:
        names = [*EXAMPLE_NODES, "ghost"]
        out = (await r.client.post("/scheduler/filter", content=args_names(WEB, names))).json()
        assert out["NodeNames"] == names
        scores = (await r.client.post("/scheduler/prioritize", content=args_names(WEB, names))).json()
        assert scores == []  # every node scores 0: kube-scheduler reads a node left out as 0
        assert (
            await r.client.post("/scheduler/bind", content=binding("web", "uid-pod-web", "cpu-node-1"))
        ).json() == {"Error": ""}
        assert r.store.get("Pod", "default", "web")["spec"]["nodeName"] == "cpu-node-1"

    run_with_service(body)


def test_prioritize_scores_are_integers_0_to_10_and_binpack_prefers_fuller_nodes() -> None:
    async def body(r: Running) -> None:
        resp = await r.client.post(
            "/scheduler/prioritize", content=args_names(INFERENCE, ["gpu-node-1", "gpu-node-2", "gpu-node-3"])
        )
        scores = {s["Host"]: s["Score"] for s in resp.json()}
        assert all(isinstance(v, int) and 0 < v <= 10 for v in scores.values())
        # gpu-node-1 has 2 of 8 GPUs taken and gpu-node-3 has only 4: both beat the empty 8-GPU
        # node, which scores 0 and so is left out (kube-scheduler adds nothing for it).
        assert scores["gpu-node-3"] == 10 and "gpu-node-2" not in scores and scores["gpu-node-1"] > 0

    run_with_service(body)


def test_spread_prefers_emptier_nodes() -> None:
    from extender.scheduling.config import EngineConfig

    async def body(r: Running) -> None:
        resp = await r.client.post(
            "/scheduler/prioritize", content=args_names(INFERENCE, ["gpu-node-2", "gpu-node-3"])
        )
        scores = {s["Host"]: s["Score"] for s in resp.json()}
        assert scores == {"gpu-node-2": 10}  # gpu-node-3 scores 0: left out

    run_with_service(body, ServeConfig(engine=EngineConfig(score_policy="spread")))


def test_prioritize_with_the_fragmentation_tie_break_answers_within_0_to_10() -> None:
    """The example's best node for one GPU is alone at the top: the tie-break changes nothing."""
    from extender.scheduling.config import EngineConfig

    async def body(r: Running) -> None:
        names = ["gpu-node-1", "gpu-node-2", "gpu-node-3"]
        resp = await r.client.post("/scheduler/prioritize", content=args_names(INFERENCE, names))
        scores = {s["Host"]: s["Score"] for s in resp.json()}
        assert all(isinstance(v, int) and 0 < v <= 10 for v in scores.values())
        assert scores["gpu-node-3"] == 10 and "gpu-node-2" not in scores and scores["gpu-node-1"] > 0

    run_with_service(body, ServeConfig(engine=EngineConfig(score_tie_break="fragmentation")))


def test_bind_writes_finalizer_allocation_reservation_then_binds() -> None:
    async def body(r: Running) -> None:
        resp = await r.client.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        )
        assert resp.status_code == 200 and resp.json() == {"Error": ""}
        claim = r.store.get("ResourceClaim", "default", "trainer-gpus")
        assert claim["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        assert [x["device"] for x in claim["status"]["allocation"]["devices"]["results"]] == [
            "gpu-0",
            "gpu-1",
            "gpu-2",
            "gpu-3",
        ]
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": "trainer", "uid": "uid-pod-trainer"}
        ]
        assert r.store.get("Pod", "default", "trainer")["spec"]["nodeName"] == "gpu-node-3"
        # Idempotent: the same bind again succeeds and changes nothing.
        rv = claim["metadata"]["resourceVersion"]
        assert (
            await r.client.post(
                "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
            )
        ).json() == {"Error": ""}
        assert r.store.get("ResourceClaim", "default", "trainer-gpus")["metadata"]["resourceVersion"] == rv
        # The next filter sees the devices as taken.
        out = (await r.client.post("/scheduler/filter", content=args_names(INFERENCE, ["gpu-node-3"]))).json()
        assert out["NodeNames"] == []

    run_with_service(body)


def test_bind_to_a_node_that_does_not_fit_fails_cleanly() -> None:
    async def body(r: Running) -> None:
        error = (
            await r.client.post(
                "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-1")
            )
        ).json()["Error"]
        assert error.startswith("cannot bind to gpu-node-1")
        assert claim_status(r.store, "trainer-gpus") == {}
        assert not r.store.get("Pod", "default", "trainer")["spec"].get("nodeName")
        wrong_uid = (
            await r.client.post("/scheduler/bind", content=binding("trainer", "other-uid", "gpu-node-3"))
        ).json()["Error"]
        assert "UID mismatch" in wrong_uid
        missing = (await r.client.post("/scheduler/bind", content=binding("nope", "u", "gpu-node-3"))).json()[
            "Error"
        ]
        assert "not found" in missing

    run_with_service(body)


def test_template_claim_is_found_through_pod_status() -> None:
    async def body(r: Running) -> None:
        assert (
            await r.client.post(
                "/scheduler/bind", content=binding("inference-0", "uid-pod-inference-0", "gpu-node-1")
            )
        ).json() == {"Error": ""}
        results = claim_status(r.store, "inference-0-gpu-x7k2p")["allocation"]["devices"]["results"]
        assert results[0]["device"] == "gpu-2"  # gpu-0 and gpu-1 are held by batch-job

    run_with_service(body)


def test_malformed_requests_get_400_and_change_nothing() -> None:
    async def body(r: Running) -> None:
        before = r.store.resource_version
        for verb, payload in [
            ("filter", b"{"),
            ("prioritize", b'{"Pod":1}'),
            ("bind", b'{"PodName":5}'),
            ("filter", b""),
        ]:
            resp = await r.client.post(f"/scheduler/{verb}", content=payload)
            assert resp.status_code == 400, (verb, payload)
            assert resp.json()["Error"]
        assert r.store.resource_version == before

    run_with_service(body)


def test_a_pods_filter_and_prioritize_parse_it_once() -> None:
    async def body(r: Running) -> None:
        verbs = r.client._transport.app.state.verbs  # type: ignore[attr-defined]
        request = args_names(TRAINER, EXAMPLE_NODES)
        for verb in ("filter", "prioritize", "filter"):  # an attempt, then the retry's filter
            assert (await r.client.post(f"/scheduler/{verb}", content=request)).status_code == 200
        assert verbs.pods.parsed == 1

    run_with_service(body)


def test_a_pod_sent_as_the_cache_holds_it_is_the_cache_record_not_parsed() -> None:
    """kube-scheduler sends its informer's copy of the pod: at the cache's resourceVersion, the
    cache's record is the pod (the same answer, no parse); at another version, it is parsed."""

    async def body(r: Running) -> None:
        verbs = r.client._transport.app.state.verbs  # type: ignore[attr-defined]
        stored = r.store.get("Pod", "default", "batch-job")
        names = [n["metadata"]["name"] for n in r.store.objects("Node")]
        request = json.dumps({"Pod": stored, "Nodes": None, "NodeNames": names}).encode()
        cached = await r.client.post("/scheduler/filter", content=request)
        assert verbs.pods.from_cache == 1 and verbs.pods.parsed == 0
        older = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "1"}}
        sent = json.dumps({"Pod": older, "Nodes": None, "NodeNames": names}).encode()
        parsed = await r.client.post("/scheduler/filter", content=sent)
        assert verbs.pods.from_cache == 1 and verbs.pods.parsed == 1
        assert cached.status_code == parsed.status_code == 200 and cached.json() == parsed.json()

    run_with_service(body)


def test_oversized_bodies_get_413() -> None:
    async def body(r: Running) -> None:
        resp = await r.client.post("/scheduler/filter", content=args_names(TRAINER, ["n"] * 5000))
        assert resp.status_code == 413

    run_with_service(body, ServeConfig(max_body_bytes=10_000))


def test_configurable_prefix() -> None:
    async def body(r: Running) -> None:
        assert (await r.client.post("/dra/filter", content=args_names(WEB, ["a"]))).status_code == 200
        assert (await r.client.post("/scheduler/filter", content=args_names(WEB, ["a"]))).status_code in (
            404,
            405,
        )

    run_with_service(body, ServeConfig(prefix="/dra/"))


def test_health_readiness_metrics() -> None:
    async def body(r: Running) -> None:
        assert (await r.client.get("/healthz")).text == "ok\n"
        assert (await r.client.get("/readyz")).status_code == 200
        await r.client.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES))
        await r.client.post("/scheduler/filter", content=b"{")
        text = (await r.client.get("/metrics")).text
        assert 'dra_extender_request_duration_seconds_count{verb="filter"} 1.0' in text
        assert 'dra_extender_filter_nodes_total{outcome="passed"} 1.0' in text
        assert 'dra_extender_bad_requests_total{verb="filter"} 1.0' in text
        assert 'dra_extender_cache_objects{kind="ResourceSlice"} 8.0' in text
        assert "dra_extender_ready 1.0" in text and "dra_extender_leader 1.0" in text

    run_with_service(body)


def test_debug_views_in_json_and_text() -> None:
    async def body(r: Running) -> None:
        await r.client.post("/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3"))
        inventory = (await r.client.get("/debug/inventory")).json()
        node3 = inventory["nodes"]["gpu-node-3"]
        gpus = [d for d in node3["devices"] if d["device"].startswith("gpu.example.com/")]
        assert (
            all(d["allocatedTo"] == ["default/trainer-gpus"] for d in gpus) and node3["free"] == 2
        )  # the NICs
        assert "default/batch-job-gpus" in (await r.client.get("/debug/inventory?format=text")).text
        claims = (await r.client.get("/debug/claims")).json()["claims"]
        assert any(
            c["claim"] == "default/trainer-gpus" and c["reservedFor"] == ["pods/trainer"] for c in claims
        )
        pod = (await r.client.get("/debug/pods/default/rdma-worker")).json()
        assert pod["nodes"]["gpu-node-2"]["fits"] and "allocations" in pod["nodes"]["gpu-node-2"]
        text = (await r.client.get("/debug/pods/default/oversized?format=text")).text
        assert "needs 9 devices" in text
        assert (await r.client.get("/debug/pods/default/nope")).status_code == 404
        decisions = (await r.client.get("/debug/decisions")).json()["decisions"]
        assert decisions[-1]["verb"] == "bind" and decisions[-1]["devices"]["trainer-gpus"]
        assert "bind" in (await r.client.get("/debug/decisions?format=text")).text
        in_flight = (await r.client.get("/debug/inflight")).json()
        assert (in_flight["inFlight"], in_flight["claimWrites"], in_flight["entries"]["binds"]) == ([], [], 0)

    run_with_service(body)


def test_json_bodies_are_exact() -> None:
    async def body(r: Running) -> None:
        raw = (
            await r.client.post("/scheduler/bind", content=binding("web", "uid-pod-web", "gpu-node-1"))
        ).content
        assert raw == b'{"Error":""}'
        assert json.loads(
            (await r.client.post("/scheduler/filter", content=args_names(WEB, []))).content
        ) == {
            "Nodes": None,
            "NodeNames": [],
            "FailedNodes": {},
            "FailedAndUnresolvableNodes": {},
            "Error": "",
        }

    run_with_service(body)


def test_a_broken_device_class_fails_only_the_pods_that_use_it(tmp_path: Path) -> None:
    objects = [
        device_class("good"),
        device_class("broken", "device.attributes['driver-a'].model >= quantity('1')"),
        resource_slice("s", [device("d0", attributes=attrs(model="x"))]),
        node("node-1"),
        claim("uses-broken", requests=[exact(cls="broken")]),
        claim("uses-good", requests=[exact(cls="good")]),
    ]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))

    async def body(r: Running) -> None:
        broken_pod = scheduler_pod("a", "uid-a", [{"name": "c", "resourceClaimName": "uses-broken"}])
        good_pod = scheduler_pod("b", "uid-b", [{"name": "c", "resourceClaimName": "uses-good"}])
        out = (await r.client.post("/scheduler/filter", content=args_names(broken_pod, ["node-1"]))).json()
        assert out["NodeNames"] == [] and "class broken: selector #0: CEL compile error" in out["Error"]
        assert "found no matching overload for '_>=_'" in out["Error"]
        ok = (await r.client.post("/scheduler/filter", content=args_names(good_pod, ["node-1"]))).json()
        assert ok["NodeNames"] == ["node-1"] and ok["Error"] == ""

    run_with_service(body, paths=[str(path)])


def test_full_node_list_labels_win_over_the_cache(tmp_path: Path) -> None:
    # A network-attached pool for rack r1: whether a node fits depends on its labels only.
    rack_pool = resource_slice(
        "rack",
        [device("d0")],
        nodeSelector={
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]
        },
    )
    objects = [device_class(), rack_pool, node("node-1", rack="r1"), claim()]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    pod = scheduler_pod("p", "uid-p", [{"name": "c", "resourceClaimName": "claim-0"}])

    async def passed(r: Running, labels: dict[str, str]) -> list[str]:
        sent = scheduler_node("node-1")
        sent["metadata"]["labels"] = labels
        out = (await r.client.post("/scheduler/filter", content=args_nodes(pod, [sent]))).json()
        return [n["metadata"]["name"] for n in out["Nodes"]["items"]]

    async def body(r: Running) -> None:
        assert r.service.engine.nodes_as_sent({"node-1": {"rack": "r1"}}) is None  # the cache's records
        sent = r.service.engine.nodes_as_sent({"node-1": {"rack": "r2"}})
        assert sent is not None and sent["node-1"].labels == {"rack": "r2"}
        assert await passed(r, {"rack": "r1"}) == ["node-1"]
        assert await passed(r, {"rack": "r2"}) == []  # what kube-scheduler sees, not a stale cache
        assert await passed(r, {"rack": "r1"}) == ["node-1"]

    run_with_service(body, paths=[str(path)])


def test_a_body_that_does_not_arrive_in_time_is_refused() -> None:
    # Issue 10: a client that sends its body slowly cannot hold a connection slot for long.
    import pytest
    from starlette.requests import Request

    from extender.service.app import BodyTooSlow, read_limited

    async def never() -> dict[str, Any]:
        await asyncio.sleep(3600)
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "POST", "headers": [(b"content-length", b"100")], "path": "/"}

    async def read() -> bytes:
        return await read_limited(Request(scope, never).stream(), "100", 1000, seconds=0.05)

    with pytest.raises(BodyTooSlow):
        asyncio.run(read())


def test_capacity_view_for_one_shape_in_json_and_text() -> None:
    async def body(r: Running) -> None:
        shape = (await r.client.get("/debug/capacity?class=gpu.example.com&count=2")).json()["shape"]
        assert shape["known"] and shape["count"] == 2
        assert shape["podsThatFit"] == sum(shape["byNode"].values()) > 0
        text = (await r.client.get("/debug/capacity?class=gpu.example.com&count=2&format=text")).text
        assert f"{shape['podsThatFit']} pods asking for 2 x gpu.example.com fit" in text
        assert "NODE" in text and "PODS x4" in text
        unknown = (await r.client.get("/debug/capacity?class=nope")).json()["shape"]
        assert unknown == {"deviceClass": "nope", "count": 1, "known": False, "podsThatFit": 0, "byNode": {}}
        for bad in ("0", "-1", "abc"):
            answer = await r.client.get(f"/debug/capacity?class=gpu.example.com&count={bad}")
            assert answer.status_code == 400 and "positive integer" in answer.json()["Error"]

    run_with_service(body)


POLISH = {
    "unknown path": ("GET", "/nope", 404, {"Error": "no such endpoint: GET /nope"}),
    "wrong method on a verb": (
        "GET",
        "/scheduler/filter",
        405,
        {"Error": "method GET not allowed on /scheduler/filter"},
    ),
    "unknown format": (
        "GET",
        "/debug/claims?format=xml",
        400,
        {"Error": "format must be one of json, text, yaml, not 'xml'"},
    ),
    "limit not a number": (
        "GET",
        "/debug/decisions?limit=abc",
        400,
        {"Error": "limit must be a positive integer, not 'abc'"},
    ),
    "limit zero": (
        "GET",
        "/debug/decisions?limit=0",
        400,
        {"Error": "limit must be a positive integer, not '0'"},
    ),
    "unknown pod": ("GET", "/debug/pods/default/nope", 404, {"Error": "pod default/nope not found"}),
}


@pytest.mark.parametrize(("method", "path", "status", "body"), POLISH.values(), ids=POLISH.keys())
def test_errors_have_the_verbs_shape(method: str, path: str, status: int, body: dict[str, str]) -> None:
    async def run(r: Running) -> tuple[int, Any]:
        answer = await r.client.request(method, path)
        return answer.status_code, answer.json()

    assert run_with_service(run) == (status, body)


def test_probes_answer_head_and_views_speak_yaml() -> None:
    async def body(r: Running) -> None:
        for path in ("/healthz", "/readyz"):
            head = await r.client.head(path)
            assert head.status_code == 200 and head.content == b""
        as_yaml = await r.client.get("/debug/claims?format=yaml")
        assert as_yaml.headers["content-type"].startswith("application/yaml")
        assert yaml.safe_load(as_yaml.text) == (await r.client.get("/debug/claims")).json()
        inventory = (await r.client.get("/debug/inventory?format=text")).text
        assert inventory.splitlines()[0].split()[:3] == ["NODE", "DEVICE", "PRODUCT"]
        assert "NVIDIA A100-SXM4-40GB" in inventory
        await r.client.post("/scheduler/filter", content=args_names(TRAINER, EXAMPLE_NODES))
        decisions = (await r.client.get("/debug/decisions?format=text")).text
        assert "reasons={" in decisions and "'" not in decisions  # JSON, not Python reprs

    run_with_service(body)


def test_preempt_names_the_low_priority_pod_holding_the_gpus(tmp_path: Path) -> None:
    low = pod("low", ["low-claim"], node_name="node-1")
    low["spec"]["priority"] = 1
    held = claim(
        "low-claim", allocation=allocated(("driver-a", "pool-1", "d0"), ("driver-a", "pool-1", "d1"))
    )
    held["status"]["reservedFor"] = [{"resource": "pods", "name": "low", "uid": "uid-low"}]
    objects = [
        device_class("class-a"),
        resource_slice("s", [device("d0"), device("d1")]),
        node("node-1"),
        held,
        low,
        claim("wanted", requests=[exact(count=2)]),
    ]
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    preemptor = scheduler_pod("high", "uid-high", [{"name": "c", "resourceClaimName": "wanted"}])
    preemptor["spec"]["priority"] = 1000

    async def body(r: Running) -> None:
        filtered = (
            await r.client.post("/scheduler/filter", content=args_names(preemptor, ["node-1"]))
        ).json()
        assert filtered["NodeNames"] == []
        args = {
            "Pod": preemptor,
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {"node-1": {"Pods": [], "NumPDBViolations": 0}},
        }
        answer = await r.client.post("/scheduler/preempt", content=json.dumps(args))
        assert answer.status_code == 200
        assert answer.json() == {
            "NodeNameToMetaVictims": {"node-1": {"Pods": [{"UID": "uid-low"}], "NumPDBViolations": 0}}
        }
        bad = await r.client.post("/scheduler/preempt", content=b'{"NodeNameToMetaVictims": {}}')
        assert bad.status_code == 400 and "Pod is required" in bad.json()["Error"]
        decisions = (await r.client.get("/debug/decisions")).json()["decisions"]
        assert decisions[-1]["verb"] == "preempt" and decisions[-1]["victims"] == {"node-1": ["uid-low"]}
        args["NodeNameToMetaVictims"] = {"node-2": {"Pods": [], "NumPDBViolations": 0}}  # no such node
        assert (await r.client.post("/scheduler/preempt", content=json.dumps(args))).json() == {
            "NodeNameToMetaVictims": {}
        }
        text = (await r.client.get("/metrics")).text
        assert value(text, "dra_extender_preempt_total", outcome="kept") == 1
        assert value(text, "dra_extender_preempt_total", outcome="none") == 1
        assert value(text, "dra_extender_preempt_total", outcome="not_ready") == 0

    run_with_service(body, paths=[str(path)])


def test_filter_while_not_ready_gives_one_reason_for_every_node() -> None:
    """A cache still syncing (or an unsupported gate, or a stale watch) says so for every node,
    as Unresolvable (Unschedulable would start preemption on an unready cache); pods without
    claims pass as ever."""

    async def body(r: Running) -> None:
        r.service.ready = lambda: False
        r.service.not_ready = lambda: "the informers have not listed yet"
        out = (
            await r.client.post("/scheduler/filter", content=args_names(TRAINER, [*EXAMPLE_NODES, "ghost"]))
        ).json()
        reason = "the DRA extender is not ready: the informers have not listed yet"
        assert out["NodeNames"] == [] and out["FailedNodes"] == {}
        assert out["FailedAndUnresolvableNodes"] == dict.fromkeys([*EXAMPLE_NODES, "ghost"], reason)
        assert (await r.client.post("/scheduler/filter", content=args_names(WEB, EXAMPLE_NODES))).json()[
            "NodeNames"
        ] == EXAMPLE_NODES

        # No eviction is chosen from an unready cache: the engine is not even asked.
        def must_not_run(*_: Any) -> Any:
            raise AssertionError("preempt answered from an unready cache")

        r.service.engine.preempt = must_not_run  # type: ignore[method-assign,assignment]
        victims = {"gpu-node-1": {"Pods": [{"UID": "uid-pod-batch-job"}], "NumPDBViolations": 0}}
        preempt = {"Pod": TRAINER, "NodeNameToMetaVictims": victims}
        answer = (await r.client.post("/scheduler/preempt", content=json.dumps(preempt).encode())).json()
        assert answer == {"NodeNameToMetaVictims": {}}
        text = (await r.client.get("/metrics")).text
        assert value(text, "dra_extender_preempt_total", outcome="not_ready") == 1
        assert value(text, "dra_extender_filter_cut_short_total", cause="not_ready") == 1  # WEB: not held up
        assert value(text, "dra_extender_filter_cut_short_total", cause="budget") == 0

    run_with_service(body)
