"""The make-room mover on the real control plane (issue 52): kube-apiserver, kube-scheduler,
kube-controller-manager with its ReplicaSet, Job and disruption controllers beside the DRA ones,
and the test kubelet that runs pods and finishes their deletions.

The cluster is tests/realcluster/fragmented.py's ``SMALL``: 4 nodes x 8 GPUs, 15 one-GPU pods
(ReplicaSets' pods, two under a PodDisruptionBudget allowing none, a bare pod, a high-priority
pod), then ``big`` (8 GPUs) and ``pcie`` (4 under one PCIe root), which fit nowhere until pods move.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests import builders as b
from tests.realcluster.api import Api
from tests.realcluster.components import Extender, extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane, more_controllers
from tests.realcluster.failover import ReadyService, ready
from tests.realcluster.fragmented import (
    HIGH,
    NAMESPACE,
    SHARED_BUDGET,
    TARGETS,
    Fragmented,
    budget,
    remove_workloads,
)
from tests.realcluster.kubelet import playing_kubelet
from tests.realcluster.mover_checks import (
    AuditTail,
    ClaimWatch,
    Eviction,
    evict,
    eviction_rights,
    evictions,
    pod_deletes,
    wait_budgets,
)
from tests.realcluster.test_kubectl_dra import kubectl_dra
from tests.realcluster.workload import (
    GPU_CLASS,
    GPU_DRIVER,
    PAUSE,
    applied,
    failed_scheduling,
    pod_with_claims,
    store_violations,
)

#: The planner's rules as the runs set them: every pod is old enough at once.
RULES = ("--make-room-min-age", "0", "--make-room-hint-interval", "1")
#: Leader election as tests/realcluster/test_leader_election.py shortens it (3 s leases).
ELECTION = (
    "--leader-elect",
    "--leader-elect-namespace=dra-extender",
    "--leader-elect-name=test-mover",
    "--leader-elect-lease-duration=3",
    "--leader-elect-renew-deadline=2",
    "--leader-elect-retry-period=0.5",
    "--api-timeout=3",
)
#: The mover, acting after 1 s of waiting, up to an eviction a second.
MOVER = ("--make-room", "--make-room-after", "1", "--make-room-rate", "60")
#: With the mover on, pods started less than this long ago never move: the built pods are older
#: when the targets come, the pods recreated during the run younger (as the shipped defaults
#: have it: a recreated pod is younger than --make-room-min-age, so no plan moves it again).
MIN_AGE = 8
MOVER_RULES = ("--make-room-min-age", str(MIN_AGE), "--make-room-hint-interval", "1")
NEVER_MOVED = ("guarded", "high", "bare")


@pytest.fixture
def workloads(cluster: ControlPlane) -> Iterator[ControlPlane]:
    """The session's plane with the ReplicaSet, Job and disruption controllers running beside its
    own; its ReplicaSets removed afterwards (before the pods: nothing recreates them then)."""
    if cluster.controller_manager is None:
        pytest.skip("needs kube-controller-manager (ReplicaSets recreate the moved pods; budgets)")
    with more_controllers(cluster):
        try:
            yield cluster
        finally:
            remove_workloads(cluster.api)


def unschedulable(api: Any, names: tuple[str, ...]) -> bool:
    said = {e["involvedObject"]["name"] for e in failed_scheduling(api, NAMESPACE)}
    return all(n in said for n in names)


def make_room(plane: ControlPlane, pod: str) -> dict[str, Any]:
    """``kubectl dra make-room default/POD -o json`` as someone holding the shipped viewer role."""
    with plane.person("dra-viewer", "dra-extender-viewer") as kubeconfig:
        answer = kubectl_dra(
            kubeconfig, "make-room", f"{NAMESPACE}/{pod}", "--make-room-min-age", "0", "-o", "json"
        )
    assert answer.returncode == 0, answer.stderr
    return dict(json.loads(answer.stdout))


def metric(ext: Extender, name: str, **labels: str) -> float:
    """A sample of the extender's /metrics (0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    sample = f"{name}{{{want}}} " if want else f"{name} "
    found = [line for line in ext.metrics().splitlines() if line.startswith(sample)]
    return float(found[0].split()[-1]) if found else 0.0


