"""A fragmented GPU cluster on the real control plane, for the make-room mover (issue 52).

Nodes of 8 GPUs each, published as the other real-control-plane tests publish them (one
ResourceSlice per node) with a ``resource.kubernetes.io/pcieRoot`` attribute: two roots of four
GPUs, ``pci0`` the even GPUs and ``pci1`` the odd ones, so that one-GPU pods (which take the first
free device, in the slice's order) land on both roots. On each node, one-GPU pods, each with a
claim from the ResourceClaimTemplate ``one-gpu``, placed by the real kube-scheduler through the
extender; each node's share is the ReplicaSets (or bare pods) of its :class:`NodeShare`:

- ``movable``: pods of a ReplicaSet (``n<i>-app``), priority 0: what a plan may move;
- ``guarded``: pods of a ReplicaSet under the PodDisruptionBudget ``zero`` (maxUnavailable 0):
  the Eviction API refuses them, so they never move;
- ``high``: a ReplicaSet's pods of priority 1000, above the targets': never moved for them;
- ``bare``: pods no controller owns (nothing would recreate them): never moved.

Each pod goes to its node because only that node's build taint is tolerated by it (every node
carries ``fragmented.test/node=<node>:NoSchedule`` while the cluster is built, then the taints
are removed): the pods keep a toleration of a taint no node has any more, and nothing pins them,
so a replacement may go anywhere. The pods that never move are placed first (they take GPUs 0
and 1: both roots), then the rest.

Then the targets (:func:`add_targets`): ``big`` wants 8 GPUs (a whole node), ``pcie`` 4 under one
PCIe root (a ``matchAttribute`` constraint). Neither fits anywhere until pods move.

What the runs check on it is in tests/realcluster/mover_checks.py.
"""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tests import builders as b
from tests.realcluster.api import Api
from tests.realcluster.components import SCHEDULER_NAME
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import GPU_CLASS, GPU_DRIVER, PAUSE, applied, gpu_class

NAMESPACE = "default"
GPUS = 8
PCIE = "resource.kubernetes.io/pcieRoot"
BUILD_TAINT = "fragmented.test/node"
ROLE = "fragmented.test/role"
TEMPLATE = "one-gpu"
#: The PodDisruptionBudget of the ``guarded`` pods: no disruption allowed.
ZERO_BUDGET = "zero"
#: The budget of :attr:`Fragmented.shared_budget`, and the label it selects.
SHARED_BUDGET = "shared"
SHARED = {"fragmented.test/budget": SHARED_BUDGET}
HIGH = "high"
HIGH_PRIORITY = 1000
ROLES = ("movable", "guarded", "high", "bare")
#: The roles whose pods never move: placed first, on GPUs 0 and 1.
ANCHORS = ("guarded", "high")
TARGETS = ("big", "pcie")


@dataclass(frozen=True)
class NodeShare:
    """The one-GPU pods one node gets, by role (module docstring)."""

    movable: int = 0
    guarded: int = 0
    high: int = 0
    bare: int = 0

    def count(self, role: str) -> int:
        return int(getattr(self, role))

    @property
    def pods(self) -> int:
        return sum(self.count(r) for r in ROLES)


def node_name(i: int) -> str:
    return f"node-{i:02d}"


#: The suite's cluster: 4 nodes x 8 GPUs, 15 pods. node-00 and node-01 hold only 3 movable pods
#: each (either can be freed for ``big``, moving 3; one move frees a root of either for ``pcie``);
#: node-02's guarded pods hold a GPU of each root; node-03's high-priority pod holds GPU 0 (pci0),
#: so ``pcie`` could use its pci1 by moving 2 pods, ``big`` not at all.
SMALL = (
    NodeShare(movable=3),
    NodeShare(movable=3),
    NodeShare(movable=2, guarded=2, bare=1),
    NodeShare(movable=3, high=1),
)


def random_layout(nodes: int, seed: int = 52) -> tuple[NodeShare, ...]:
    """``nodes`` nodes of 3 to 5 one-GPU pods each: the first two movable only (3 pods each: the
    nodes ``big`` may have), then one in four nodes with two guarded pods, one in four with a
    high-priority pod, one in eight with a bare pod, the rest movable."""
    rng = random.Random(seed)
    out = [NodeShare(movable=3), NodeShare(movable=3)]
    for i in range(2, nodes):
        total = rng.randint(3, 5)
        guarded = 2 if i % 4 == 2 else 0
        high = 1 if i % 4 == 3 else 0
        bare = 1 if i % 8 == 5 else 0
        out.append(NodeShare(movable=total - guarded - high - bare, guarded=guarded, high=high, bare=bare))
    return tuple(out)


