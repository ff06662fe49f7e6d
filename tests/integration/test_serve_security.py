"""Who may call what (issue 10): the verbs and debug views only with the scheduler's client
certificate; probes and metrics on their own listener, which serves nothing else."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import httpx
import pytest
import trustme

from tests.integration.servers import EXAMPLES, cli_server
from tests.service.fixtures import binding


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def client(url: str, server_ca: trustme.CA, cert: trustme.LeafCert | None) -> httpx.Client:
    context = ssl.create_default_context()
    server_ca.configure_trust(context)
    if cert is not None:
        cert.configure_cert(context)
    return httpx.Client(base_url=url, verify=context, timeout=10)


def test_only_the_schedulers_certificate_reaches_the_verbs(tmp_path: Path) -> None:
    server_ca, client_ca, other_ca = trustme.CA(), trustme.CA(), trustme.CA()
    server = server_ca.issue_cert("127.0.0.1", "localhost")
    scheduler = client_ca.issue_cert("kube-scheduler")
    intruder = client_ca.issue_cert("some-pod")  # signed by the right CA, the wrong name
    stranger = other_ca.issue_cert("kube-scheduler")
    server.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    client_ca.cert_pem.write_to_path(str(tmp_path / "clients.pem"))
    ops_port = free_port()
    with cli_server(
        "--state",
        EXAMPLES,
        "--tls-cert-file",
        str(tmp_path / "server.pem"),
        "--tls-key-file",
        str(tmp_path / "server.pem"),
        "--tls-client-ca-file",
        str(tmp_path / "clients.pem"),
        "--tls-client-name",
        "kube-scheduler",
        "--ops-port",
        str(ops_port),
    ) as url:
        assert url.startswith("https://")
        bind = binding("trainer", "uid-pod-trainer", "gpu-node-3")
        for refused in (None, intruder, stranger):
            with client(url, server_ca, refused) as http, pytest.raises(httpx.TransportError):
                http.post("/scheduler/bind", content=bind)
            with client(url, server_ca, refused) as http, pytest.raises(httpx.TransportError):
                http.get("/debug/claims")
        with client(url, server_ca, scheduler) as http:
            assert http.get("/debug/claims").status_code == 200
            assert http.post("/scheduler/bind", content=bind).json() == {"Error": ""}
        # Probes and metrics: plain HTTP for kubelet and Prometheus, and nothing else there.
        with httpx.Client(base_url=f"http://127.0.0.1:{ops_port}", timeout=10) as ops:
            assert ops.get("/healthz").status_code == 200
            assert ops.get("/readyz").status_code == 200
            assert "dra_extender_binds_total" in ops.get("/metrics").text
            assert ops.post("/scheduler/bind", content=bind).status_code == 404
            assert ops.get("/debug/claims").status_code == 404
