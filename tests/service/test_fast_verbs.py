"""The listener's fast path for the verbs answers exactly as the FastAPI routes do (same
handlers): well-formed, malformed and oversized requests, and what is not a verb's POST."""

from __future__ import annotations

import httpx
import pytest

from extender.service.fast_verbs import FastVerbs
from extender.service.runtime import ServeConfig
from tests.service.fixtures import EXAMPLE_NODES, TRAINER, WEB, args_names, binding
from tests.service.harness import Running, run_with_service

LIMIT = 128 * 1024  # above the bind body limit (64 KiB)

CASES = {
    "filter that fits": ("POST", "/scheduler/filter", args_names(TRAINER, EXAMPLE_NODES)),
    "prioritize": ("POST", "/scheduler/prioritize", args_names(TRAINER, EXAMPLE_NODES)),
    "filter of a pod without claims": ("POST", "/scheduler/filter", args_names(WEB, EXAMPLE_NODES)),
    "malformed JSON": ("POST", "/scheduler/filter", b"{not json"),
    "a pod that is not an object": ("POST", "/scheduler/prioritize", b'{"Pod": 3, "NodeNames": []}'),
    "bind without a UID": (
        "POST",
        "/scheduler/bind",
        b'{"PodName":"web","PodNamespace":"default","Node":"x"}',
    ),
    "bind of an unknown pod": ("POST", "/scheduler/bind", binding("nobody", "uid-nobody", "gpu-node-1")),
    "preempt, malformed": ("POST", "/scheduler/preempt", b"[]"),
    "too large": ("POST", "/scheduler/filter", b" " * (LIMIT + 1)),
    "a bind body within the filter limit": ("POST", "/scheduler/bind", b" " * 70_000),
    "a bind body over 64 KiB": ("POST", "/scheduler/bind", b" " * (64 * 1024 + 1)),
    "GET on a verb": ("GET", "/scheduler/filter", b""),
    "unknown path": ("POST", "/scheduler/nothing", b"{}"),
    "a probe": ("GET", "/healthz", b""),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fast_path_answers_as_the_routes(case: str) -> None:
    method, path, body = CASES[case]

    async def check(running: Running) -> None:
        app = running.client._transport.app  # type: ignore[attr-defined]
        fast = FastVerbs(app, app.state.verbs, app.state.verb_prefix)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fast), base_url="http://x") as client:
            answers = [await c.request(method, path, content=body) for c in (running.client, client)]
        routes, fast_answer = answers
        assert fast_answer.status_code == routes.status_code
        assert fast_answer.content == routes.content
        assert fast_answer.headers["content-type"] == routes.headers["content-type"]
        if "bind body" in case:
            assert routes.status_code == 413 and b"65536 bytes" in routes.content

    run_with_service(check, ServeConfig(max_body_bytes=LIMIT))


def test_a_bind_through_the_fast_path_writes_the_claims() -> None:
    async def check(running: Running) -> None:
        app = running.client._transport.app  # type: ignore[attr-defined]
        fast = FastVerbs(app, app.state.verbs, app.state.verb_prefix)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fast), base_url="http://x") as client:
            answer = await client.post(
                "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
            )
        assert answer.json() == {"Error": ""}
        claim = running.store.get("ResourceClaim", "default", "trainer-gpus")
        assert len(claim["status"]["allocation"]["devices"]["results"]) == 4

    run_with_service(check)
