"""The driver catalogue (examples/drivers/<driver>/, issue 53) on the real control plane: each demo pod
scheduled by kube-scheduler with the in-tree DynamicResources plugin, then by kube-scheduler with the
extender, on the same state; the same pods bound, the same devices where the choice is forced, and the
extender's answer the one the simulate case tables (tests/examples/driver_cases/) give.

How a state file becomes objects of a real API server:

* Nodes are registered as a kubelet would (:meth:`ControlPlane.add_node`: status through the status
  subresource, Ready, the not-ready taint gone), with the state's labels and allocatable.
* Pods that the state shows running (``spec.nodeName``) are created bound, with their claims; the claims
  the state shows allocated get their allocation and a reservation for the real pod's uid (the state's
  uids are its own), finalizer first, as a bind writes them. A bound pod's template claim is the one the
  resourceclaim controller made for it (the state's pre-generated claim says which allocation it holds).
* Every pending demo pod is decided alone on that base state, as the case tables decide it (each table
  row is ``simulate --pod`` on the state): its claims are created, the pod is created with a scheduling
  gate, the claims of its template entries are made (the real resourceclaim controller when
  kube-controller-manager runs, else :func:`claims_from_templates` as it would), the gate is removed, and
  once the pod is bound or reported unschedulable, the pod and its claims are removed again. Pods that
  share a named claim are decided together (the second joins the first's allocation). The state's
  pre-generated claims of pending pods (``ownerReferences`` to a pod) and their
  ``status.resourceClaimStatuses`` are not created: a pod's status cannot be written on create, and the
  real controller (or its stand-in) makes them from the templates.

Both runs share one base state per driver and the session's control plane; the schedulers run without
leader election (nothing to wait for between the two).
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from extender.allocator.releases import release_of
from tests.examples.driver_cases import collect
from tests.realcluster.api import Api, ApiError
from tests.realcluster.components import SCHEDULER_NAME, extender, scheduler, scheduler_config
from tests.realcluster.conftest import TEST_NAMESPACES
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import claims_from_templates, remove
from tests.shared import REPO

DRIVERS = REPO / "examples" / "drivers"
GATE = "dra-extender.test/catalogue"
PROTECTION = "resource.kubernetes.io/delete-protection"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"

#: What a driver's state needs beyond what every supported release has (on by default in 1.36, the
#: reference release; releases.py turns them on for older ones where it can).
NEEDS: dict[str, tuple[str, ...]] = {
    "cpu": ("DRAConsumableCapacity",),  # allowMultipleAllocations, capacity requests, shareIDs
    "nvidia-mig": ("DRAPartitionableDevices",),  # sharedCounters / consumesCounters
    "dranet": ("DRAExtendedResource",),  # nvidia.com/gpu through the class's extendedResourceName
}
#: Demo pods the tables say fit whose node a plugin other than DynamicResources refuses: the tables
#: decide devices only. cpu-grouped-node has 30 allocatable CPUs; app-a, app-b and app-c (bound there)
#: request 16 of them; pod-with-pod-level-resources asks for 16 at pod level (NodeResourcesFit).
NOT_DEVICES = {("cpu", "pod-level-resources/pod-with-pod-level-resources"): "Insufficient cpu"}

#: Demo pods an older release's in-tree allocator refuses because of a bug fixed since, which the
#: extender's allocator has fixed in every release (docs/fidelity.md): (driver, pod) -> (the fix,
#: the first release with it, what the in-tree plugin says before it).
FIXED_SINCE: dict[tuple[str, str], tuple[str, tuple[int, int, int], str]] = {
    # v1.35.6 staging/src/k8s.io/dynamic-resource-allocation/structured/internal/experimental/
    # allocator_experimental.go, allocateDevice: checkAvailableCounters charges the device's
    # counters, and a candidate the matchAttribute constraint (parentUUID) then rejects returns
    # without giving them back; gpu-1's partitions tried while the first request held gpu-0's
    # leave gpu-1's counters charged, so gpu-1 fits nothing when the search comes to it.
    ("nvidia-mig", "gpu-test4/pod-0"): ("kubernetes#140431", (1, 36, 3), "cannot allocate all claims"),
}

FITS, FITS_NOWHERE = collect()
#: (state, "namespace/pod") -> {node: {request: devices}} where it fits; {} where it fits nowhere.
TABLES: dict[tuple[str, str], dict[str, dict[str, list[str]]]] = {
    **{(c[1], c[2]): c[3] for c in FITS},
    **{(c[1], c[2]): {} for c in FITS_NOWHERE},
}


def load(driver: str) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name in ("cluster.yaml", "claims.yaml"):
        docs += [d for d in yaml.safe_load_all((DRIVERS / driver / name).read_text()) if d]
    for d in docs:
        if d["kind"] in ("Pod", "ResourceClaim", "ResourceClaimTemplate"):
            d["metadata"].setdefault("namespace", "default")
    return docs


def key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


def as_applied(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a user applies it: no uid, status or owners (the state's are its own)."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    for field_name in ("uid", "ownerReferences", "resourceVersion", "creationTimestamp"):
        out["metadata"].pop(field_name, None)
    return out


def gate_problem(plane: ControlPlane, driver: str) -> str | None:
    """Why ``driver``'s state cannot be decided here (None: it can): a gate the binaries' release
    lacks, or has off and the suite does not turn on."""
    release = release_of(plane.release.minor)
    on = dict(p.split("=", 1) for p in plane.component_gates().split(",") if p)
    for gate in NEEDS.get(driver, ()):
        if gate not in release.gates:
            return f"{driver} needs {gate}, which release {plane.release.name} lacks"
        if on.get(gate, str(release.gates[gate].default).lower()) != "true":
            return f"{driver} needs {gate}, which is off in release {plane.release.name}"
    return None


@dataclass
class Decision:
    node: str | None
    #: request -> sorted driver/pool/device, over the pod's claims (named, template, extended resource).
    devices: dict[str, list[str]]
    message: str = ""


@dataclass
class State:
    driver: str
    docs: list[dict[str, Any]]
    namespaces: set[str] = field(default_factory=set)
    #: Claims of the base state (bound pods'), kept across the pending pods' runs.
    base_claims: set[str] = field(default_factory=set)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    @property
    def bound_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.of("Pod") if p["spec"].get("nodeName")]

    @property
    def pending_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.of("Pod") if not p["spec"].get("nodeName")]

    def named_claims(self, pod: dict[str, Any]) -> list[str]:
        ns = pod["metadata"]["namespace"]
        return [
            f"{ns}/{r['resourceClaimName']}"
            for r in pod["spec"].get("resourceClaims") or []
            if r.get("resourceClaimName")
        ]

    def claim(self, name: str) -> dict[str, Any]:
        (found,) = [c for c in self.of("ResourceClaim") if key(c) == name]
        return found

    def groups(self) -> list[list[dict[str, Any]]]:
        """The pending pods, those sharing a named claim together, in the state's order."""
        groups: list[list[dict[str, Any]]] = []
        for pod in self.pending_pods:
            mine = set(self.named_claims(pod))
            joined = [g for g in groups if mine & {c for p in g for c in self.named_claims(p)}]
            for g in joined:
                groups.remove(g)
            groups.append([p for g in joined for p in g] + [pod])
        return groups


