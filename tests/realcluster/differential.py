"""Run a generated workload on the real control plane, and check its allocations from the store.

The same workload runs once under kube-scheduler with the in-tree DynamicResources plugin and
once under kube-scheduler with the extender; each run's outcome is read back from the API
server and judged by :func:`allocation_problems`, which knows the workload's selectors as
Python predicates (not through the extender's CEL engine).
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from tests.integration import invariants
from tests.realcluster.api import Api
from tests.realcluster.components import SCHEDULER_NAME
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.generator import CLASSES, PART, ClaimShape, Request, Workload
from tests.realcluster.workload import PAUSE, claims_from_templates

NAMESPACE = "default"
_UNITS = {"": 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}


def quantity_bytes(text: str) -> int:
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|)", text)
    assert match, f"unexpected quantity {text!r} in a generated slice"
    return int(match.group(1)) * _UNITS[match.group(2)]


def create(plane: ControlPlane, workload: Workload) -> None:
    """Every object of the workload, pods last (in order), template claims as the controller
    makes them."""
    api = plane.api
    for node in workload.nodes:
        plane.add_node(node)
    for obj in workload.device_classes() + workload.slices:
        api.create(obj)
    for name, shape in workload.templates.items():
        api.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {"spec": shape.spec()},
            }
        )
    for name, shape in workload.claims.items():
        api.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": shape.spec(),
            }
        )
    for pod_shape in workload.pods:
        refs = [{"name": f"claim-{i}", "resourceClaimName": c} for i, c in enumerate(pod_shape.claims)]
        refs += [{"name": e, "resourceClaimTemplateName": t} for e, t in pod_shape.templates.items()]
        pod = api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_shape.name, "namespace": NAMESPACE},
                "spec": {
                    "schedulerName": SCHEDULER_NAME,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": PAUSE,
                            "resources": {"claims": [{"name": r["name"]} for r in refs]},
                        }
                    ],
                    "resourceClaims": refs,
                },
            }
        )
        claims_from_templates(api, pod, controller=plane.controller_manager is not None)


@dataclass
class Outcome:
    placed: dict[str, str]
    unschedulable: set[str]
    pods: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    slices: list[dict[str, Any]]
    seconds: float


def _unschedulable(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def wait_outcome(api: Api, workload: Workload, *, timeout: float = 60.0, settle: float = 1.0) -> Outcome:
    """Waits until every pod is bound or was found unschedulable (and nothing changed for
    ``settle`` seconds, or the pods that fit are all bound), then reads the store."""
    started = time.monotonic()
    deadline = started + timeout
    expected = workload.fittable()
    last: tuple[frozenset[str], frozenset[str]] | None = None
    stable_since = time.monotonic()
    while True:
        pods = api.list("Pod", NAMESPACE)
        placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}
        failed = {p["metadata"]["name"] for p in pods if not p["spec"].get("nodeName") and _unschedulable(p)}
        now = time.monotonic()
        key = (frozenset(placed), frozenset(failed))
        if key != last:
            last, stable_since = key, now
        everyone = len(placed) + len(failed) == len(workload.pods)
        if (everyone and set(placed) >= expected and now - stable_since >= settle) or now > deadline:
            return Outcome(
                placed,
                failed,
                pods,
                api.list("ResourceClaim", NAMESPACE),
                api.list("ResourceSlice"),
                now - started,
            )
        time.sleep(0.1)


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    attributes: dict[str, Any]
    capacity: dict[str, int]
    tainted: bool
    counters: dict[str, int]


def _devices(slices: list[dict[str, Any]]) -> dict[tuple[str, str, str], Device]:
    out = {}
    for s in slices:
        spec = s["spec"]
        for d in spec.get("devices") or []:
            attrs = {k: next(iter(v.values())) for k, v in (d.get("attributes") or {}).items()}
            caps = {k: quantity_bytes(v["value"]) for k, v in (d.get("capacity") or {}).items()}
            counters = {
                k: quantity_bytes(v["value"])
                for c in d.get("consumesCounters") or []
                for k, v in c["counters"].items()
            }
            tainted = any(t.get("effect") == "NoSchedule" for t in d.get("taints") or [])
            key = (spec["driver"], spec["pool"]["name"], d["name"])
            out[key] = Device(*key, attrs, caps, tainted, counters)
    return out


def _attribute(device: Device, qualified: str) -> Any:
    domain, _, short = qualified.rpartition("/")
    return device.attributes.get(short if domain == device.driver else qualified)


def _requests(shape: ClaimShape) -> dict[str, Request]:
    out: dict[str, Request] = {}
    for r in shape.requests:
        for sub in r if isinstance(r, list) else [r]:
            out[sub.name] = sub
    return out


def _claim_problems(
    label: str,
    shape: ClaimShape,
    claim: dict[str, Any],
    node: str,
    devices: dict[tuple[str, str, str], Device],
) -> list[str]:
    problems: list[str] = []
    allocation = (claim.get("status") or {}).get("allocation")
    if not allocation:
        return [f"{label}: not allocated"]
    results = allocation["devices"]["results"]
    by_request: dict[str, list[Device]] = defaultdict(list)
    requests = _requests(shape)
    for r in results:
        device = devices.get((r["driver"], r["pool"], r["device"]))
        if device is None:
            problems.append(f"{label}: allocated unknown device {r['driver']}/{r['pool']}/{r['device']}")
            continue
        if device.pool != node:
            problems.append(f"{label}: device {device.name} of pool {device.pool}, pod on {node}")
        request = requests.get(r["request"])
        if request is None:
            problems.append(f"{label}: result for unknown request {r['request']}")
            continue
        by_request[r["request"]].append(device)
        checks = [CLASSES[request.device_class], *request.selectors]
        if not all(s.check(device.driver, device.attributes, device.capacity) for s in checks):
            problems.append(f"{label}: {device.pool}/{device.name} does not match request {request.name}")
        if device.tainted and not request.tolerates:
            problems.append(
                f"{label}: {device.pool}/{device.name} is tainted and {request.name} does not tolerate"
            )
    for entry in shape.requests:
        options = entry if isinstance(entry, list) else [entry]
        chosen = [o for o in options if o.name in by_request]
        if len(chosen) != 1:
            problems.append(f"{label}: {len(chosen)} of {[o.name for o in options]} allocated")
            continue
        (request,) = chosen
        got = by_request[request.name]
        if request.count is not None and len(got) != request.count:
            problems.append(f"{label}: {request.name} has {len(got)} devices, wants {request.count}")
        if request.count is None:
            matching = [
                d
                for d in devices.values()
                if d.pool == node
                and all(
                    s.check(d.driver, d.attributes, d.capacity)
                    for s in [CLASSES[request.device_class], *request.selectors]
                )
            ]
            if sorted(d.name for d in got) != sorted(d.name for d in matching):
                problems.append(
                    f"{label}: {request.name} (All) got {[d.name for d in got]} of {[d.name for d in matching]}"
                )
    if shape.match_attribute:
        values = {
            _attribute(devices[(r["driver"], r["pool"], r["device"])], shape.match_attribute) for r in results
        }
        if len(values) != 1 or None in values:
            problems.append(f"{label}: {shape.match_attribute} differs across devices: {values}")
    return problems


def allocation_problems(workload: Workload, outcome: Outcome) -> list[str]:
    """Every bound pod's claims allocated as its requests, class and constraints say; no device
    twice; partition counters not exceeded; the store's invariants."""
    devices = _devices(outcome.slices)
    claims = {c["metadata"]["name"]: c for c in outcome.claims}
    pods = {p["metadata"]["name"]: p for p in outcome.pods}
    problems = invariants.check(
        {"resourceclaims": outcome.claims, "pods": outcome.pods, "resourceslices": outcome.slices}
    )
    for shape in workload.pods:
        node = outcome.placed.get(shape.name)
        if node is None:
            continue
        for name in shape.claims:
            problems += _claim_problems(
                f"{shape.name}/{name}", workload.claims[name], claims[name], node, devices
            )
        statuses = {
            s["name"]: s.get("resourceClaimName")
            for s in (pods[shape.name].get("status") or {}).get("resourceClaimStatuses") or []
        }
        for entry, template in shape.templates.items():
            claim = claims.get(str(statuses.get(entry)))
            if claim is None:
                problems.append(f"{shape.name}: template claim {entry} not found")
                continue
            problems += _claim_problems(
                f"{shape.name}/{entry}", workload.templates[template], claim, node, devices
            )
    used: dict[str, int] = defaultdict(int)
    for c in outcome.claims:
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        ) or []:
            device = devices.get((r["driver"], r["pool"], r["device"]))
            if device is not None and device.driver == PART:
                used[device.pool] += device.counters.get("memory", 0)
    problems += [
        f"partitions of {pool} use {n} bytes of 40Gi" for pool, n in used.items() if n > 40 * 1024**3
    ]
    return problems
