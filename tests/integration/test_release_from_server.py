"""``serve --kubeconfig`` decides as the API server's release unless ``--kubernetes-version`` says
otherwise: against the fake API server answering /version as 1.36 or 1.37, a DeviceTaintRule
(GA and on in 1.37, beta and off in 1.36) decides whether the only GPU may be used."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from tests.builders import claim, device, device_class, exact, node, pod, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.servers import server_process
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import args_names

CASES = {
    # name: (what /version says, extra flags, whether the pod fits, the release logged)
    "1.36 server: taint rules off": ("36", [], True, "1.36"),
    "1.37 server: taint rules on": ("37", [], False, "1.37"),
    "1.36 server, --kubernetes-version 1.37": ("36", ["--kubernetes-version", "1.37"], False, "1.37"),
    "unknown newer server: the newest release known": ("41", [], False, "1.38"),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_release_in_effect(case: tuple[str, list[str], bool, str], tmp_path: Path) -> None:
    minor, flags, fits, release = case
    # 1.36 serves DeviceTaintRules at v1beta2 only; the extender reads them where they are served.
    served_at = {"devicetaintrules": "v1beta2"} if minor == "36" else None
    with FakeApiServer(minor=minor, served_at=served_at) as fake:
        rule = {
            "apiVersion": "resource.k8s.io/v1beta2" if served_at else "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "drain"},
            "spec": {
                "deviceSelector": {"device": "gpu-0"},
                "taint": {"key": "drain", "effect": "NoSchedule"},
            },
        }
        for obj in [
            device_class("gpu", 'device.driver == "gpu.example.com"'),
            node("gpu-node"),
            resource_slice(
                "s", [device("gpu-0")], driver="gpu.example.com", pool="gpu-node", node="gpu-node"
            ),
            rule,
            claim("c", requests=[exact(cls="gpu")]),
            pod("p", ["c"]),
        ]:
            fake.create(obj)
        command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
        command += ["--kubeconfig", kubeconfig(fake, tmp_path), *flags]
        with server_process(command) as (url, process), httpx.Client(base_url=url, timeout=10) as http:
            wait_until(lambda: ready(http))
            answer = http.post(
                "/scheduler/filter", content=args_names(fake.get("Pod", "p", "default"), ["gpu-node"])
            )
            assert answer.status_code == 200
            passed = answer.json()["NodeNames"] or []
            logged: list[str] = process.output_lines  # type: ignore[attr-defined]
        assert (passed == ["gpu-node"]) == fits, answer.json()
        said = [line for line in logged if " INFO " in line and "deciding as Kubernetes" in line]
        assert len(said) == 1 and f"deciding as Kubernetes {release} (API server 1.{minor})" in said[0], said
        unknown = [line for line in logged if "which dra-extender does not know" in line]
        assert len(unknown) == (minor not in ("36", "37")), unknown


#: --feature-gates as given, what /version says -> whether the extender becomes ready.
GATE_CASES = {
    "node-allocatable devices, 1.36 server: its first alpha API": ("DRANodeAllocatableResources", "36", True),
    "node-allocatable devices, 1.37 server: its second alpha API": (
        "DRANodeAllocatableResources",
        "37",
        True,
    ),
    "shared consumable capacity, 1.38 server: not implemented": ("DRASharedConsumableCapacity", "38", False),
}


@pytest.mark.parametrize("case", GATE_CASES.values(), ids=GATE_CASES.keys())
def test_gates_are_checked_against_the_api_server_s_release(
    case: tuple[str, str, bool], tmp_path: Path
) -> None:
    """A gate the extender implements for some releases only is accepted on the command line and
    judged once /version is known: unsupported there, the extender stays not ready, saying why
    (deciding without it would answer otherwise than kube-scheduler with it)."""
    gate, minor, becomes_ready = case
    with FakeApiServer(minor=minor) as fake:
        fake.create(node("n"))
        command = [sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0"]
        command += ["--kubeconfig", kubeconfig(fake, tmp_path), "--feature-gates", f"{gate}=true"]
        with server_process(command) as (url, process), httpx.Client(base_url=url, timeout=10) as http:
            if becomes_ready:
                wait_until(lambda: ready(http))
                return
            logged: list[str] = process.output_lines  # type: ignore[attr-defined]
            wait_until(lambda: any("is not supported by dra-extender" in line for line in logged))
            answer = http.get("/readyz")
            assert answer.status_code == 503 and f"--feature-gates for Kubernetes 1.{minor}" in answer.text, (
                answer.text
            )