def add_namespace(plane: ControlPlane, name: str) -> None:
    with contextlib.suppress(ApiError):  # kept for the session: no namespace controller removes them
        plane.add_namespace(name)


def wait_claim_statuses(api: Api, pod: dict[str, Any]) -> dict[str, Any]:
    """The pod once every template entry has its claim in ``status.resourceClaimStatuses``."""
    meta = pod["metadata"]
    entries = {
        r["name"] for r in pod["spec"].get("resourceClaims") or [] if r.get("resourceClaimTemplateName")
    }

    def ready() -> dict[str, Any] | None:
        current = api.get("Pod", meta["name"], meta["namespace"])
        assert current is not None
        named = {s["name"] for s in (current.get("status") or {}).get("resourceClaimStatuses") or []}
        return current if entries <= named else None

    return dict(api.wait_for(ready, timeout=30, what=f"claims of {key(pod)} made from its templates"))


def create_pod(plane: ControlPlane, pod: dict[str, Any], *, gated: bool) -> dict[str, Any]:
    body = as_applied(pod)
    spec = body["spec"]
    spec["terminationGracePeriodSeconds"] = 0
    if not spec.get("nodeName"):
        spec["schedulerName"] = SCHEDULER_NAME
    if gated:
        spec["schedulingGates"] = [{"name": GATE}]
    created = plane.api.create(body)
    claims_from_templates(plane.api, created, controller=plane.controller_manager is not None)
    return wait_claim_statuses(plane.api, created)


