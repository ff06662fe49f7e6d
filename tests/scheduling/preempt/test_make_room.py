"""Make room, the plan: which running pods to move so that a pending pod's devices fit on one
node. Each rule has a named case table; the row named in the comment above a table fails when
that rule is taken out of the planner."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.model.timestamps import parse_timestamp
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.make_room import NoPlan, Plan, Rules, Shape, plan
from extender.scheduling.preempt.movable import unmovable
from tests.builders import (
    allocated,
    claim,
    device,
    device_class,
    exact,
    node,
    pod,
    pod_disruption_budget,
    reserve,
    resource_slice,
)
from tests.virtual_time import Ticking

CEL = CelEnvironment()
NOW = parse_timestamp("2026-11-28T00:00:00Z") or 0.0
LONG_AGO = "2026-11-01T00:00:00Z"
PCIE = "resource.kubernetes.io/pcieRoot"


@dataclass(frozen=True)
class Mover:
    """A pod on ``node`` whose claim ``<name>-claim`` holds ``gpus`` there (``shares``: the
    running pods, on the same node, that reserve that claim too; ``admin``: GPUs it watches
    through a second, admin-access claim)."""

    name: str
    node: str
    gpus: tuple[int, ...]
    priority: int = 1
    owner: str | None = "ReplicaSet"
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    volumes: tuple[dict[str, Any], ...] = ()
    started: str | None = LONG_AGO
    shares: tuple[str, ...] = ()
    admin: tuple[int, ...] = ()
    deleting: bool = False
    pod_group: str | None = None
    priority_class: str = ""
    sharer_owner: str | None = "ReplicaSet"
    sharer_node: str = ""  # "": the pod's node
    more: tuple[int, ...] = ()  # GPUs of a second claim of its own
    selectors: tuple[str, ...] = ()  # what its claim asks of a device (where it may move)
    pod_spec: dict[str, Any] = field(default_factory=dict)  # nodeSelector, tolerations...


def gpus(n: int, *, model: str = "a") -> list[dict[str, Any]]:
    """``n`` GPUs, two under each PCIe root."""
    return [
        device(f"gpu-{i}", attributes={"model": {"string": model}, PCIE: {"string": f"root-{i // 2}"}})
        for i in range(n)
    ]


def running(m: Mover, claims: list[str]) -> dict[str, Any]:
    p = pod(m.name, claims, node_name=m.node, priority=m.priority, labels=m.labels or None)
    meta, spec = p["metadata"], p["spec"]
    if m.owner:
        meta["ownerReferences"] = [
            {"kind": m.owner, "name": f"{m.name}-owner", "uid": "o", "controller": True}
        ]
    if m.annotations:
        meta["annotations"] = dict(m.annotations)
    if m.deleting:
        meta["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    if m.volumes:
        spec["volumes"] = list(m.volumes)
    if m.pod_group:
        spec["schedulingGroup"] = {"podGroupName": m.pod_group}
    if m.priority_class:
        spec["priorityClassName"] = m.priority_class
    spec.update(m.pod_spec)
    p["status"] = {"phase": "Running", **({"startTime": m.started} if m.started else {})}
    return p


def cluster(
    nodes: Mapping[str, int | list[dict[str, Any]]],
    movers: list[Mover],
    target: dict[str, Any] | None,
    extra: Sequence[dict[str, Any]] = (),
    node_fields: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[Snapshot, ClusterState]:
    """``nodes``: name -> GPU count or the devices (or slices: dicts with a ``spec``) of its
    pool; ``target``: the pending pod's claim ``wanted``; ``node_fields``: name -> labels and
    spec of the Node."""
    objects: list[dict[str, Any]] = [device_class()]
    for name, devices in nodes.items():
        fields = (node_fields or {}).get(name, {})
        objects.append({**node(name, **fields.get("labels", {})), "spec": dict(fields.get("spec", {}))})
        if isinstance(devices, int):
            devices = gpus(devices)
        if devices and "spec" in devices[0]:
            objects.extend(devices)
        else:
            objects.append(resource_slice(f"{name}-s", devices, pool=name, node=name))
    for m in movers:
        names = [f"{m.name}-claim"]
        c = claim(
            names[0],
            requests=[exact(count=len(m.gpus), selectors=list(m.selectors) or None)],
            allocation=allocated(*(("driver-a", m.node, f"gpu-{i}") for i in m.gpus)),
        )
        objects.append(reserve(c, m.name, *m.shares))
        if m.more:
            names.append(f"{m.name}-more")
            more = claim(
                names[-1],
                requests=[exact(count=len(m.more))],
                allocation=allocated(*(("driver-a", m.node, f"gpu-{i}") for i in m.more)),
            )
            objects.append(reserve(more, m.name))
        if m.admin:
            names.append(f"{m.name}-admin")
            a = claim(
                names[-1],
                requests=[exact(count=len(m.admin), adminAccess=True)],
                allocation=allocated(*(("driver-a", m.node, f"gpu-{i}") for i in m.admin), admin=True),
            )
            objects.append(reserve(a, m.name))
        objects.append(running(m, names))
    for m in movers:
        for sharer in m.shares:
            sharer_at = m.sharer_node or m.node
            objects.append(running(Mover(sharer, sharer_at, (), owner=m.sharer_owner), [f"{m.name}-claim"]))
    if target is not None:
        objects.append(target)
        objects.append(pod("trainer", ["wanted"], priority=100))
    objects.extend(extra)
    state = ClusterState.from_objects(objects)
    assert not state.problems, state.problems
    return Snapshot(state, Features(), CEL), state


def wanted(
    count: int, *, selectors: list[str] | None = None, constraints: list[Any] | None = None
) -> dict[str, Any]:
    return claim("wanted", requests=[exact(count=count, selectors=selectors)], constraints=constraints)


def summary(found: Plan | NoPlan) -> str:
    """``node-1: a->node-2, b->node-3`` (exact/greedy), ``node-2: no move``, or ``no plan: <kind>``."""
    if isinstance(found, NoPlan):
        return f"no plan: {found.kind}"
    if not found.moves:
        return f"{found.node}: no move"
    return f"{found.node}: " + ", ".join(f"{m.pod.split('/')[1]}->{m.to_node}" for m in found.moves)


@dataclass(frozen=True)
class Case:
    nodes: Mapping[str, int | list[dict[str, Any]]]
    movers: list[Mover]
    target: dict[str, Any] | Shape
    expected: str
    rules: Rules = field(default_factory=Rules)
    extra: list[dict[str, Any]] = field(default_factory=list)
    node_fields: dict[str, dict[str, Any]] = field(default_factory=dict)


def run(case: Case) -> Plan | NoPlan:
    target_claim = case.target if isinstance(case.target, dict) else None
    snapshot, state = cluster(case.nodes, case.movers, target_claim, case.extra, case.node_fields)
    in_use = (dict(snapshot.allocated.dedicated), dict(snapshot.allocated.shared_ids))
    target = case.target if isinstance(case.target, Shape) else state.pods[("default", "trainer")]
    found = plan(snapshot, target, case.rules, now=NOW, clock=Ticking(0.0))
    assert (dict(snapshot.allocated.dedicated), dict(snapshot.allocated.shared_ids)) == in_use
    return found


def check(case: Case) -> None:
    assert summary(run(case)) == case.expected


VIP = 1000  # above the target's 100
FULL = Mover("vip-2", "node-2", (0,), priority=VIP)  # node-2's one GPU, taken for good
#: The target wants 2 GPUs; node-1 has 2 (one held by the pod each row moves), node-2 one free.
TWO = {"node-1": 2, "node-2": 1}

# --- Where a moved pod goes ---------------------------------------------------------------------
# Taken out "never onto the freed node": "a pod that would fit only on the freed node" fails
# (a plans its move onto node-1 itself). Taken out "after every earlier move" (earlier moves'
# devices not held): "two pods cannot both take the one GPU pair left" and "a chain" fail.
MODELS = [
    device("gpu-0", attributes={"model": {"string": "b"}}),
    device("gpu-1", attributes={"model": {"string": "a"}}),
]
MODEL_B = [device("gpu-0", attributes={"model": {"string": "b"}})]
ONLY_A = ['device.attributes["driver-a"].model == "a"']
WHERE = {
    "a pod that would fit only on the freed node": Case(
        {"node-1": MODELS, "node-2": 1},
        [Mover("a", "node-1", (1,)), FULL],
        wanted(1, selectors=ONLY_A),
        "no plan: bounds",
    ),
    "the same pod with a free GPU elsewhere moves there": Case(
        {"node-1": MODELS, "node-2": 1, "node-3": MODEL_B},
        [Mover("a", "node-1", (1,)), FULL],
        wanted(1, selectors=ONLY_A),
        "node-1: a->node-3",
    ),
    "two pods cannot both take the one GPU pair left": Case(
        {"node-1": 4, "node-2": 2},
        [Mover("a", "node-1", (0, 1)), Mover("b", "node-1", (2, 3))],
        wanted(4),
        "no plan: bounds",
    ),
    "a chain: the second move goes where the first left room": Case(
        {"node-1": 4, "node-2": 2, "node-3": 2},
        [Mover("a", "node-1", (0, 1)), Mover("b", "node-1", (2, 3))],
        wanted(4),
        "node-1: a->node-2, b->node-3",
    ),
    "a moved pod goes to the fullest node it fits (best fit)": Case(
        {"node-1": 3, "node-2": 2, "node-3": 4},
        [Mover("a", "node-1", (0,)), Mover("vip-3", "node-3", (0, 1, 2), priority=VIP)],
        wanted(3),
        "node-1: a->node-3",
    ),
    "a target that fits somewhere needs no move": Case(
        {"node-1": 4, "node-2": 2},
        [Mover("a", "node-1", (0, 1, 2))],
        wanted(2),
        "node-2: no move",
    ),
}

# --- A destination's own constraints, and tries spent only on allocations -----------------------
# Taken out the node-fit check (preempt/node_fit.py): "a nodeSelector...", "a cordoned..." and
# "an untolerated taint..." fail (a moves to node-2). Counting every node looked at as a try: "a
# node with only a free NIC uses up no try" fails (node-0 takes the one try, no plan).
GPU_POOL = {"nodeSelector": {"pool": "gpu"}}
TAINTED = {"spec": {"taints": [{"key": "maintenance", "value": "soon", "effect": "NoSchedule"}]}}
NIC_ONLY = [resource_slice("node-0-nic", [device("nic-0")], driver="nic", pool="node-0", node="node-0")]
NODE_FIT = {
    "a nodeSelector the only other node lacks: no home": Case(
        TWO, [Mover("a", "node-1", (0,), pod_spec=GPU_POOL)], wanted(2), "no plan: bounds"
    ),
    "a nodeSelector the other node matches: it moves": Case(
        TWO,
        [Mover("a", "node-1", (0,), pod_spec=GPU_POOL)],
        wanted(2),
        "node-1: a->node-2",
        node_fields={"node-2": {"labels": {"pool": "gpu"}}},
    ),
    "a cordoned node is no home": Case(
        TWO,
        [Mover("a", "node-1", (0,))],
        wanted(2),
        "no plan: bounds",
        node_fields={"node-2": {"spec": {"unschedulable": True}}},
    ),
    "an untolerated taint is no home": Case(
        TWO, [Mover("a", "node-1", (0,))], wanted(2), "no plan: bounds", node_fields={"node-2": TAINTED}
    ),
    "a tolerated taint is": Case(
        TWO,
        [
            Mover(
                "a", "node-1", (0,), pod_spec={"tolerations": [{"key": "maintenance", "operator": "Exists"}]}
            )
        ],
        wanted(2),
        "node-1: a->node-2",
        node_fields={"node-2": TAINTED},
    ),
    "a node with only a free NIC uses up no try": Case(
        {"node-0": NIC_ONLY, **TWO},
        [Mover("a", "node-1", (0,))],
        wanted(2),
        "node-1: a->node-2",
        Rules(max_destinations=1),
    ),
}

# --- Priorities ----------------------------------------------------------------------------------
# Taken out "never a higher priority than the target": "a higher-priority pod stays" fails.
PRIORITY = {
    "a higher-priority pod stays": Case(
        TWO, [Mover("h", "node-1", (0,), priority=101)], wanted(2), "no plan: impossible"
    ),
    "an equal-priority pod may move": Case(
        TWO, [Mover("e", "node-1", (0,), priority=100)], wanted(2), "node-1: e->node-2"
    ),
    "a shape moves nothing above its max priority": Case(
        TWO,
        [Mover("a", "node-1", (0,), priority=5)],
        Shape("class-a", 2),
        "no plan: impossible",
        Rules(max_priority=4),
    ),
    "a shape moves pods at its max priority": Case(
        TWO,
        [Mover("a", "node-1", (0,), priority=5)],
        Shape("class-a", 2),
        "node-1: a->node-2",
        Rules(max_priority=5),
    ),
}

# --- PodDisruptionBudgets ------------------------------------------------------------------------
# Taken out (budgets ignored): "a PDB at 0 keeps its pod: the other goes" and "one disruption
# allowed: the plan may not take two" fail; counted per pod instead of per plan, the latter fails.
APP_A, APP_B = {"app": "a"}, {"app": "b"}
PAIR = [Mover("a1", "node-1", (0,), labels=APP_A), Mover("a2", "node-1", (1,), labels=APP_A)]
PDB = {
    "a PDB at 0 keeps its pod: the other goes": Case(
        {"node-1": 3, "node-2": 1},
        [Mover("a", "node-1", (0,), priority=0, labels=APP_A), Mover("b", "node-1", (1,), labels=APP_B)],
        wanted(2),
        "node-1: b->node-2",
        extra=[pod_disruption_budget("protect-a", APP_A, allowed=0)],
    ),
    "without the budget the lower priority goes": Case(
        {"node-1": 3, "node-2": 1},
        [Mover("a", "node-1", (0,), priority=0, labels=APP_A), Mover("b", "node-1", (1,), labels=APP_B)],
        wanted(2),
        "node-1: a->node-2",
    ),
    "one disruption allowed: the plan may not take two": Case(
        {"node-1": 2, "node-2": 1, "node-3": 1},
        PAIR,
        wanted(2),
        "no plan: bounds",
        extra=[pod_disruption_budget("protect-a", APP_A, allowed=1)],
    ),
    "a pod already in disruptedPods is not counted again": Case(
        {"node-1": 2, "node-2": 1, "node-3": 1},
        PAIR,
        wanted(2),
        "node-1: a1->node-2, a2->node-3",
        extra=[pod_disruption_budget("protect-a", APP_A, allowed=1, disrupted=("a1",))],
    ),
}

# --- Only pods a controller recreates ------------------------------------------------------------
# Each check of :func:`unmovable` taken out fails its own "... stays" row (the owner-kind check:
# "a bare pod stays" and "an unknown owner kind stays"; the DaemonSet check, which the owner
# kinds cover by default: "a DaemonSet pod stays even when the rules name the kind").
OWNERS = {
    "a bare pod stays": Mover("x", "node-1", (0,), owner=None),
    "a DaemonSet pod stays": Mover("x", "node-1", (0,), owner="DaemonSet"),
    "an unknown owner kind stays": Mover("x", "node-1", (0,), owner="MPIJob"),
    "a mirror pod stays": Mover("x", "node-1", (0,), annotations={"kubernetes.io/config.mirror": "h"}),
    "a system- priority class stays": Mover("x", "node-1", (0,), priority_class="system-node-critical"),
    "a terminating pod stays": Mover("x", "node-1", (0,), deleting=True),
    "a PodGroup pod stays": Mover("x", "node-1", (0,), pod_group="gang"),
    "a pod with an emptyDir stays": Mover("x", "node-1", (0,), volumes=({"name": "v", "emptyDir": {}},)),
    "a pod with a hostPath stays": Mover(
        "x", "node-1", (0,), volumes=({"name": "v", "hostPath": {"path": "/"}},)
    ),
    "safe-to-evict false stays": Mover(
        "x", "node-1", (0,), annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    ),
    "our opt-out stays": Mover("x", "node-1", (0,), annotations={"dra.extender.io/make-room": "never"}),
    "a pod younger than the minimum age stays": Mover("x", "node-1", (0,), started="2026-11-27T23:30:00Z"),
    "a pod not started stays": Mover("x", "node-1", (0,), started=None),
}
ELIGIBLE = {
    "a ReplicaSet pod moves": Mover("x", "node-1", (0,)),
    "a StatefulSet pod moves": Mover("x", "node-1", (0,), owner="StatefulSet"),
    "a Job pod moves": Mover("x", "node-1", (0,), owner="Job"),
    "a pod with other volumes moves": Mover(
        "x", "node-1", (0,), volumes=({"name": "v", "configMap": {"name": "c"}},)
    ),
    "safe-to-evict true moves": Mover(
        "x", "node-1", (0,), annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    ),
}
HOUR = Rules(min_age=3600)
CONTROLLERS = {
    **{name: Case(TWO, [m], wanted(2), "no plan: impossible", HOUR) for name, m in OWNERS.items()},
    **{name: Case(TWO, [m], wanted(2), "node-1: x->node-2", HOUR) for name, m in ELIGIBLE.items()},
    # (a shape target of that priority: a pod target of lower priority keeps it anyway)
    "a system-critical priority stays, whatever the target's": Case(
        TWO,
        [Mover("x", "node-1", (0,), priority=2_000_000_000)],
        Shape("class-a", 2),
        "no plan: impossible",
        Rules(max_priority=2_000_000_000),
    ),
    "a DaemonSet pod stays even when the rules name the kind (it comes back on the same node)": Case(
        TWO,
        [Mover("x", "node-1", (0,), owner="DaemonSet")],
        wanted(2),
        "no plan: impossible",
        Rules(controller_kinds=frozenset({"ReplicaSet", "DaemonSet"})),
    ),
    "an owner kind the rules accept moves": Case(
        TWO,
        [Mover("x", "node-1", (0,), owner="MPIJob")],
        wanted(2),
        "node-1: x->node-2",
        Rules(controller_kinds=frozenset({"ReplicaSet", "MPIJob"})),
    ),
}

# --- Claims: shared, admin access, counters, constraints -----------------------------------------
# Shared: with the pods sharing a claim not grouped into one unit, "a shared claim moves with
# all its reservers" and "a shared claim counts all its reservers as moves" fail (neither pod
# alone frees the claim); without "sharing a claim with a pod that stays", "a pod sharing a
# claim with a pod on another node stays" fails (s would move for its other claim).
# Admin access: counted as moved devices (``len(a.devices)`` for ``exclusive``), "an admin-access
# claim frees nothing: its pod counts one device" fails (y, one device, would go instead).
# Counters and constraints: with the target judged by free device counts instead of the
# allocator, "a whole GPU needs both halves' pods gone" fails (gpu-0 is unallocated, so one
# move "frees" it) and so do both pcieRoot rows; with the shape's constraints dropped, "a
# pcieRoot shape frees a whole root" fails (b, lower, would go).
SHARED = Mover("s", "node-1", (0, 1), shares=("s2",))


def partitioned(node_name: str) -> list[dict[str, Any]]:
    """A GPU cut in profiles over one counter set: gpu-0 the whole (8Gi), gpu-1 and gpu-2 halves."""
    counters = resource_slice(
        f"{node_name}-counters",
        None,
        pool=node_name,
        node=node_name,
        count=2,
        sharedCounters=[{"name": "set", "counters": {"mem": {"value": "8Gi"}}}],
    )
    devices = [
        device(
            f"gpu-{i}",
            attributes={"profile": {"string": profile}},
            consumesCounters=[{"counterSet": "set", "counters": {"mem": {"value": mem}}}],
        )
        for i, (profile, mem) in enumerate([("whole", "8Gi"), ("half", "4Gi"), ("half", "4Gi")])
    ]
    return [counters, resource_slice(f"{node_name}-parts", devices, pool=node_name, node=node_name, count=2)]


HALVES = [device(f"gpu-{i}", attributes={"profile": {"string": "half"}}) for i in range(2)]
WHOLE = ['device.attributes["driver-a"].profile == "whole"']
ROOT = [{"matchAttribute": PCIE}]
#: node-1: a (priority 5) under root-0, b and c (priority 1) filling root-1; node-2 one GPU
#: free under each root. Two GPUs under one root: move a (one pod), not b (lower, but not enough).
ROOTS = [
    Mover("a", "node-1", (0,), priority=5),
    Mover("b", "node-1", (2,)),
    Mover("c", "node-1", (3,)),
    Mover("vip-2", "node-2", (0, 2), priority=VIP),
]
CLAIMS = {
    "a shared claim moves with all its reservers": Case(
        {"node-1": 3, "node-2": 2}, [SHARED], wanted(3), "node-1: s->node-2, s2->node-2"
    ),
    "a claim shared with a pod that stays is never freed": Case(
        {"node-1": 3, "node-2": 2},
        [Mover("s", "node-1", (0, 1), shares=("s2",), sharer_owner=None)],
        wanted(3),
        "no plan: impossible",
    ),
    # s's own claim would free enough, but the claim it shares with a pod on node-2 stays
    # allocated on node-1: recreated, s would have to come back here.
    "a pod sharing a claim with a pod on another node stays": Case(
        {"node-1": 3, "node-2": [*MODEL_B, device("gpu-1", attributes={"model": {"string": "b"}})]},
        [Mover("s", "node-1", (0,), shares=("s2",), sharer_node="node-2", more=(1,))],
        wanted(2, selectors=ONLY_A),
        "no plan: impossible",
    ),
    "a pod with two claims of its own moves": Case(
        {"node-1": 3, "node-2": [*MODEL_B, device("gpu-1", attributes={"model": {"string": "b"}})]},
        [Mover("s", "node-1", (0,), more=(1,))],
        wanted(3, selectors=ONLY_A),
        "node-1: s->node-2",
    ),
    "a shared claim counts all its reservers as moves": Case(
        {"node-1": 3, "node-2": 2}, [SHARED], wanted(3), "no plan: bounds", Rules(max_moves=1)
    ),
    "an admin-access claim frees nothing: its pod counts one device": Case(
        {"node-1": 4, "node-2": 2},
        [Mover("x", "node-1", (0,), priority=0, admin=(1,)), Mover("y", "node-1", (1,))],
        wanted(3),
        "node-1: x->node-2",
    ),
    "a whole GPU needs both halves' pods gone": Case(
        {"node-1": partitioned("node-1"), "node-2": HALVES},
        [Mover("a", "node-1", (1,)), Mover("b", "node-1", (2,))],
        wanted(1, selectors=WHOLE),
        "node-1: a->node-2, b->node-2",
    ),
    "a pcieRoot shape frees a whole root": Case(
        {"node-1": 4, "node-2": 4},
        ROOTS,
        Shape("class-a", 2, tuple(ROOT)),
        "node-1: a->node-2",
        Rules(max_priority=10),
    ),
    "a pod's pcieRoot constraint counts too": Case(
        {"node-1": 4, "node-2": 4}, ROOTS, wanted(2, constraints=ROOT), "node-1: a->node-2"
    ),
}

# --- The objective and the bounds ----------------------------------------------------------------
OBJECTIVE = {
    "fewest pods first: one pod of two GPUs over two of one": Case(
        {"node-1": 5, "node-2": 2},
        [
            Mover("big", "node-1", (0, 1), priority=50),
            Mover("s1", "node-1", (2,)),
            Mover("s2", "node-1", (3,)),
        ],
        wanted(3),
        "node-1: big->node-2",
    ),
    "then fewest devices": Case(
        {"node-1": 5, "node-2": 2},
        [Mover("two", "node-1", (0, 1), priority=0), Mover("one", "node-1", (2,), priority=50)],
        wanted(3),
        "node-1: one->node-2",
    ),
    "then the lowest priority": Case(
        {"node-1": 3, "node-2": 1},
        [Mover("hi", "node-1", (0,), priority=50), Mover("lo", "node-1", (1,), priority=2)],
        wanted(2),
        "node-1: lo->node-2",
    ),
    # a would go to node-2 and leave it partly free; b fills node-3's one GPU.
    "then the least fragmentation left behind": Case(
        {
            "node-1": 3,
            "node-2": [device(f"gpu-{i}", attributes={"model": {"string": "b"}}) for i in range(2)],
            "node-3": [device("gpu-0", attributes={"model": {"string": "c"}})],
        },
        [
            Mover("a", "node-1", (0,), selectors=('device.attributes["driver-a"].model == "b"',)),
            Mover("b", "node-1", (1,), selectors=('device.attributes["driver-a"].model == "c"',)),
        ],
        wanted(2, selectors=ONLY_A),
        "node-1: b->node-3",
    ),
    "past max moves: no plan within the bounds": Case(
        {"node-1": 4, "node-2": 2, "node-3": 2},
        [Mover("a", "node-1", (0, 1)), Mover("b", "node-1", (2, 3))],
        wanted(4),
        "no plan: bounds",
        Rules(max_moves=1),
    ),
    "no node tried: no plan within the bounds": Case(
        TWO, [Mover("a", "node-1", (0,))], wanted(2), "no plan: bounds", Rules(max_nodes=0)
    ),
    "too few devices anywhere: impossible": Case(
        TWO, [Mover("a", "node-1", (0,))], wanted(3), "no plan: impossible"
    ),
}

TABLES = {
    "where": WHERE,
    "node fit": NODE_FIT,
    "priority": PRIORITY,
    "pdb": PDB,
    "controllers": CONTROLLERS,
    "claims": CLAIMS,
    "objective": OBJECTIVE,
}
ALL = {f"{table}: {name}": case for table, cases in TABLES.items() for name, case in cases.items()}


@pytest.mark.parametrize("case", ALL.values(), ids=ALL.keys())
def test_make_room(case: Case) -> None:
    check(case)


def test_a_plan_names_the_devices_of_each_step_and_the_target_last() -> None:
    found = run(WHERE["a chain: the second move goes where the first left room"])
    assert isinstance(found, Plan) and found.search == "exact"
    assert [(m.pod, m.to_node, m.devices) for m in found.moves] == [
        ("default/a", "node-2", ("driver-a/node-2/gpu-0", "driver-a/node-2/gpu-1")),
        ("default/b", "node-3", ("driver-a/node-3/gpu-0", "driver-a/node-3/gpu-1")),
    ]
    assert sorted(found.devices) == [f"driver-a/node-1/gpu-{i}" for i in range(4)]
    assert found.explain() == "fits on node-1 after moving 2 pods"


def test_no_move_says_so() -> None:
    found = run(WHERE["a target that fits somewhere needs no move"])
    assert isinstance(found, Plan) and not found.needs_moves and found.search == "none"
    assert found.explain() == "fits on node-2 without moving a pod"


def test_greedy_beyond_the_exact_bound_says_so() -> None:
    case = WHERE["a chain: the second move goes where the first left room"]
    greedy = Case(case.nodes, case.movers, case.target, case.expected, Rules(exact_up_to=1))
    found = run(greedy)
    assert isinstance(found, Plan) and found.search == "greedy"
    assert summary(found) == case.expected


def test_no_plan_says_why_per_node_in_explain_style() -> None:
    found = run(
        Case(
            {"node-1": 4, "node-2": 2},
            [
                Mover("h", "node-1", (0, 1, 2), priority=200),
                Mover("bare", "node-2", (0,), owner=None),
                Mover("ok", "node-2", (1,)),
            ],
            wanted(4),
            "",
        )
    )
    assert isinstance(found, NoPlan) and found.kind == "impossible"
    assert found.explain() == [
        "node-1: 3 of 4 devices held by pods with a higher priority than the target",
        "node-2: 1 of 2 devices held by pods that no controller recreates",
    ]


def test_the_time_budget_bounds_the_search() -> None:
    case = WHERE["a chain: the second move goes where the first left room"]
    snapshot, state = cluster(case.nodes, case.movers, case.target if isinstance(case.target, dict) else None)
    found = plan(snapshot, state.pods[("default", "trainer")], Rules(budget=1.0), now=NOW, clock=Ticking(5.0))
    assert isinstance(found, NoPlan) and found.kind == "bounds"
    assert "not searched" in found.reasons["node-1"]


def test_a_shape_of_a_missing_class_is_impossible() -> None:
    snapshot, _ = cluster({"node-1": 2}, [], None)
    found = plan(snapshot, Shape("nope", 1), Rules(), now=NOW, clock=Ticking(0.0))
    assert found == NoPlan("impossible", {"": "DeviceClass nope not found"})


def test_unmovable_reads_the_pod_as_applied() -> None:
    _, state = cluster(TWO, [Mover("x", "node-1", (0,))], None)
    x = state.pods[("default", "x")]
    assert unmovable(x, 1, Rules(), NOW) is None
    assert unmovable(x, 0, Rules(), NOW) == "with a higher priority than the target"
    assert unmovable(x, 1, Rules(controller_kinds=frozenset()), NOW) == "that no controller recreates"


def test_a_node_s_reason_counts_the_devices_the_target_could_use() -> None:
    """Of node-1's four GPUs and two NICs, the target's class selects the GPUs: "3 of 4"."""
    nics = [device("nic-0"), device("nic-1")]
    node_1 = [
        resource_slice("node-1-gpus", gpus(4), pool="node-1", node="node-1"),
        resource_slice("node-1-nics", nics, driver="nic", pool="node-1-nics", node="node-1"),
    ]
    found = run(Case({"node-1": node_1}, [Mover("h", "node-1", (0, 1, 2), priority=200)], wanted(4), ""))
    assert isinstance(found, NoPlan)
    assert found.explain() == ["node-1: 3 of 4 devices held by pods with a higher priority than the target"]
