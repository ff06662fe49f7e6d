"""Fuzzing the endpoints: any body gets 200, 400 or 413, never a crash, and filter/prioritize change nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.service.app import create_app
from extender.service.runtime import ServeConfig, build_embedded
from tests.service.fixtures import TRAINER
from tests.shared import REPO

SERVICE, STORE = build_embedded([str(REPO / "examples")], ServeConfig())
APP = create_app(SERVICE, max_body_bytes=200_000)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


def mutated_args() -> st.SearchStrategy[Any]:
    """Mostly well-shaped requests with some field replaced by junk."""
    pod = st.sampled_from(
        [
            TRAINER,
            {"metadata": {"name": "x"}},
            {
                "metadata": {"name": "trainer", "namespace": "default"},
                "spec": {"resourceClaims": [{"name": "a"}]},
            },
        ]
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "Pod": st.one_of(pod, json_values),
            "Nodes": st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {
                        "items": st.lists(
                            st.one_of(json_values, st.just({"metadata": {"name": "gpu-node-1"}})), max_size=3
                        )
                    }
                ),
                json_values,
            ),
            "NodeNames": st.one_of(
                st.none(),
                st.lists(st.sampled_from(["gpu-node-1", "gpu-node-3", "ghost", ""]), max_size=4),
                json_values,
            ),
        },
    )


def post(path: str, content: bytes) -> httpx.Response:
    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=APP), base_url="http://x") as client:
            return await client.post(path, content=content)

    return asyncio.run(send())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["filter", "prioritize"]), st.one_of(mutated_args(), json_values))
def test_filter_and_prioritize_survive_anything(verb: str, body: Any) -> None:
    before = STORE.resource_version
    resp = post(f"/scheduler/{verb}", json.dumps(body).encode())
    assert resp.status_code in (200, 400), resp.text
    assert isinstance(resp.json(), dict | list)
    assert STORE.resource_version == before


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_rejected_cleanly(body: bytes) -> None:
    for verb in ("filter", "prioritize", "bind"):
        resp = post(f"/scheduler/{verb}", body)
        assert resp.status_code in (200, 400), (verb, body, resp.text)


@settings(max_examples=100, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "PodName": json_values,
            "PodNamespace": json_values,
            "PodUID": json_values,
            "Node": json_values,
        },
    )
)
def test_bind_with_junk_never_crashes(body: dict[str, Any]) -> None:
    resp = post("/scheduler/bind", json.dumps(body).encode())
    assert resp.status_code in (200, 400), resp.text
    assert "Error" in resp.json()


def mutated_preemption() -> st.SearchStrategy[Any]:
    """Mostly well-shaped ExtenderPreemptionArgs with some field replaced by junk."""
    victims = st.fixed_dictionaries(
        {},
        optional={
            "Pods": st.one_of(
                st.lists(
                    st.fixed_dictionaries(
                        {"UID": st.one_of(st.sampled_from(["uid-pod-batch-job", "x"]), json_values)}
                    ),
                    max_size=3,
                ),
                json_values,
            ),
            "NumPDBViolations": st.one_of(st.integers(-5, 5), json_values),
        },
    )
    nodes = st.dictionaries(
        st.sampled_from(["gpu-node-1", "gpu-node-3", "ghost", ""]),
        st.one_of(st.none(), victims, json_values),
        max_size=3,
    )
    pod = st.sampled_from(
        [TRAINER, {**TRAINER, "spec": {**TRAINER["spec"], "priority": 10**9}}, {"metadata": {"name": "x"}}]
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "Pod": st.one_of(pod, json_values),
            "NodeNameToMetaVictims": st.one_of(st.none(), nodes, json_values),
            "NodeNameToVictims": st.one_of(st.none(), json_values),
        },
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(mutated_preemption(), json_values))
def test_preempt_survives_anything_and_changes_nothing(body: Any) -> None:
    before = STORE.resource_version
    resp = post("/scheduler/preempt", json.dumps(body).encode())
    assert resp.status_code in (200, 400), resp.text
    answer = resp.json()
    assert ("NodeNameToMetaVictims" in answer) if resp.status_code == 200 else ("Error" in answer)
    assert STORE.resource_version == before


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_to_preempt_are_rejected_cleanly(body: bytes) -> None:
    resp = post("/scheduler/preempt", body)
    assert resp.status_code in (200, 400), (body, resp.text)