def allocate(api: Api, name: str, namespace: str, status: dict[str, Any], uids: dict[str, str]) -> None:
    """The state's allocation of claim ``name`` and its reservations, for the real pods' uids."""
    claim = api.get("ResourceClaim", name, namespace)
    assert claim is not None, f"{namespace}/{name}"
    claim["metadata"]["finalizers"] = [PROTECTION]
    claim = api.update(claim)
    claim["status"] = {
        "allocation": status["allocation"],
        "reservedFor": [
            {"resource": r["resource"], "name": r["name"], "uid": uids[f"{namespace}/{r['name']}"]}
            for r in status.get("reservedFor") or []
        ],
    }
    api.update(claim, subresource="status")


def template_entry(state: State, claim: dict[str, Any]) -> str:
    """The pod entry a pre-generated claim of the state was made for: its annotation, or the entry
    its owner's ``status.resourceClaimStatuses`` names it for."""
    meta = claim["metadata"]
    if POD_CLAIM_NAME in (meta.get("annotations") or {}):
        return str(meta["annotations"][POD_CLAIM_NAME])
    owner = f"{meta['namespace']}/{meta['ownerReferences'][0]['name']}"
    (pod,) = [p for p in state.of("Pod") if key(p) == owner]
    (entry,) = [
        s["name"]
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if s.get("resourceClaimName") == meta["name"]
    ]
    return str(entry)


def create_base(plane: ControlPlane, state: State) -> None:
    """Nodes, classes, slices, templates; the bound pods, their claims allocated as the state says."""
    api = plane.api
    for node in state.of("Node"):
        allocatable = dict((node.get("status") or {}).get("allocatable") or {})
        assert not (node.get("spec") or {}).get("taints"), node["metadata"]["name"]
        plane.add_node(
            node["metadata"]["name"],
            labels=node["metadata"].get("labels"),
            cpu=str(allocatable.pop("cpu", "64")),
            memory=str(allocatable.pop("memory", "256Gi")),
            pods=str(allocatable.pop("pods", "110")),
            extra={k: str(v) for k, v in allocatable.items()},
        )
    state.namespaces = {d["metadata"]["namespace"] for d in state.docs if d["metadata"].get("namespace")}
    for ns in sorted(state.namespaces - {"default"}):
        add_namespace(plane, ns)
    for kind in ("DeviceClass", "ResourceSlice", "ResourceClaimTemplate"):
        for obj in state.of(kind):
            api.create(as_applied(obj))
    bound = state.bound_pods
    named = {c for p in bound for c in state.named_claims(p)}
    for name in sorted(named):
        api.create(as_applied(state.claim(name)))
    made = [create_pod(plane, p, gated=False) for p in bound]
    uids = {key(p): p["metadata"]["uid"] for p in made}
    generated = {
        (key(p), s["name"]): s["resourceClaimName"]
        for p in made
        for s in (p.get("status") or {}).get("resourceClaimStatuses") or []
    }
    state.base_claims = set(named) | {f"{ns_name.split('/')[0]}/{c}" for (ns_name, _), c in generated.items()}
    for claim in state.of("ResourceClaim"):
        if not claim.get("status"):
            continue
        ns = claim["metadata"]["namespace"]
        owners = claim["metadata"].get("ownerReferences") or []
        if owners:  # a template's claim: the one made for the real pod
            entry = template_entry(state, claim)
            name = generated[(f"{ns}/{owners[0]['name']}", entry)]
        else:
            name = claim["metadata"]["name"]
            assert key(claim) in named, f"{key(claim)} is allocated, but no bound pod uses it"
        allocate(api, name, ns, claim["status"], uids)


def claims_of(api: Api, pod: dict[str, Any]) -> list[str]:
    ns = pod["metadata"]["namespace"]
    status = pod.get("status") or {}
    names = [
        r["resourceClaimName"] for r in pod["spec"].get("resourceClaims") or [] if r.get("resourceClaimName")
    ]
    names += [
        s["resourceClaimName"]
        for s in status.get("resourceClaimStatuses") or []
        if s.get("resourceClaimName")
    ]
    extended = (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if extended:
        names.append(extended)
    return [f"{ns}/{n}" for n in names]


#: What kube-scheduler writes on PodScheduled=False once it found no node: none fits (Unschedulable),
#: or deciding failed (SchedulerError: a CEL runtime error of a selector, say, which the extender too
#: reports as an error).
NOT_SCHEDULED = ("Unschedulable", "SchedulerError")


def unschedulable(pod: dict[str, Any]) -> str | None:
    """The PodScheduled=False reason and message once kube-scheduler found no node (not while it waits
    for a claim it has not seen yet, or for the allocation of a claim another pod of the group shares)."""
    for c in (pod.get("status") or {}).get("conditions") or []:
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") in NOT_SCHEDULED
        ):
            message = str(c.get("message", ""))
            lowered = message.lower()
            if (
                "waiting for" in lowered
                or ("resourceclaim" in lowered and "not found" in lowered)
                # A claim another pod of the group is being allocated (it shares it): retried once the
                # allocation is written.
                or "in the process of being allocated" in lowered
            ):
                return None
            return f"{c['reason']}: {message}"
    return None


