"""Binds and the other requests are admitted against separate limits: binds in flight never get
filter or prioritize refused (what a real kube-scheduler's burst of binds did to a shared limit)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import anyio
import httpx
import pytest
from fastapi import FastAPI

from extender.service.admission import Admission
from tests.integration.servers import thread_server


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


def app_with_slow_binds(gate: threading.Event, *, max_binds: int, max_requests: int) -> Admission:
    app = FastAPI()

    @app.post("/scheduler/bind")
    async def bind() -> dict[str, str]:
        await anyio.to_thread.run_sync(gate.wait, 10)
        return {"Error": ""}

    @app.post("/scheduler/filter")
    async def filter_verb() -> dict[str, str]:
        return {"Error": ""}

    return Admission(app, bind_path="/scheduler/bind", max_binds=max_binds, max_requests=max_requests)


def wait_for(check: object, timeout: float = 10.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.01)


def test_binds_in_flight_leave_filter_alone(gate: threading.Event) -> None:
    admitted = app_with_slow_binds(gate, max_binds=3, max_requests=2)
    with thread_server(admitted) as url, ThreadPoolExecutor(8) as pool:  # type: ignore[arg-type]
        binds = [pool.submit(httpx.post, f"{url}/scheduler/bind", timeout=20) for _ in range(3)]
        wait_for(lambda: admitted.binds.in_flight == 3)
        assert admitted.binds.in_flight == 3
        # Every bind slot is taken: filter still answers, one bind more is refused.
        assert httpx.post(f"{url}/scheduler/filter").status_code == 200
        extra = httpx.post(f"{url}/scheduler/bind")
        assert extra.status_code == 503
        assert extra.json() == {"Error": "too many binds in flight (limit 3); retry later"}
        assert extra.headers["retry-after"] == "1"
        gate.set()
        assert [f.result().status_code for f in binds] == [200, 200, 200]
        assert admitted.binds.in_flight == 0
        assert httpx.post(f"{url}/scheduler/bind").status_code == 200


def test_requests_over_their_limit_are_refused_but_binds_are_not(gate: threading.Event) -> None:
    admitted = app_with_slow_binds(gate, max_binds=4, max_requests=1)
    admitted.requests.in_flight = 1  # one decision being served
    with thread_server(admitted) as url:  # type: ignore[arg-type]
        refused = httpx.post(f"{url}/scheduler/filter")
        assert refused.status_code == 503
        assert "too many requests in flight (limit 1)" in refused.json()["Error"]
        gate.set()
        assert httpx.post(f"{url}/scheduler/bind").status_code == 200
    admitted.requests.in_flight = 0
