"""Tiny builders of raw API objects (as a user would apply them) for tests."""

from __future__ import annotations

from typing import Any

V1 = "resource.k8s.io/v1"


def attrs(**values: Any) -> dict[str, Any]:
    """``attrs(model="a100", index=0, version=("version", "1.0.0"))`` -> DRA attribute map."""
    out: dict[str, Any] = {}
    for name, v in values.items():
        key = name.replace("__", "/").replace("_dot_", ".")
        if isinstance(v, tuple):
            out[key] = {v[0]: v[1]}
        elif isinstance(v, bool):
            out[key] = {"bool": v}
        elif isinstance(v, int):
            out[key] = {"int": v}
        else:
            out[key] = {"string": v}
    return out


def device(
    name: str,
    *,
    attributes: dict[str, Any] | None = None,
    capacity: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if attributes:
        d["attributes"] = attributes
    if capacity:
        d["capacity"] = {k: (v if isinstance(v, dict) else {"value": v}) for k, v in capacity.items()}
    d.update(extra)
    return d


def resource_slice(
    name: str,
    devices: list[dict[str, Any]] | None = None,
    *,
    driver: str = "driver-a",
    pool: str = "pool-1",
    node: str | None = "node-1",
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
    }
    if node is not None and not any(
        k in spec for k in ("nodeSelector", "allNodes", "perDeviceNodeSelection")
    ):
        s["nodeName"] = node
    if devices is not None:
        s["devices"] = devices
    s.update(spec)
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": s}


def device_class(
    name: str = "class-a",
    expression: str | None = 'device.driver == "driver-a"',
    config: list[Any] | None = None,
    *,
    extended_resource: str | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if expression is not None:
        spec["selectors"] = [{"cel": {"expression": expression}}]
    if config:
        spec["config"] = config
    if extended_resource:
        spec["extendedResourceName"] = extended_resource
    meta: dict[str, Any] = {"name": name}
    if created:
        meta["creationTimestamp"] = created
    return {"apiVersion": V1, "kind": "DeviceClass", "metadata": meta, "spec": spec}


def exact(
    name: str = "req-0",
    cls: str = "class-a",
    count: int = 1,
    *,
    mode: str = "ExactCount",
    selectors: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    e: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        e["count"] = count
    if selectors:
        e["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    e.update(extra)
    return {"name": name, "exactly": e}


def first_available(name: str, *subrequests: dict[str, Any]) -> dict[str, Any]:
    subs = []
    for sub in subrequests:
        flat = {"name": sub["name"], **sub["exactly"]}
        subs.append(flat)
    return {"name": name, "firstAvailable": subs}


def claim(
    name: str = "claim-0",
    requests: list[dict[str, Any]] | None = None,
    *,
    constraints: list[dict[str, Any]] | None = None,
    config: list[dict[str, Any]] | None = None,
    allocation: dict[str, Any] | None = None,
    namespace: str = "default",
    **meta: Any,
) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": requests if requests is not None else [exact()]}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    c: dict[str, Any] = {
        "apiVersion": V1,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", **meta},
        "spec": {"devices": devices},
    }
    if allocation is not None:
        c["status"] = {"allocation": allocation}
    return c


def allocated(
    *devices: tuple[str, str, str],
    admin: bool = False,
    share: str | None = None,
    consumed: dict[str, str] | None = None,
) -> dict[str, Any]:
    results = []
    for driver, pool, dev in devices:
        r: dict[str, Any] = {"request": "req-0", "driver": driver, "pool": pool, "device": dev}
        if admin:
            r["adminAccess"] = True
        if share:
            r["shareID"] = share
        if consumed:
            r["consumedCapacity"] = consumed
        results.append(r)
    return {"devices": {"results": results}}


def node(name: str = "node-1", **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}


def container(
    name: str = "c", requests: dict[str, str | int] | None = None, *, sidecar: bool = False
) -> dict[str, Any]:
    """A container with resource ``requests``; ``sidecar``: an init container that keeps running."""
    out: dict[str, Any] = {"name": name, "image": "x"}
    if requests:
        out["resources"] = {"requests": {k: str(v) for k, v in requests.items()}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def with_allocatable(obj: dict[str, Any], resources: dict[str, str | int]) -> dict[str, Any]:
    """The node ``obj`` advertising ``resources`` in ``status.allocatable`` (device plugins)."""
    obj.setdefault("status", {}).setdefault("allocatable", {}).update(
        {k: str(v) for k, v in resources.items()}
    )
    return obj


def pod(
    name: str = "pod",
    claims: list[str] | None = None,
    *,
    templates: dict[str, str | None] | None = None,
    uid: str | None = None,
    node_name: str | None = None,
    scheduler: str = "dra-extender-scheduler",
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    priority: int | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": containers or [{"name": "c", "image": "x"}],
        "schedulerName": scheduler,
    }
    if init_containers:
        spec["initContainers"] = init_containers
    refs = [{"name": c, "resourceClaimName": c} for c in claims or []]
    refs += [{"name": entry, "resourceClaimTemplateName": "template"} for entry in (templates or {})]
    if refs:
        spec["resourceClaims"] = refs
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    p: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
        "spec": spec,
    }
    if labels:
        p["metadata"]["labels"] = labels
    if templates:
        p["status"] = {
            "resourceClaimStatuses": [{"name": k, "resourceClaimName": v} for k, v in templates.items()]
        }
    return p


def device_taint_rule(
    name: str, *, driver: str = "driver-a", effect: str = "NoExecute", key: str = "drain", **selector: str
) -> dict[str, Any]:
    """A DeviceTaintRule (v1beta2, as 1.36 serves it) tainting the devices ``selector`` names
    (``pool``, ``device``) of ``driver``."""
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": {"driver": driver, **selector}, "taint": {"key": key, "effect": effect}},
    }


def pod_disruption_budget(
    name: str,
    match_labels: dict[str, str] | None,
    *,
    allowed: int,
    disrupted: tuple[str, ...] = (),
    namespace: str = "default",
) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget with its status (``match_labels`` None: no selector)."""
    spec: dict[str, Any] = {"minAvailable": 1}
    if match_labels is not None:
        spec["selector"] = {"matchLabels": match_labels}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
        "status": {
            "disruptionsAllowed": allowed,
            "disruptedPods": dict.fromkeys(disrupted, "2026-11-24T00:00:00Z"),
        },
    }


def reserve(claim_obj: dict[str, Any], *pods: str) -> dict[str, Any]:
    """``claim_obj`` (allocated) with ``status.reservedFor`` naming these pods (UID ``uid-<pod>``)."""
    claim_obj.setdefault("status", {})["reservedFor"] = [
        {"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods
    ]
    return claim_obj


def device_status(
    device: str = "d0", *, driver: str = "driver-a", pool: str = "pool-1", **conditions: str
) -> list[dict[str, Any]]:
    """``status.devices`` with one device's conditions, as its DRA driver writes them
    (``Attached="True"``: condition type and status)."""
    return [
        {
            "driver": driver,
            "pool": pool,
            "device": device,
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": "Driver",
                    "message": f"{t} is {s}",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
                for t, s in conditions.items()
            ],
        }
    ]
