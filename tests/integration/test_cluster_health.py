"""Cluster mode when the API server is away: readiness, refused binds, discovery retries (issue 9,
items 7 and 9), against the fake API server over real HTTP."""

from __future__ import annotations

import socket
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.fakeapi.server import FakeApiServer, _Handler
from tests.integration.servers import cli_server, server_process
from tests.integration.test_serve_cluster import kubeconfig, wait_until
from tests.service.fixtures import binding
from tests.shared import REPO


class FakeOnPort(FakeApiServer):
    """The fake API server on a chosen port (to start it after the extender, or again)."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port

    def start(self) -> FakeOnPort:
        fake = self

        class Handler(_Handler):
            api = fake

            def handle_one_request(self) -> None:
                if fake._server is None:  # stopped: kept-alive connections end as well
                    self.close_connection = True
                    return
                super().handle_one_request()

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self) -> None:
        """Gone for good: open watch streams end too (clients then find nothing listening)."""
        server = self._server
        super().stop()
        self._server = None
        with self.store.cond:
            self.store.cond.notify_all()
        del server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def load_examples(fake: FakeApiServer) -> None:
    for obj in yaml.safe_load_all((REPO / "examples" / "cluster.yaml").read_text()):
        fake.create(obj)


def readyz(http: httpx.Client) -> tuple[int, str]:
    answer = http.get("/readyz")
    return answer.status_code, answer.text


def scrape(http: httpx.Client) -> dict[tuple[str, str], float]:
    """/metrics as (sample name, resource label) -> value."""
    out = {}
    for family in text_string_to_metric_families(http.get("/metrics").text):
        for sample in family.samples:
            out[(sample.name, sample.labels.get("resource", ""))] = sample.value
    return out


def test_started_before_the_api_server_it_waits_and_becomes_ready(tmp_path: Path) -> None:
    """And it says so once: one warning for the outage (no connection-pool retry chatter), one
    line when discovery works again."""
    port = free_port()
    fake = FakeOnPort(port)
    fake.url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
    command += ["--kubeconfig", kubeconfig(fake, tmp_path), "--api-timeout", "1"]
    with server_process(command) as (url, process), httpx.Client(base_url=url, timeout=10) as http:
        lines: list[str] = process.output_lines  # type: ignore[attr-defined]
        time.sleep(2.5)  # several discovery attempts, each with the client's connect retries
        assert http.get("/healthz").status_code == 200  # the process stays up: no crash loop
        code, text = readyz(http)
        assert code == 503 and "waiting for API discovery" in text
        bound = http.post("/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3"))
        assert "waiting for API discovery" in bound.json()["Error"]
        fake.start()
        try:
            load_examples(fake)
            wait_until(lambda: readyz(http)[0] == 200, timeout=30)
        finally:
            fake.stop()
        assert not [line for line in lines if "urllib3" in line or "Retrying" in line], lines
        # (besides the refused bind this test sends, logged as a failed bind)
        # (The store fence's state is logged once discovery works: this fake serves no policies.)
        warnings = [
            line
            for line in lines
            if " WARNING " in line and "not binding" not in line and "store fence" not in line
        ]
        assert len(warnings) == 1 and "API discovery failed" in warnings[0], warnings
        assert any("API discovery works again" in line for line in lines), lines


def test_a_stale_cache_is_not_ready_and_refuses_binds_until_it_recovers(tmp_path: Path) -> None:
    port = free_port()
    fake = FakeOnPort(port).start()
    load_examples(fake)
    with (
        cli_server(
            "--kubeconfig", kubeconfig(fake, tmp_path), "--api-timeout", "1", "--cache-stale-after", "1"
        ) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        wait_until(lambda: readyz(http)[0] == 200)
        healthy = scrape(http)
        assert healthy[("dra_extender_ready", "")] == 1 and healthy[("dra_extender_leader", "")] == 1
        assert healthy[("dra_extender_informer_synced", "resourceslices")] == 1
        assert healthy[("dra_extender_informer_down_seconds", "resourceslices")] == 0
        assert healthy[("dra_extender_informer_lists_total", "resourceslices")] >= 1
        fake.stop()  # every watch breaks, every relist fails
        lost = time.monotonic()
        wait_until(lambda: readyz(http)[0] == 503, timeout=15)
        assert time.monotonic() - lost < 12
        assert "watch of" in readyz(http)[1]
        stale = scrape(http)
        assert stale[("dra_extender_ready", "")] == 0
        assert stale[("dra_extender_informer_errors_total", "resourceslices")] >= 1
        assert stale[("dra_extender_informer_down_seconds", "resourceslices")] > 0
        error = http.post(
            "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        ).json()["Error"]
        assert "stale" in error
        back = FakeOnPort(port)
        back.store = fake.store  # the same cluster, back after an outage
        back.start()
        try:
            wait_until(lambda: readyz(http)[0] == 200, timeout=30)
            assert http.post(
                "/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
            ).json() == {"Error": ""}
        finally:
            back.stop()
    assert back.get("Pod", "trainer", "default")["spec"]["nodeName"] == "gpu-node-3"


def test_api_timeout_reaches_the_client() -> None:
    # Item 9: the flag reaches the service's configuration, and that bounds every API call.
    from kubernetes import client as k8s

    from extender.cli import _parser
    from extender.cluster.api import ClusterAPIError
    from extender.cluster.kube import RawKube, bounded_retries
    from extender.serve_command import serve_config

    args = _parser().parse_args(["serve", "--kubeconfig", "x", "--api-timeout", "1.5"])
    assert serve_config(args).api_timeout == 1.5
    with FakeApiServer() as fake:
        configuration = bounded_retries(k8s.Configuration(host=fake.url))
        raw = RawKube(k8s.ApiClient(configuration), timeout=serve_config(args).api_timeout)
        fake.faults.latency = 5.0
        started = time.monotonic()
        try:
            raw.request("GET", "/api/v1/nodes")
        except ClusterAPIError as exc:
            assert "timed out" in str(exc).lower()
        else:
            raise AssertionError("no timeout")
        assert time.monotonic() - started < 3.0