def decide(plane: ControlPlane, state: State, group: list[dict[str, Any]]) -> dict[str, Decision]:
    """One group of pending pods on the base state: created, decided, recorded, removed."""
    api = plane.api
    names = sorted({c for p in group for c in state.named_claims(p)})
    for name in names:
        api.create(as_applied(state.claim(name)))
    made = [create_pod(plane, p, gated=True) for p in group]
    for p in made:
        api.patch(
            "Pod", p["metadata"]["name"], p["metadata"]["namespace"], {"spec": {"schedulingGates": None}}
        )

    def outcome() -> list[dict[str, Any]] | None:
        pods = [api.get("Pod", p["metadata"]["name"], p["metadata"]["namespace"]) for p in made]
        if all(p is not None and (p["spec"].get("nodeName") or unschedulable(p)) for p in pods):
            return [p for p in pods if p is not None]
        return None

    def conditions() -> str:
        return repr(
            [
                (p.get("status") or {}).get("conditions")
                for p in (api.get("Pod", m["metadata"]["name"], m["metadata"]["namespace"]) for m in made)
                if p is not None
            ]
        )

    try:
        try:
            pods = api.wait_for(outcome, timeout=45, what=f"{[key(p) for p in made]} decided")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; their conditions: {conditions()}") from None
        decided: dict[str, Decision] = {}
        for pod in pods:
            devices: dict[str, list[str]] = {}
            if pod["spec"].get("nodeName"):
                for name in claims_of(api, pod):
                    ns, _, claim_name = name.partition("/")
                    claim = api.get("ResourceClaim", claim_name, ns) or {}
                    allocation = (claim.get("status") or {}).get("allocation") or {}
                    for r in (allocation.get("devices") or {}).get("results") or []:
                        devices.setdefault(r["request"], []).append(
                            f"{r['driver']}/{r['pool']}/{r['device']}"
                        )
            decided[key(pod)] = Decision(
                pod["spec"].get("nodeName"),
                {r: sorted(d) for r, d in devices.items()},
                unschedulable(pod) or "",
            )
        return decided
    finally:
        clear(api, state, {p["metadata"]["namespace"] for p in group}, [key(p) for p in made])


def clear(api: Api, state: State, namespaces: set[str], pods: list[str]) -> None:
    """The group's pods, and every claim of their namespaces the base state does not hold."""
    for name in pods:
        ns, _, pod = name.partition("/")
        api.delete("Pod", pod, ns)
    for ns in sorted(namespaces):
        for claim in api.list("ResourceClaim", ns):
            if key(claim) in state.base_claims:
                continue
            if claim["metadata"].get("finalizers"):
                with contextlib.suppress(ApiError):
                    api.patch(
                        "ResourceClaim", claim["metadata"]["name"], ns, {"metadata": {"finalizers": None}}
                    )
            api.delete("ResourceClaim", claim["metadata"]["name"], ns)

    def gone() -> bool:
        left = [key(p) for ns in namespaces for p in api.list("Pod", ns)]
        claims = [key(c) for ns in namespaces for c in api.list("ResourceClaim", ns)]
        return not (set(left) & set(pods)) and set(claims) <= state.base_claims

    api.wait_for(gone, what=f"{pods} and their claims removed")
    # The schedulers' informers see the removals before the next pod arrives (a watch event away).
    time.sleep(0.2)


def run(plane: ControlPlane, state: State, *, with_extender: bool) -> dict[str, Decision]:
    kubeconfig = plane.extender_kubeconfig()
    decided: dict[str, Decision] = {}
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(extender(plane)).url if with_extender else None
        stack.enter_context(
            scheduler(plane, scheduler_config(kubeconfig, extender_url=url, leader_elect=False))
        )
        for group in state.groups():
            decided.update(decide(plane, state, group))
    return decided


def on_node(devices: list[str], node: str) -> list[str]:
    """``devices`` with the node's pool written ``<node>``: the same choice on another node."""
    return sorted(d.replace(f"/{node}/", "/<node>/") for d in devices)