def diagnosis(cluster: Fragmented, ext: Extender) -> str:
    """What the extender plans for each target that is not bound, and where the pods are."""
    placed = cluster.placement()
    plans = {t: ext.get(f"/debug/make-room?pod={NAMESPACE}/{t}") for t in TARGETS if t not in placed}
    return f"plans {json.dumps(plans)}; placement {placed}"


# --- the harness ---------------------------------------------------------------------------------


def test_the_disruption_controller_counts_the_test_kubelets_pods_healthy(workloads: ControlPlane) -> None:
    """As on a real cluster: a ReplicaSet's two running pods under maxUnavailable 1 allow one
    disruption; one evicted, the budget allows none (a second eviction is refused, 429) until its
    replacement runs, then one again."""
    api = workloads.api
    workloads.add_node("node-a")
    labels = {"app": "pair"}
    api.create(budget("pair", labels, max_unavailable=1))
    api.create(
        {
            "kind": "ReplicaSet",
            "metadata": {"name": "pair", "namespace": NAMESPACE},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeName": "node-a",  # no scheduler in this one
                        "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "main", "image": PAUSE}],
                    },
                },
            },
        }
    )
    with playing_kubelet(api):
        pdb = wait_budgets(api, "pair", allowed=1)
        assert (pdb["status"]["currentHealthy"], pdb["status"]["expectedPods"]) == (2, 2), pdb["status"]
        first, second = (p["metadata"] for p in api.list("Pod", NAMESPACE))
        assert evict(api, first["name"], first["uid"]) == 201
        wait_budgets(api, "pair", allowed=0)
        assert evict(api, second["name"], second["uid"]) == 429
        wait_budgets(api, "pair", allowed=1)  # the replacement runs and is Ready
        api.wait_for(lambda: api.get("Pod", first["name"], NAMESPACE) is None, what="the evicted pod gone")
        names = {p["metadata"]["name"] for p in api.list("Pod", NAMESPACE)}
        assert first["name"] not in names and second["name"] in names and len(names) == 2, names


# --- the mover off -------------------------------------------------------------------------------


def test_with_the_mover_off_nothing_moves_and_kubectl_dra_shows_the_plans(workloads: ControlPlane) -> None:
    api = workloads.api
    audit_from = len(workloads.audit_events())
    cluster = Fragmented(workloads)
    with (
        playing_kubelet(api),
        extender(workloads, *RULES) as ext,
        scheduler(workloads, scheduler_config(workloads.extender_kubeconfig(), extender_url=ext.url)),
    ):
        cluster.build()
        before = cluster.pods_by_role()
        cluster.add_targets()
        api.wait_for(lambda: unschedulable(api, TARGETS), timeout=30, what="both targets unschedulable")
        time.sleep(4)  # several retries, each with a plan at hand
        now = cluster.pods_by_role()
        assert {r: now[r] for r in before} == before  # no pod replaced
        placed = cluster.placement()
        assert not set(TARGETS) & set(placed), placed
        assert evictions(workloads, audit_from) == []
        assert pod_deletes(workloads, audit_from) == []
        plans = {name: make_room(workloads, name) for name in TARGETS}
    movable = set(before["movable"].values())
    for name, moves in (("big", 3), ("pcie", 1)):
        planned = plans[name]
        assert (planned["found"], planned["needsMoves"]) == (True, True), planned
        assert planned["plan"]["node"] in ("node-00", "node-01"), planned["plan"]
        moved = {m["pod"].removeprefix(f"{NAMESPACE}/") for m in planned["plan"]["moves"]}
        assert len(moved) == moves and moved <= movable, planned["plan"]
        assert all(placed[p] == planned["plan"]["node"] for p in moved)
        assert all(m["toNode"] != planned["plan"]["node"] for m in planned["plan"]["moves"])
    assert store_violations(api) == []


# --- the mover on --------------------------------------------------------------------------------


