"""What a connection per request costs the extender: server CPU per filter over one kept-alive
connection against a new connection for each request, over HTTPS (ECDSA P-256 and RSA 2048
certificates) and plain HTTP.

Why: kube-scheduler's extender client keeps at most 2 idle connections (``makeTransport`` sets
no ``MaxIdleConnsPerHost``, so Go's default applies: pkg/scheduler/extender.go, v1.36), and
binds run concurrently, so under load nearly every bind comes on a new connection (a 100 x 8
run under the real control plane left about 790 connections in TIME_WAIT for 800 pods). With
``enableHTTPS`` each of them is a TLS handshake on the extender's CPU.

Run: ``python -m bench.verbs_tls_bench`` (``--requests``, ``--rounds``). The server is
``dra-extender serve`` on the embedded example cluster; the client is the standard library's,
on this machine; the figure is the server process's CPU (user + system) per request.
"""

from __future__ import annotations

import argparse
import http.client
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import trustme

from tests.service.fixtures import TRAINER, args_names

REPO = Path(__file__).resolve().parent.parent
NODES = ["gpu-node-1", "gpu-node-2", "gpu-node-3", "cpu-node-1"]
JSON = {"Content-Type": "application/json"}


@contextmanager
def served(tls: tuple[Path, Path] | None) -> Iterator[tuple[int, psutil.Process]]:
    """``dra-extender serve`` on the examples, with this certificate and key (None: HTTP)."""
    command = [sys.executable, "-m", "extender.cli", "serve", "--state", str(REPO / "examples")]
    command += ["--port", "0", "--ops-port", "0"]
    if tls is not None:
        command += ["--tls-cert-file", str(tls[0]), "--tls-key-file", str(tls[1])]
    proc = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    stderr = proc.stderr
    port: list[int] = []
    found = threading.Event()

    def read() -> None:  # keep the pipe drained for as long as the server runs
        for line in iter(stderr.readline, ""):
            match = re.search(r"verbs and debug views on https?://[^:/\s]+:(\d+)", line)
            if match and not port:
                port.append(int(match.group(1)))
                found.set()
        found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        found.wait(60)
        if not port:
            raise RuntimeError("the server did not start")
        yield port[0], psutil.Process(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def requests(port: int, tls: bool, count: int, fresh: bool) -> None:
    """``count`` filters; ``fresh``: each on a connection of its own."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the handshake's cost is the server's either way
    body = args_names(TRAINER, NODES)
    connection: http.client.HTTPConnection | None = None
    for _ in range(count):
        if fresh or connection is None:
            if connection is not None:
                connection.close()
            connection = (
                http.client.HTTPSConnection("127.0.0.1", port, context=context)
                if tls
                else http.client.HTTPConnection("127.0.0.1", port)
            )
        connection.request("POST", "/scheduler/filter", body=body, headers=JSON)
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"filter answered {answer.status}")
    if connection is not None:
        connection.close()


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def measure(tls: tuple[Path, Path] | None, count: int, rounds: int) -> dict[str, list[float]]:
    """Server CPU ms per request, per round, kept-alive and fresh connections alternating."""
    out: dict[str, list[float]] = {"kept-alive": [], "a connection per request": []}
    with served(tls) as (port, process):
        requests(port, tls is not None, count // 4, False)  # warm up both ways
        requests(port, tls is not None, count // 4, True)
        for _ in range(rounds):
            for name, fresh in (("kept-alive", False), ("a connection per request", True)):
                before = cpu_seconds(process)
                requests(port, tls is not None, count, fresh)
                time.sleep(0.3)  # the server's last answers
                out[name].append(1e3 * (cpu_seconds(process) - before) / count)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=600, help="requests per round and way")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        settings: dict[str, tuple[Path, Path] | None] = {"HTTP": None}
        for key_type in (trustme.KeyType.ECDSA, trustme.KeyType.RSA):
            issued = trustme.CA(key_type=key_type).issue_cert("127.0.0.1", key_type=key_type)
            cert, key = Path(folder, f"{key_type.name}.crt"), Path(folder, f"{key_type.name}.key")
            issued.cert_chain_pems[0].write_to_path(str(cert))
            issued.private_key_pem.write_to_path(str(key))
            settings[f"HTTPS ({key_type.name})"] = (cert, key)
        for name, tls in settings.items():
            results = measure(tls, args.requests, args.rounds)
            for way, figures in results.items():
                listed = ", ".join(f"{f:.3f}" for f in figures)
                print(f"{name:<14} {way:<26} server CPU per filter: {listed} ms", flush=True)


if __name__ == "__main__":
    main()
