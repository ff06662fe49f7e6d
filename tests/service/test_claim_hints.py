"""Claim hints through the service (issue 53): filter's answer for a pod whose claim can never
match carries the hint in the reason kube-scheduler puts into FailedScheduling (or in the error,
for a CEL runtime error), /debug/pods lists it, and the decision is what it was without it.
A pod PreFilter already refuses (a class that does not exist) keeps upstream's reason alone."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.examples.driver_cases import collect
from tests.service.fixtures import args_names
from tests.service.harness import Running, run_with_service
from tests.shared import REPO

DRIVERS = REPO / "examples" / "drivers"

#: (case, state, pod, what every answer says: each failed node's reason, or the error).
CASES: list[tuple[str, str, str, str]] = [
    (
        "nvidia index: a CEL runtime error, the hint in the error",
        "nvidia-gpu",
        "gpu-test6/pod-0",
        "hint: claim gpu-test6/pod-0-a100-f9g0h: request gpu: the request's selector reads attribute "
        "gpu.nvidia.com/index, which no device of driver gpu.nvidia.com publishes",
    ),
    (
        "dranet's quick-start: its class reads cloudNetwork, which dranet does not publish",
        "dranet",
        "dranet-quickstart/pod-dra-net1",
        "hint: claim dranet-quickstart/cloud-network-dra-net-1: request req-cloud-net-1: DeviceClass dranet-cloud "
        "accepts none of the 34 published devices (and 1 more: kubectl dra lint)",
    ),
    (
        "AMD partitions constrained on deviceID: did you mean parentDeviceID",
        "amd-gpu",
        "gpu-test-same-parent/pod-two-partitions-same-parent",
        "matchAttribute gpu.amd.com/deviceID: no device of driver gpu.amd.com that request p0 could get publishes "
        "it; did you mean gpu.amd.com/parentDeviceID? (and 1 more: kubectl dra lint)",
    ),
]


def pod_object(r: Running, key: str) -> dict[str, Any]:
    namespace, name = key.split("/")
    return r.store.get("Pod", namespace, name)


@pytest.mark.parametrize(("state", "pod", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_pod_whose_claim_can_never_match_is_told_why_in_filter_and_debug(
    state: str, pod: str, says: str
) -> None:
    async def body(r: Running) -> tuple[dict[str, Any], dict[str, Any]]:
        nodes = sorted(r.service.engine.state.nodes)
        answer = await r.client.post("/scheduler/filter", content=args_names(pod_object(r, pod), nodes))
        debug = await r.client.get(f"/debug/pods/{pod}")
        return orjson.loads(answer.content), debug.json()

    answer, debug = run_with_service(body, paths=[str(DRIVERS / state)])
    assert not answer["NodeNames"]
    reasons = {**answer["FailedNodes"], **answer["FailedAndUnresolvableNodes"]}
    if answer["Error"]:
        assert says in answer["Error"]
        assert reasons == {}
    else:
        assert reasons and all(reason.endswith(says) for reason in reasons.values()), reasons
    assert says.removeprefix("hint: ").split(" (and ")[0] in debug["hints"][0]


def test_a_pod_that_fits_gets_no_hint_and_the_same_nodes() -> None:
    fits, _ = collect()
    state, pod = next((c[1], c[2]) for c in fits if c[1] == "nvidia-gpu")

    async def body(r: Running) -> tuple[dict[str, Any], dict[str, Any]]:
        nodes = sorted(r.service.engine.state.nodes)
        answer = await r.client.post("/scheduler/filter", content=args_names(pod_object(r, pod), nodes))
        return orjson.loads(answer.content), (await r.client.get(f"/debug/pods/{pod}")).json()

    answer, debug = run_with_service(body, paths=[str(DRIVERS / state)])
    assert answer["NodeNames"] == ["gpu-node-a100", "gpu-node-h100"]
    assert "hint" not in str(answer) and "hints" not in debug