def gpu_slice(node: str) -> dict[str, Any]:
    devices = [
        b.device(
            f"gpu-{i}",
            attributes={
                "index": {"int": i},
                "model": {"string": "a100"},
                PCIE: {"string": f"pci{i % 2}"},
            },
            capacity={"memory": "80Gi"},
        )
        for i in range(GPUS)
    ]
    return applied(b.resource_slice(f"{node}-gpus", devices, driver=GPU_DRIVER, pool=node, node=node))


def pod_spec(node: str, *, priority_class: str | None = None, grace: int = 1) -> dict[str, Any]:
    """A one-GPU pod's spec that tolerates ``node``'s build taint (and no other node's)."""
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        # Eviction deletes gracefully: the test kubelet ends Terminating pods after 0.5 s.
        "terminationGracePeriodSeconds": grace,
        "containers": [{"name": "main", "image": PAUSE}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
        "tolerations": [{"key": BUILD_TAINT, "operator": "Equal", "value": node, "effect": "NoSchedule"}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def replica_set(
    name: str, node: str, role: str, replicas: int, extra_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    labels = {"app": name, ROLE: role, **(extra_labels or {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": pod_spec(node, priority_class=HIGH if role == "high" else None),
            },
        },
    }


def bare_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {ROLE: "bare"}},
        "spec": pod_spec(node),
    }


def budget(name: str, selector: dict[str, str], *, max_unavailable: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": selector}},
    }


@dataclass
class Fragmented:
    """The cluster of ``layout`` (one :class:`NodeShare` per node) on ``plane``."""

    plane: ControlPlane
    layout: tuple[NodeShare, ...] = SMALL
    #: maxUnavailable of the budget ``shared`` over the movable pods of nodes 0 and 1 (the nodes
    #: ``big`` may have); None: no such budget.
    shared_budget: int | None = None
    #: Workload objects made here (kind, name).
    made: list[tuple[str, str]] = field(default_factory=list)
    #: When :meth:`build` returned (time.monotonic).
    built_at: float = field(default=0.0, init=False)
    #: The roles placed so far.
    _placed: list[str] = field(default_factory=list, init=False)

    @property
    def api(self) -> Api:
        return self.plane.api

    @property
    def nodes(self) -> list[str]:
        return [node_name(i) for i in range(len(self.layout))]

    def expected_pods(self) -> int:
        return sum(share.pods for share in self.layout)

    # -- building --------------------------------------------------------------------------------

    def build(self, timeout: float = 120.0) -> None:
        """Everything of the module docstring but the targets; returns once every pod is bound
        and running, the build taints are gone and the budgets' status counts the pods."""
        api = self.api
        api.create(gpu_class())
        api.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": HIGH},
                "value": HIGH_PRIORITY,
            }
        )
        api.create(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": TEMPLATE, "namespace": NAMESPACE},
                "spec": {"spec": applied(b.claim("x", [b.exact("gpu", GPU_CLASS, 1)]))["spec"]},
            }
        )
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(self._add_node, self.nodes))
        if any(share.guarded for share in self.layout):
            self._create(budget(ZERO_BUDGET, {ROLE: "guarded"}, max_unavailable=0))
        if self.shared_budget is not None:
            self._create(budget(SHARED_BUDGET, SHARED, max_unavailable=self.shared_budget))
        # The pods that never move first: GPUs 0 and 1 (one on each root).
        self._place(ANCHORS, timeout)
        self._place(("movable", "bare"), timeout)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(self._untaint, self.nodes))
        api.wait_for(self._budgets_settled, timeout=timeout, what="the budgets' status counting every pod")
        self.built_at = time.monotonic()

    def wait_older_than(self, seconds: float) -> None:
        """Until every pod built is older than ``seconds`` (status.startTime has whole seconds)."""
        time.sleep(max(0.0, self.built_at + seconds + 1.0 - time.monotonic()))

    def _add_node(self, node: str) -> None:
        self.plane.add_node(node)
        self.api.patch(
            "Node",
            node,
            None,
            {"spec": {"taints": [{"key": BUILD_TAINT, "value": node, "effect": "NoSchedule"}]}},
        )
        self.api.create(gpu_slice(node))

    def _untaint(self, node: str) -> None:
        current = self.api.get("Node", node)
        assert current is not None
        taints = [t for t in current["spec"].get("taints") or [] if t["key"] != BUILD_TAINT]
        self.api.patch("Node", node, None, {"spec": {"taints": taints or None}})

    def _create(self, obj: dict[str, Any]) -> None:
        self.api.create(obj)
        self.made.append((obj["kind"], obj["metadata"]["name"]))

    def _place(self, roles: Iterable[str], timeout: float) -> None:
        objects = []
        for i, share in enumerate(self.layout):
            node = node_name(i)
            for role in roles:
                count = share.count(role)
                if not count:
                    continue
                if role == "bare":
                    objects += [bare_pod(f"n{i:02d}-bare-{k}", node) for k in range(count)]
                else:
                    extra = SHARED if role == "movable" and i < 2 and self.shared_budget is not None else {}
                    objects.append(replica_set(f"n{i:02d}-{role}", node, role, count, extra))
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(self._create, objects))
        want = {
            node_name(i): sum(share.count(r) for r in roles) + sum(share.count(r) for r in self._placed)
            for i, share in enumerate(self.layout)
        }
        self._placed.extend(roles)

        def placed() -> bool:
            running = Counter(
                p["spec"]["nodeName"]
                for p in self.api.list("Pod", NAMESPACE)
                if p["spec"].get("nodeName")
                and (p.get("status") or {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")
            )
            return all(running[node] == count for node, count in want.items())

        self.api.wait_for(placed, timeout=timeout, what=f"the {'/'.join(roles)} pods running on their nodes")
        wrong = {
            p["metadata"]["name"]: p["spec"].get("nodeName")
            for p in self.api.list("Pod", NAMESPACE)
            if p["spec"].get("nodeName") != p["spec"]["tolerations"][0]["value"]
            and any(t.get("key") == BUILD_TAINT for t in p["spec"].get("tolerations") or [])
        }
        assert not wrong, wrong

    def _budgets_settled(self) -> bool:
        for pdb in self.api.list("PodDisruptionBudget", NAMESPACE):
            status = pdb.get("status") or {}
            if status.get("observedGeneration") != pdb["metadata"]["generation"]:
                return False
            if status.get("currentHealthy") != status.get("expectedPods"):
                return False
        return True

    # -- the targets -----------------------------------------------------------------------------

    def add_targets(self, names: Iterable[str] = TARGETS) -> None:
        """``big`` (8 GPUs) and ``pcie`` (4 GPUs under one PCIe root), each with a claim of its own."""
        for name in names:
            if name == "big":
                claim = b.claim("big-gpus", [b.exact("gpu", GPU_CLASS, GPUS)])
            else:
                claim = b.claim(
                    "pcie-gpus",
                    [b.exact("gpu", GPU_CLASS, GPUS // 2)],
                    constraints=[{"matchAttribute": PCIE, "requests": ["gpu"]}],
                )
            self.api.create(applied(claim))
            self.api.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": NAMESPACE, "labels": {ROLE: "target"}},
                    "spec": {
                        "schedulerName": SCHEDULER_NAME,
                        "terminationGracePeriodSeconds": 0,
                        "containers": [{"name": "main", "image": PAUSE}],
                        "resourceClaims": [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}],
                    },
                }
            )

    # -- reading ---------------------------------------------------------------------------------

    def pods_by_role(self) -> dict[str, dict[str, str]]:
        """role -> {pod uid: pod name} of the pods there now (not deleting)."""
        out: dict[str, dict[str, str]] = defaultdict(dict)
        for p in self.api.list("Pod", NAMESPACE):
            meta = p["metadata"]
            if not meta.get("deletionTimestamp"):
                out[(meta.get("labels") or {}).get(ROLE, "")][meta["uid"]] = meta["name"]
        return dict(out)

    def placement(self) -> dict[str, str]:
        """pod name -> node of every bound pod."""
        return {
            p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in self.api.list("Pod", NAMESPACE)
            if p["spec"].get("nodeName")
        }

    def all_running(self, but: Iterable[str] = ()) -> bool:
        """Every ReplicaSet has its replicas bound and running, and every pod but those named
        ``but`` is bound."""
        pods = [
            p
            for p in self.api.list("Pod", NAMESPACE)
            if not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] not in set(but)
        ]
        if any(not p["spec"].get("nodeName") for p in pods):
            return False
        running = Counter(
            (p["metadata"].get("labels") or {}).get("app")
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running"
        )
        return all(
            running[rs["metadata"]["name"]] == rs["spec"]["replicas"]
            for rs in self.api.list("ReplicaSet", NAMESPACE)
        )

    def remove_workloads(self) -> None:
        """The ReplicaSets and budgets (before the pods go: nothing recreates them then)."""
        remove_workloads(self.api)


def remove_workloads(api: Api) -> None:
    for kind in ("ReplicaSet", "PodDisruptionBudget"):
        for obj in api.list(kind, NAMESPACE):
            api.delete(kind, obj["metadata"]["name"], NAMESPACE)