@dataclass
class Run:
    """A run with the mover on: the cluster built, its pods older than MIN_AGE, watched."""

    cluster: Fragmented
    ext: Extender
    #: The pods by role (uid -> name) and where each was, before the targets came.
    before: dict[str, dict[str, str]]
    placed: dict[str, str]
    claims: ClaimWatch
    audit: AuditTail

    def metric(self, name: str, **labels: str) -> float:
        return metric(self.ext, name, **labels)

    def wait_bound(self, names: tuple[str, ...], timeout: float = 60) -> None:
        """Until ``names`` are bound. A node's label changes every 2 s meanwhile, as something in
        a real cluster always does: kube-scheduler tries an unschedulable pod again on a cluster
        event (or after 5 minutes), and only its filter has the extender plan for it again (a
        plan abandoned before any eviction needs a new one; reported to the lead)."""
        api = self.cluster.api
        deadline = time.monotonic() + timeout
        poke = 0
        while not set(names) <= set(self.cluster.placement()):
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{names} not bound within {timeout:g} s: {diagnosis(self.cluster, self.ext)}"
                )
            poke += 1
            api.patch("Node", self.cluster.nodes[-1], None, {"metadata": {"labels": {"poke": str(poke)}}})
            time.sleep(2)

    def quiet(self, seconds: float) -> list[Eviction]:
        """The evictions so far, once none came for ``seconds`` (it does not loop)."""
        seen = self.audit.evictions()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(seconds)
            now = self.audit.evictions()
            if now == seen:
                return now
            seen = now
        raise AssertionError(f"still evicting after 60 s: {seen}")

    def never_moved_kept(self) -> None:
        after = self.cluster.pods_by_role()
        for role in NEVER_MOVED:
            assert set(self.before[role]) <= set(after.get(role, {})), role


@contextlib.contextmanager
def mover_on(plane: ControlPlane, name: str, *args: str, shared_budget: int | None = None) -> Iterator[Run]:
    """``name``: the extender's (its log: <plane folder>/<name>.log)."""
    api = plane.api
    cluster = Fragmented(plane, shared_budget=shared_budget)
    with (
        eviction_rights(plane),
        playing_kubelet(api),
        extender(plane, *MOVER_RULES, *MOVER, *args, name=name) as ext,
        scheduler(plane, scheduler_config(plane.extender_kubeconfig(), extender_url=ext.url)),
    ):
        cluster.build()
        before = cluster.pods_by_role()
        placed = cluster.placement()
        cluster.wait_older_than(MIN_AGE)
        claims = ClaimWatch(plane)
        audit = AuditTail(plane)
        try:
            yield Run(cluster, ext, before, placed, claims, audit)
        finally:
            claims.close()
    assert claims.violations == [], claims.violations[:5]
    assert audit.pod_deletes() == []
    assert store_violations(api) == []


def events(api: Api, reason: str) -> dict[str, list[str]]:
    """pod name -> the messages of its Events of ``reason``."""
    out: dict[str, list[str]] = {}
    for e in api.list("Event", NAMESPACE):
        if e.get("reason") == reason:
            out.setdefault(e["involvedObject"]["name"], []).append(str(e.get("message") or e.get("note")))
    return out


