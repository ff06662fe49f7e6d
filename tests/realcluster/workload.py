"""Objects for the real API server, from the suite's tiny builders, and the store's invariants.

The builders write what the fake API server accepts (uids of the tests' choosing, status on
create); here they are made into what a user would apply to a real one. The invariants are
checked on the real API server's own objects, never on the extender's view.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests import builders as b
from tests.realcluster.api import Api, ApiError
from tests.realcluster.components import SCHEDULER_NAME

GPU_DRIVER = "gpu.example.com"
GPU_CLASS = "gpu.example.com"
PAUSE = "registry.k8s.io/pause:3.10"


def applied(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a user applies it: no uid, no status, a real image."""
    out = copy.deepcopy(obj)
    out.get("metadata", {}).pop("uid", None)
    out.pop("status", None)
    for c in (out.get("spec") or {}).get("containers") or []:
        if c.get("image") == "x":
            c["image"] = PAUSE
    return out


def gpu_class(name: str = GPU_CLASS, expression: str | None = None, **kw: Any) -> dict[str, Any]:
    return applied(b.device_class(name, expression or f'device.driver == "{GPU_DRIVER}"', **kw))


def gpu_slice(node: str, gpus: int = 8, *, memory: str = "80Gi", **device_extra: Any) -> dict[str, Any]:
    devices = [
        b.device(
            f"gpu-{i}",
            attributes=b.attrs(index=i, model="a100", numa=i // max(1, gpus // 2)),
            capacity={"memory": memory},
            **device_extra,
        )
        for i in range(gpus)
    ]
    return applied(b.resource_slice(f"{node}-gpus", devices, driver=GPU_DRIVER, pool=node, node=node))


def one_gpu_claim(
    name: str, namespace: str = "default", *, cls: str = GPU_CLASS, count: int = 1, **kw: Any
) -> dict[str, Any]:
    return applied(b.claim(name, [b.exact("gpu", cls, count, **kw)], namespace=namespace))


def pod_with_claims(
    name: str,
    claims: Iterable[str] = (),
    *,
    templates: dict[str, str] | None = None,
    namespace: str = "default",
    scheduler: str = SCHEDULER_NAME,
    priority_class: str | None = None,
    containers: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    grace: int = 0,
) -> dict[str, Any]:
    """``grace``: terminationGracePeriodSeconds; 0 (deleted at once, nothing plays the kubelet)
    unless a test runs tests/realcluster/kubelet.py, which ends Terminating pods."""
    p = applied(b.pod(name, list(claims), scheduler=scheduler, containers=containers, labels=labels))
    p["metadata"]["namespace"] = namespace
    refs = p["spec"].setdefault("resourceClaims", [])
    for entry, template in (templates or {}).items():
        refs.append({"name": entry, "resourceClaimTemplateName": template})
    if not refs:
        del p["spec"]["resourceClaims"]
    p["spec"]["terminationGracePeriodSeconds"] = grace
    if priority_class:
        p["spec"]["priorityClassName"] = priority_class
    return p


def claims_from_templates(api: Api, pod: dict[str, Any], *, controller: bool = False) -> None:
    """The claims of a new pod's template entries. ``controller``: the real kube-controller-manager
    runs and makes them; otherwise this does what its resourceclaim controller does: one claim
    per entry (generateName ``<pod>-<entry>-``, the pod-claim-name annotation, the pod as
    controlling owner), then ``status.resourceClaimStatuses`` on the pod."""
    if controller:
        return
    meta = pod["metadata"]
    statuses = []
    for ref in pod["spec"].get("resourceClaims") or []:
        template_name = ref.get("resourceClaimTemplateName")
        if not template_name:
            continue
        template = api.get("ResourceClaimTemplate", template_name, meta["namespace"])
        assert template is not None, template_name
        created = api.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {
                    "generateName": f"{meta['name']}-{ref['name']}-",
                    "namespace": meta["namespace"],
                    "annotations": {"resource.kubernetes.io/pod-claim-name": ref["name"]},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": meta["name"],
                            "uid": meta["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                    **(
                        {"labels": template["spec"]["metadata"]["labels"]}
                        if (template["spec"].get("metadata") or {}).get("labels")
                        else {}
                    ),
                },
                "spec": template["spec"]["spec"],
            }
        )
        statuses.append({"name": ref["name"], "resourceClaimName": created["metadata"]["name"]})
    if statuses:
        api.patch(
            "Pod",
            meta["name"],
            meta["namespace"],
            {"status": {"resourceClaimStatuses": statuses}},
            subresource="status",
            content_type="application/strategic-merge-patch+json",
        )


def bound(api: Api, namespace: str = "default") -> dict[str, str]:
    return {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in api.list("Pod", namespace)
        if p["spec"].get("nodeName")
    }


def wait_bound(api: Api, count: int, *, namespace: str = "default", timeout: float = 60.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        placed = bound(api, namespace)
        if len(placed) >= count or time.monotonic() > deadline:
            return placed
        time.sleep(0.2)


def failed_scheduling(api: Api, namespace: str = "default") -> list[dict[str, Any]]:
    return [e for e in api.list("Event", namespace) if e.get("reason") == "FailedScheduling"]


def wait_unschedulable(api: Api, name: str, namespace: str = "default") -> None:
    """Until kube-scheduler reports the pod with a FailedScheduling event."""
    api.wait_for(
        lambda: any(e["involvedObject"]["name"] == name for e in failed_scheduling(api, namespace)),
        what=f"{name} unschedulable",
    )


def priority_classes(api: Api, **values: int) -> None:
    """PriorityClasses by name and value (``low=0, high=1000``)."""
    for name, value in values.items():
        api.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )


def store_violations(api: Api) -> list[str]:
    """The store's invariants (tests/integration/invariants.py), read from the real API server."""
    from tests.integration import invariants

    objects = {
        "resourceclaims": api.list("ResourceClaim"),
        "pods": api.list("Pod"),
        "resourceslices": api.list("ResourceSlice"),
    }
    return invariants.check(objects)


def remove(api: Api, kinds: tuple[str, ...], namespaces: tuple[str, ...]) -> None:
    """Every object of these namespaced kinds, claims' finalizers first (no controller removes
    them here); the schedulers' and extenders' Leases in dra-extender, so that a new one need not
    wait them out."""

    def one(kind: str, namespace: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind == "Lease" and not name.startswith("test-"):
            return
        if obj["metadata"].get("finalizers"):
            with contextlib.suppress(ApiError):
                api.patch(kind, name, namespace, {"metadata": {"finalizers": None}})
        api.delete(kind, name, namespace)

    # Several at a time: the failover runs leave hundreds of pods and claims.
    with ThreadPoolExecutor(8) as pool:
        for namespace in namespaces:
            for kind in kinds:
                list(pool.map(lambda obj: one(kind, namespace, obj), api.list(kind, namespace)))  # noqa: B023
    for lease in api.list("Lease", "dra-extender"):
        api.delete("Lease", lease["metadata"]["name"], "dra-extender")
