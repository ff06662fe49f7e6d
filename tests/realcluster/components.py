"""kube-scheduler and dra-extender beside a real control plane, configured as the project ships them.

The scheduler's configuration is ``scheduler-config/second-scheduler.yaml`` as shipped, changed
only where a test machine differs from a pod (the kubeconfig path, the extender's port) and,
for the in-tree comparison, with the extender removed and DynamicResources enabled again.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.realcluster.controlplane import ControlPlane, Process, free_port, wait_http
from tests.shared import REPO

SCHEDULER_NAME = "dra-extender-scheduler"
SHIPPED_CONFIG = REPO / "scheduler-config" / "second-scheduler.yaml"


def scheduler_config(
    kubeconfig: Path,
    *,
    extender_url: str | None,
    client_qps: float | None = None,
    leader_elect: bool | None = None,
) -> dict[str, Any]:
    """The shipped configuration for this machine; ``extender_url=None``: the in-tree plugin."""
    config: dict[str, Any] = yaml.safe_load(SHIPPED_CONFIG.read_text())
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    if client_qps is not None:
        config["clientConnection"].update(qps=client_qps, burst=int(client_qps))
    if leader_elect is not None:
        config["leaderElection"]["leaderElect"] = leader_elect
    if extender_url is None:
        del config["extenders"]
        for profile in config["profiles"]:
            disabled = profile["plugins"]["multiPoint"]["disabled"]
            disabled[:] = [p for p in disabled if p["name"] != "DynamicResources"]
    else:
        (extender,) = config["extenders"]
        extender["urlPrefix"] = extender_url.rstrip("/") + "/scheduler"
    return config


class Scheduler:
    """A kube-scheduler process; its /metrics and /readyz are reachable without credentials
    (``open_metrics`` False: /metrics wants a token allowed to GET it, as in a pod).
    ``hostname``: the host name it sees (a UTS namespace of its own), as a pod's container sees
    the pod's name; its Lease identity is ``<hostname>_<uuid>``."""

    def __init__(
        self,
        plane: ControlPlane,
        config: dict[str, Any],
        name: str = "kube-scheduler",
        feature_gates: str = "",
        open_metrics: bool = True,
        hostname: str | None = None,
    ):
        self.plane = plane
        self.port = free_port()
        folder = plane.folder
        config_file = folder / f"{name}-{self.port}.yaml"
        config_file.write_text(yaml.safe_dump(config))
        kubeconfig = config["clientConnection"]["kubeconfig"]
        self.process = Process(
            name,
            [
                *(in_uts_namespace(hostname) if hostname else []),
                str(plane.binaries.kube_scheduler),
                f"--config={config_file}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez"
                + (",/metrics" if open_metrics else ""),
                "--v=2",
                *([f"--feature-gates={gates}"] if (gates := plane.component_gates(feature_gates)) else []),
            ],
            folder / f"{name}-{self.port}.log",
        )

    def start(self) -> Scheduler:
        self.process.start()
        wait_http(f"https://127.0.0.1:{self.port}/healthz", timeout=60, process=self.process, verify=False)
        return self

    def stop(self) -> None:
        self.process.stop()

    def metrics(self, token: str | None = None) -> str:
        return self.get_metrics(token).text

    def get_metrics(self, token: str | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.get(f"https://127.0.0.1:{self.port}/metrics", verify=False, timeout=10, headers=headers)

    def log(self) -> str:
        return self.process.log.read_text(errors="replace")

    def lines_about(self, *words: str, last: int = 60) -> str:
        """The last lines of its log that name any of ``words`` (for a failure's message)."""
        found = [line for line in self.log().splitlines() if any(w in line for w in words)]
        return "\n".join(found[-last:])


def in_uts_namespace(hostname: str) -> list[str]:
    """A command prefix: run it with ``hostname`` as its host name, in a UTS namespace of its own
    (the same process, exec'd: signals reach it). Unprivileged, in a user namespace too."""
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname]


@contextlib.contextmanager
def scheduler(
    plane: ControlPlane,
    config: dict[str, Any],
    name: str = "kube-scheduler",
    feature_gates: str = "",
    *,
    open_metrics: bool = True,
) -> Iterator[Scheduler]:
    s = Scheduler(plane, config, name, feature_gates, open_metrics)
    try:
        yield s.start()
    finally:
        s.stop()