def test_the_mover_makes_room_for_both_targets(workloads: ControlPlane) -> None:
    """Under ``spread`` (a replacement prefers the emptiest node: the freed one, unless held): both
    targets bind, every moved pod's replacement runs, no device is ever allocated twice, nothing
    the budget, its priority or its lack of an owner protects moves, and every move is an
    eviction (never a plain DELETE)."""
    api = workloads.api
    # --make-room-cooldown 5, not 600 (reported to the lead): pcie's plan, computed before big's
    # moved pods landed on its node (the hint line keeps showing it), is "abandoned (changed)" when
    # the mover takes it up, nothing evicted, and the default cooldown would keep pcie from being
    # planned again for 10 minutes.
    with mover_on(workloads, "mover-both", "--score-policy", "spread", "--make-room-cooldown", "5") as run:
        run.cluster.add_targets()
        run.wait_bound(TARGETS)
        api.wait_for(run.cluster.all_running, timeout=30, what="every replacement running")
        evicted = run.quiet(2.0)
        run.never_moved_kept()
        carried = run.metric("dra_extender_make_room_plans_total", outcome="carried_out")
        abandoned = run.metric("dra_extender_make_room_plans_total", outcome="abandoned")
        moved_events = events(api, "MovedToMakeRoom")
        making = events(api, "MakingRoom")
    assert evicted and {e.code for e in evicted} == {201}, evicted
    moved = {e.pod for e in evicted}
    movable = set(run.before["movable"].values())
    assert moved <= movable, moved
    # 3 for big; for pcie 1, or 2 where a recreated pod (too young to move) holds the root
    # one move would have freed: each pod once.
    assert len(evicted) == len(moved) <= 5, evicted
    assert {run.placed[p] for p in moved} <= {"node-00", "node-01", "node-03"}
    assert set(moved_events) == moved, moved_events
    # (No MadeRoom: kube-scheduler's bind of the target waits for the release and lands first.)
    assert set(making) == set(TARGETS), making
    assert carried == 2 and abandoned <= 1, (carried, abandoned)  # (the stale plan above)


@pytest.mark.slow  # 17 s: the file's short runs stay under a minute
def test_a_pod_that_takes_a_held_device_mid_plan_ends_the_plan_without_a_loop(
    workloads: ControlPlane,
) -> None:
    """Once the first pod of ``big``'s plan is evicted, a pod the extender never placed (another
    scheduler's: ``nodeName`` set, its claim allocated by someone else) takes a device of the node
    being freed. kube-scheduler's bind of ``big`` is then waiting for the moved pods' claims: it
    must not write that device into ``big``'s claim too. The plan ends (abandoned) and the
    evictions stop at the plan's."""
    api = workloads.api
    with mover_on(workloads, "mover-intruder") as run:
        run.cluster.add_targets(("big",))
        first = api.wait_for(
            lambda: [e for e in run.audit.evictions() if e.code == 201], timeout=30, what="an eviction"
        )
        node = run.placed[first[0].pod]
        taken, version = intruder_on(api, node, "gpu-7")
        evicted = run.quiet(3.0)
        run.never_moved_kept()
        abandoned = run.metric("dra_extender_make_room_plans_total", outcome="abandoned")
        started = run.metric("dra_extender_make_room_plans_total", outcome="started")
        placed = run.cluster.placement()
        big = api.get("ResourceClaim", "big-gpus", NAMESPACE) or {}
    allocated = (big.get("status") or {}).get("allocation") or {}
    assert taken not in {r["device"] for r in (allocated.get("devices") or {}).get("results") or []}, (
        f"{taken} allocated to intruder-gpu at resourceVersion {version}, then to big-gpus: "
        f"{run.claims.violations[:1]}"
    )
    assert placed.get("big") != node, placed
    moved = [e.pod for e in evicted if e.code == 201]
    assert len(moved) == len(set(moved)) <= 3, evicted  # the one plan's, each pod once
    assert started == 1 and abandoned == 1, (started, abandoned)


