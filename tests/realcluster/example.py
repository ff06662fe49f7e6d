"""The example cluster (examples/cluster.yaml) created in a real API server, as a user would:
Nodes registered, objects applied without status, the running pod's claim allocated to it, and
template claims made as the resourceclaim controller makes them."""

from __future__ import annotations

from typing import Any

import yaml

from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import applied, claims_from_templates
from tests.shared import REPO

EXAMPLE = REPO / "examples" / "cluster.yaml"


def example_objects() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]


def create_example(plane: ControlPlane, first: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Creates the example cluster, the pods named in ``first`` before the others (kube-scheduler
    takes pods of equal priority in creation order); returns the pods as created (real uids)."""
    api = plane.api
    objects = example_objects()
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    for n in by_kind["Node"]:
        allocatable = dict((n.get("status") or {}).get("allocatable") or {})
        plane.add_node(
            n["metadata"]["name"],
            labels=n["metadata"].get("labels"),
            cpu=allocatable.pop("cpu", "64"),
            memory=allocatable.pop("memory", "256Gi"),
            pods=allocatable.pop("pods", "110"),
            extra=allocatable,
        )
    for kind in ("DeviceClass", "ResourceSlice", "ResourceClaimTemplate"):
        for obj in by_kind.get(kind, []):
            api.create(applied(obj))
    template_claims = {
        c["metadata"]["name"]
        for c in by_kind["ResourceClaim"]
        if any(r.get("kind") == "Pod" for r in c["metadata"].get("ownerReferences") or [])
    }
    claims = {c["metadata"]["name"]: c for c in by_kind["ResourceClaim"]}
    for name, c in claims.items():
        if name not in template_claims:
            api.create(applied(c))
    pods: dict[str, dict[str, Any]] = {}
    for p in sorted(by_kind["Pod"], key=lambda p: p["metadata"]["name"] not in first):
        created = api.create(applied(p))
        pods[p["metadata"]["name"]] = created
        claims_from_templates(api, created, controller=plane.controller_manager is not None)
        if p["spec"].get("nodeName"):
            # A pod already running: its claims allocated and reserved for it (the example's
            # allocation, with the pod's real uid), as the scheduler and kubelet left them.
            for ref in p["spec"].get("resourceClaims") or []:
                example = claims[ref["resourceClaimName"]]
                live = api.get("ResourceClaim", ref["resourceClaimName"], "default")
                assert live is not None
                live["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
                live = api.update(live)
                live["status"] = {
                    "allocation": example["status"]["allocation"],
                    "reservedFor": [
                        {"resource": "pods", "name": p["metadata"]["name"], "uid": created["metadata"]["uid"]}
                    ],
                }
                api.update(live, subresource="status")
    return pods
