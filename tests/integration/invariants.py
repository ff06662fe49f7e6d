"""What the cluster's own store must look like after any sequence of binds and faults.

Read from the fake API server's objects (not the extender's view):
(a) no device is allocated to two claims other than through admin access (which takes nothing),
    unless the device allows multiple allocations (then each share has its own shareID);
(b) every bound pod's claims are allocated, reserved for it (or for its PodGroup), and on its node;
(c) no claim is reserved for a pod that is not bound (except those the caller allows); a PodGroup
    reservation is not a pod's;
(d) no claim is reserved without an allocation;
(e) a bound pod's extended-resource claim (``status.extendedResourceClaimStatus``) is held to
    (b) too, and no pod owns more than one extended-resource claim.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from tests.fakeapi.server import FakeApiServer

Objects = dict[str, list[dict[str, Any]]]
"""The store's objects by resource: ``resourceclaims``, ``pods``, ``resourceslices``."""


DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


def _objects(fake: FakeApiServer) -> Objects:
    with fake.store.cond:
        out: Objects = {"resourceclaims": [], "pods": [], "resourceslices": []}
        for (resource, _, _), obj in fake.store.objects.items():
            if resource in out:
                out[resource].append(obj)
        return out


def _multi_allocatable(objects: Objects) -> set[tuple[str, str, str]]:
    out = set()
    for s in objects["resourceslices"]:
        spec = s.get("spec") or {}
        for d in spec.get("devices") or []:
            if d.get("allowMultipleAllocations"):
                out.add(
                    (str(spec.get("driver")), str((spec.get("pool") or {}).get("name")), str(d.get("name")))
                )
    return out


def _selector_admits(selector: dict[str, Any] | None, node: str) -> bool:
    if not selector:
        return True
    for term in selector.get("nodeSelectorTerms") or []:
        fields = term.get("matchFields") or []
        if all(
            f.get("key") == "metadata.name" and f.get("operator") == "In" and node in f.get("values", [])
            for f in fields
        ):
            return True
    return False


def pod_claim_names(pod: dict[str, Any]) -> list[str]:
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = ref.get("resourceClaimName") or statuses.get(ref.get("name"))
        if name:
            names.append(name)
    extended = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        names.append(extended)
    return names


def protecting_nothing(fake: FakeApiServer) -> list[str]:
    """Claims with the delete-protection finalizer that are not allocated and reserved for
    nobody: what a bind deposed between its two writes leaves (the leader removes it)."""
    out = []
    for c in _objects(fake)["resourceclaims"]:
        status = c.get("status") or {}
        finalizers = c["metadata"].get("finalizers") or []
        if DELETE_PROTECTION in finalizers and not status.get("allocation") and not status.get("reservedFor"):
            out.append(f"{c['metadata']['namespace']}/{c['metadata']['name']}")
    return out


def violations(fake: FakeApiServer, *, allow_unbound: set[str] | None = None) -> list[str]:
    """The invariants on the fake API server's store."""
    return check(_objects(fake), allow_unbound=allow_unbound)


def check(objects: Objects, *, allow_unbound: set[str] | None = None) -> list[str]:
    """The invariants on any store's objects (the fake's, or a real API server's lists)."""
    problems: list[str] = []
    claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in objects["resourceclaims"]}
    pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in objects["pods"]}
    multi = _multi_allocatable(objects)
    holders: dict[tuple[str, str, str], list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for (ns, name), c in claims.items():
        status = c.get("status") or {}
        allocation = status.get("allocation")
        if status.get("reservedFor") and not allocation:
            problems.append(f"claim {ns}/{name} is reserved without an allocation")
        for r in ((allocation or {}).get("devices") or {}).get("results") or []:
            holders[(r["driver"], r["pool"], r["device"])].append((f"{ns}/{name}", r))
    for device, held in holders.items():
        # Admin access takes nothing: such results may share a device with one ordinary holder
        # (upstream's allocator skips adminAccess results when it counts devices in use).
        ordinary = [(c, r) for c, r in held if not r.get("adminAccess")]
        if len(ordinary) < 2:
            continue
        shares = [r.get("shareID") for _, r in ordinary]
        if device in multi and all(shares) and len(set(shares)) == len(shares):
            continue
        problems.append(f"device {'/'.join(device)} is allocated to {', '.join(c for c, _ in ordinary)}")
    bound_uids = {}
    for (ns, name), p in pods.items():
        node = (p.get("spec") or {}).get("nodeName")
        if not node:
            continue
        uid = p["metadata"].get("uid")
        bound_uids[uid] = f"{ns}/{name}"
        for claim_name in pod_claim_names(p):
            found = claims.get((ns, claim_name))
            status = (found or {}).get("status") or {}
            where = f"bound pod {ns}/{name} on {node}: claim {claim_name}"
            if found is None:
                problems.append(f"{where} does not exist")
            elif not status.get("allocation"):
                problems.append(f"{where} is not allocated")
            elif not any(_reserves(e, uid, p) for e in status.get("reservedFor") or []):
                problems.append(f"{where} is not reserved for it")
            elif not _selector_admits(status["allocation"].get("nodeSelector"), node):
                problems.append(f"{where} is allocated to devices of another node")
    owned: dict[str, list[str]] = defaultdict(list)
    for (ns, name), c in claims.items():
        meta = c["metadata"]
        if (meta.get("annotations") or {}).get("resource.kubernetes.io/extended-resource-claim") == "true":
            for ref in meta.get("ownerReferences") or []:
                if ref.get("controller"):
                    owned[ref.get("uid")].append(f"{ns}/{name}")
    for uid, names in owned.items():
        if len(names) > 1:
            problems.append(f"pod {uid} owns several extended-resource claims: {', '.join(sorted(names))}")
    allowed = allow_unbound or set()
    pod_names = {p["metadata"].get("uid"): n for n, p in pods.items()}
    for (ns, name), c in claims.items():
        for entry in (c.get("status") or {}).get("reservedFor") or []:
            uid = entry.get("uid")
            if uid in bound_uids or entry.get("resource") == "podgroups":
                continue
            pod_key = pod_names.get(uid)
            if pod_key is not None and pod_key[1] in allowed:
                continue
            problems.append(
                f"claim {ns}/{name} is reserved for {entry.get('name')} ({uid}), which is not bound"
            )
    return problems


def _reserves(entry: dict[str, Any], uid: str, pod: dict[str, Any]) -> bool:
    """The reservedFor entry is the pod's, or its PodGroup's (DRAWorkloadResourceClaims)."""
    if entry.get("uid") == uid:
        return True
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    return (
        group is not None
        and entry.get("apiGroup") == "scheduling.k8s.io"
        and entry.get("resource") == "podgroups"
        and entry.get("name") == group
    )