def intruder_on(api: Api, node: str, device: str) -> tuple[str, str]:
    """A high-priority pod on ``node`` by ``nodeName`` (no scheduler), its claim allocated
    ``device`` there and reserved for it, as another scheduler would leave them."""
    pod = pod_with_claims("intruder", ["intruder-gpu"], priority_class=HIGH)
    pod["spec"]["nodeName"] = node
    claim = api.create(applied(b.claim("intruder-gpu", [b.exact("gpu", GPU_CLASS, 1)])))
    created = api.create(pod)
    allocation = b.allocated((GPU_DRIVER, node, device))
    allocation["devices"]["results"][0]["request"] = "gpu"
    claim["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    claim = api.update(claim)
    claim["status"] = {
        "allocation": allocation,
        "reservedFor": [{"resource": "pods", "name": "intruder", "uid": created["metadata"]["uid"]}],
    }
    written = api.update(claim, subresource="status")
    return device, str(written["metadata"]["resourceVersion"])


@pytest.mark.slow  # 22 s
def test_a_budget_that_tightens_mid_plan_stops_it(workloads: ControlPlane) -> None:
    """The movable pods of the nodes ``big`` may have share a budget (maxUnavailable 3: the plan
    evicts them one by one). Set to 0 once the first is evicted: nothing more is evicted, the plan
    is abandoned (the Eviction API's 429, or its hold timing out waiting for the budget)."""
    api = workloads.api
    with mover_on(workloads, "mover-budget", "--make-room-timeout", "4", shared_budget=3) as run:
        run.cluster.add_targets(("big",))
        api.wait_for(
            lambda: [e for e in run.audit.evictions() if e.code == 201], timeout=30, what="an eviction"
        )
        api.patch("PodDisruptionBudget", SHARED_BUDGET, NAMESPACE, {"spec": {"maxUnavailable": 0}})
        api.wait_for(
            lambda: run.metric("dra_extender_make_room_plans_total", outcome="abandoned") >= 1,
            timeout=30,
            what="the plan abandoned",
        )
        evicted = run.quiet(3.0)
        run.never_moved_kept()
        reasons = {
            r: run.metric("dra_extender_make_room_abandoned_total", reason=r)
            for r in ("budget", "timeout", "changed")
        }
        placed = run.cluster.placement()
    assert [e.code for e in evicted if e.code != 429] == [201], evicted
    assert all(e.by_budget for e in evicted if e.code == 429), evicted
    assert "big" not in placed
    assert reasons["budget"] + reasons["timeout"] >= 1, reasons


@pytest.mark.slow
def test_a_leader_killed_mid_plan_leaves_no_plan_carried_out_twice(workloads: ControlPlane) -> None:
    """Two replicas with --leader-elect behind one address that follows readiness (failover.py's
    ReadyService); ``big``'s three pods share a budget (maxUnavailable 3), so the plan evicts them
    one at a time. The leader is killed (SIGKILL) once the first is evicted: the standby takes the
    Lease, plans again from what the API server holds (the pods recreated meanwhile are too young
    to move), and ``big`` binds, with no more evictions than the one plan's and none twice."""
    api = workloads.api
    cluster = Fragmented(workloads, shared_budget=3)
    replicas: list[Extender] = []
    with (
        eviction_rights(workloads),
        playing_kubelet(api),
        ReadyService(lambda: replicas) as service,
        scheduler(workloads, scheduler_config(workloads.extender_kubeconfig(), extender_url=service.url)),
    ):
        try:
            for name in ("mover-a", "mover-b"):
                args = (*MOVER_RULES, *MOVER, *ELECTION)
                replicas.append(Extender(workloads, *args, name=name).start(ready=False))
            api.wait_for(lambda: any(ready(r) for r in replicas), what="a leader")
            cluster.build()
            before = cluster.pods_by_role()
            cluster.wait_older_than(MIN_AGE)
            claims = ClaimWatch(workloads)
            audit = AuditTail(workloads)
            cluster.add_targets(("big",))
            api.wait_for(
                lambda: [e for e in audit.evictions() if e.code == 201], timeout=30, what="an eviction"
            )
            (leader,) = [r for r in replicas if ready(r)]
            leader.process.signal(signal.SIGKILL)
            try:
                api.wait_for(lambda: "big" in cluster.placement(), timeout=60, what="big bound")
            finally:
                claims.close()
            api.wait_for(lambda: cluster.all_running(), timeout=30, what="every replacement running")
            evicted = [e.pod for e in audit.evictions() if e.code == 201]
            after = cluster.pods_by_role()
            logs = {r.name: r.log().count("make room: making room for default/big") for r in replicas}
        finally:
            for r in replicas:
                r.stop()
    assert claims.violations == [], claims.violations[:5]
    assert len(evicted) == len(set(evicted)) <= 3, evicted  # the one plan's pods, each once
    assert set(evicted) <= set(before["movable"].values())
    for role in NEVER_MOVED:
        assert set(before[role]) <= set(after.get(role, {})), role
    assert audit.pod_deletes() == []
    assert sorted(logs.values()) == [1, 1], logs  # each leader started one plan
    assert store_violations(api) == []