class Extender:
    """``dra-extender serve --kubeconfig`` as the sidecar's ServiceAccount."""

    def __init__(
        self,
        plane: ControlPlane,
        *args: str,
        name: str = "dra-extender",
        kubeconfig: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """``kubeconfig``: another identity than the sidecar's (a pod-bound token, say);
        ``env``: more environment (``POD_NAME``, as the downward API sets it)."""
        self.plane = plane
        self.name = name
        self.args = args
        self.url = ""
        self.ops_url = ""
        args = with_release_gates(plane, args)
        self.process = Process(
            name,
            [
                sys.executable,
                "-m",
                "extender.cli",
                "serve",
                "--kubeconfig",
                str(kubeconfig or plane.extender_kubeconfig()),
                "--port",
                "0",
                "--ops-port",
                "0",
                "--ops-host",
                "127.0.0.1",
                *args,
            ],
            plane.folder / f"{name}.log",
            env=env,
        )

    def start(self, *, ready: bool = True) -> Extender:
        self.process.log.unlink(missing_ok=True)
        self.process.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.url:
            if not self.process.alive():
                raise RuntimeError(f"{self.name} exited:\n{self.process.tail()}")
            match = re.search(
                r"verbs and debug views on (https?://[^/\s]+)\S* ?; probes and metrics on (https?://[^/\s]+)",
                self.process.log.read_text(errors="replace") if self.process.log.exists() else "",
            )
            if match:
                self.url, self.ops_url = match.group(1), match.group(2)
            else:
                time.sleep(0.1)
        if not self.url:
            raise RuntimeError(f"{self.name} did not start:\n{self.process.tail()}")
        if ready:
            wait_http(f"{self.ops_url}/readyz", timeout=60, process=self.process)
        return self

    def stop(self) -> None:
        self.process.stop()

    def get(self, path: str) -> Any:
        return httpx.get(self.url + path, timeout=30).json()

    def metrics(self) -> str:
        return httpx.get(self.ops_url + "/metrics", timeout=10).text

    def log(self) -> str:
        return self.process.log.read_text(errors="replace")


def with_release_gates(plane: ControlPlane, args: tuple[str, ...]) -> tuple[str, ...]:
    """The extender's arguments with the gates the suite turns on for the binaries' release
    (releases.py) merged into its ``--feature-gates`` (added when absent and needed)."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--feature-gates" and i + 1 < len(out):
            out[i + 1] = plane.component_gates(out[i + 1])
            return tuple(out)
        if arg.startswith("--feature-gates="):
            out[i] = "--feature-gates=" + plane.component_gates(arg.partition("=")[2])
            return tuple(out)
    gates = plane.component_gates()
    return (*out, "--feature-gates", gates) if gates else tuple(out)


@contextlib.contextmanager
def extender(
    plane: ControlPlane,
    *args: str,
    name: str = "dra-extender",
    ready: bool = True,
    kubeconfig: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[Extender]:
    e = Extender(plane, *args, name=name, kubeconfig=kubeconfig, env=env)
    try:
        yield e.start(ready=ready)
    finally:
        e.stop()


@contextlib.contextmanager
def deciding(plane: ControlPlane, mode: str, feature_gates: str = "") -> Iterator[Scheduler]:
    """kube-scheduler as shipped, deciding with the in-tree plugin (``mode`` "in-tree") or through
    the extender ("extender"); both with ``feature_gates``: the side-by-side comparison. Yields
    the kube-scheduler (its log tells why a pod went where it went)."""
    kubeconfig = plane.extender_kubeconfig()
    if mode == "in-tree":
        with scheduler(
            plane, scheduler_config(kubeconfig, extender_url=None), feature_gates=feature_gates
        ) as in_tree:
            yield in_tree
        return
    args = ("--feature-gates", feature_gates) if feature_gates else ()
    with (
        extender(plane, *args) as ext,
        scheduler(
            plane, scheduler_config(kubeconfig, extender_url=ext.url), feature_gates=feature_gates
        ) as s,
    ):
        yield s