def forced(fits: dict[str, dict[str, list[str]]]) -> bool:
    """One node fits, or every node that fits gives the same devices (its own)."""
    choices = {
        repr(sorted((r, on_node(d, node)) for r, d in per_request.items()))
        for node, per_request in fits.items()
    }
    return len(choices) == 1


def disagreements(
    driver: str, in_tree: dict[str, Decision], ours: dict[str, Decision], version: tuple[int, int, int]
) -> list[str]:
    """``version``: the binaries' (a release older than a fix in :data:`FIXED_SINCE` refuses)."""
    out: list[str] = []

    def said(d: Decision) -> str:
        return f"bound to {d.node}, devices {d.devices}" if d.node else f"unschedulable: {d.message}"

    for pod in sorted(in_tree):
        a, b = in_tree[pod], ours[pod]
        fits = TABLES[(driver, pod)]
        fixed = FIXED_SINCE.get((driver, pod))
        if fixed is not None and version < fixed[1]:
            if a.node or fixed[2] not in a.message:
                out.append(
                    f"{driver} {pod}: before {fixed[0]} in-tree refuses ({fixed[2]}); in-tree {said(a)}"
                )
        elif (a.node is None) != (b.node is None):
            out.append(f"{driver} {pod}: in-tree {said(a)}; extender {said(b)}")
            continue
        if a.node and b.node and a.node == b.node and a.devices != b.devices:
            # Given the node, the allocator's choice is its own: the same node, the same devices.
            out.append(f"{driver} {pod}: in-tree {said(a)}; extender {said(b)}")
        elif a.node and b.node and forced(fits):
            mine = {r: on_node(d, b.node) for r, d in b.devices.items()}
            theirs = {r: on_node(d, a.node) for r, d in a.devices.items()}
            if mine != theirs:
                out.append(f"{driver} {pod}: in-tree {said(a)}; extender {said(b)}")
        # The extender's answer against the case tables.
        refused_by = NOT_DEVICES.get((driver, pod))
        if refused_by is not None:
            if b.node or refused_by not in b.message:
                out.append(f"{driver} {pod}: expected refused ({refused_by}); extender {said(b)}")
        elif not fits:
            if b.node:
                out.append(f"{driver} {pod}: the table says it fits nowhere; extender {said(b)}")
        elif b.node not in fits:
            out.append(f"{driver} {pod}: the table says it fits on {sorted(fits)}; extender {said(b)}")
        elif b.devices != {r: sorted(d) for r, d in fits[b.node].items()}:
            out.append(f"{driver} {pod}: the table gives {fits[b.node]} on {b.node}; extender {said(b)}")
    return out


@pytest.fixture
def catalogue(cluster: ControlPlane) -> Iterator[ControlPlane]:
    """The session's plane; the driver namespaces emptied afterwards too (the cluster fixture empties
    the suite's own namespaces and the cluster-scoped kinds)."""
    yield cluster
    namespaces = {
        d["metadata"]["namespace"]
        for p in DRIVERS.iterdir()
        if p.is_dir()
        for d in load(p.name)
        if d["metadata"].get("namespace")
    }
    existing = {n["metadata"]["name"] for n in cluster.api.list("Namespace")}
    remove(
        cluster.api,
        ("Pod", "ResourceClaim", "ResourceClaimTemplate", "Event"),
        tuple(sorted((namespaces & existing) - set(TEST_NAMESPACES))),
    )


#: About 8 s each on two cores (two kube-schedulers, one extender, a handful of pods), ~85 s for the
#: module with the control plane's start: not ``slow``.
@pytest.mark.parametrize("driver", sorted(p.name for p in DRIVERS.iterdir() if p.is_dir()))
def test_a_driver_demo_is_decided_as_the_in_tree_plugin_decides_it(
    catalogue: ControlPlane, driver: str
) -> None:
    problem = gate_problem(catalogue, driver)
    if problem is not None:
        pytest.skip(problem)
    state = State(driver, load(driver))
    assert {(driver, key(p)) for p in state.pending_pods} <= set(TABLES), "a pending pod without a table row"
    create_base(catalogue, state)
    in_tree = run(catalogue, state, with_extender=False)
    ours = run(catalogue, state, with_extender=True)
    assert set(in_tree) == set(ours) == {key(p) for p in state.pending_pods}
    assert disagreements(driver, in_tree, ours, catalogue.binaries.version) == []


def test_the_tables_cover_every_driver() -> None:
    """Every catalogue state has table rows (a driver added without them would be compared on nothing)."""
    assert {state for state, _ in TABLES} == {p.name for p in DRIVERS.iterdir() if p.is_dir()}
