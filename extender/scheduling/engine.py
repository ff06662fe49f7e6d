"""The extender's decisions: filter, prioritize, preempt and explain over the cached cluster state.

No HTTP here: the service layer decodes requests and encodes answers. No writes either: bind
hands over to the write path (:mod:`extender.scheduling.write.binder`), whose claim writes are
assumed (:mod:`extender.scheduling.inflight.assumed`): decisions count their devices as taken until the
cache shows what became of them, however long that takes, so two pods never get one device.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, islice
from typing import Any, TypeVar

from cachetools import TTLCache

from extender.allocator import AllocatedState
from extender.cel import CelEnvironment
from extender.cluster.api import ClusterAPI
from extender.cluster.state import ClusterState, Key
from extender.model.core import Node, Pod
from extender.model.dra import Allocation, DeviceID, ResourceClaim
from extender.model.labels import Labels
from extender.scheduling.config import (
    EngineConfig,
    Observer,
)
from extender.scheduling.decide import extended as er
from extender.scheduling.decide import node_allocatable as na
from extender.scheduling.decide.decision import NOT_EVALUATED, Assessment, NodeDecision, Snapshot
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.timeout_memo import TimeoutMemo
from extender.scheduling.inflight import catch_up, holds
from extender.scheduling.inflight.assumed import AssumedClaims
from extender.scheduling.inflight.expected_binds import ExpectedBinds
from extender.scheduling.preempt import nominated, victims
from extender.scheduling.preempt.victims import Candidate
from extender.scheduling.write.binder import Binder, InFlight

log = logging.getLogger("dra_extender.engine")

MIN_SCORE, MAX_SCORE = 0, 10
#: Per-node reasons a filter's decision entry keeps (log line, /debug/decisions); the rest counted.
LOGGED_REASONS = 20
#: How many preemptions' victims are remembered (what pods nominated by them keep; see nominated.py).
MAX_REMEMBERED_PREEMPTIONS = 4096
K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class FilterResult:
    passed: list[str] = field(default_factory=list)
    #: Unschedulable (preemption or a later retry may help): the time budget ran out.
    failed: dict[str, str] = field(default_factory=dict)
    #: UnschedulableAndUnresolvable: no devices for this pod here.
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""


def _cut_short(answers: Iterable[Assessment], error: bool) -> set[str]:
    """Why some nodes of a filter answer were not judged in full: ``budget`` (not evaluated),
    ``node_timeout`` (a node's allocation ran out of time, or did a moment ago: remembered; from
    1.36 that is the pod's error). After an error the rest are not evaluated, but not for want
    of time."""
    causes = {"budget" if a is NOT_EVALUATED else "node_timeout" for a in answers if a.timed_out}
    if error:
        causes.discard("budget")
    return causes


class Engine:
    def __init__(
        self,
        state: ClusterState,
        api: ClusterAPI,
        cel: CelEnvironment,
        config: EngineConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        observer: Observer | None = None,
    ) -> None:
        self.state = state
        self.cel = cel
        self.config = config or EngineConfig()
        #: Monotonic seconds and seconds since the epoch (injected; the write path reads these).
        self.clock = clock
        self.wall_clock = wall_clock
        self.decisions: deque[dict[str, Any]] = deque(maxlen=self.config.decision_log_size)
        #: Where every decision is also reported (one structured log line each).
        self.log_sink: Callable[[dict[str, Any]], None] | None = None
        #: The write path: binds and the PostFilter's deallocations.
        self.binder = Binder(
            state,
            api,
            self.config,
            self,
            clock=lambda: self.clock(),
            wall_clock=lambda: self.wall_clock(),
            log=self._log,
        )
        if observer is not None:
            self.observer = observer
        #: (claims, node) -> an assessment that ran out of time, remembered for a short while.
        self._timeouts = TimeoutMemo(lambda: self.clock(), lambda: self.config.timeout_memo_seconds)
        self._snapshot: Snapshot | None = None
        #: Devices in use, kept up to date by delta (see _count_in_use), and what it counts.
        self._allocated = AllocatedState(self.config.features)
        #: DRANodeAllocatableResources: each pod's share of its node's requests, kept across snapshots.
        self._node_requests = na.NodeRequests()
        self._counted: dict[Key, tuple[Allocation, ...]] = {}
        self._snapshot_key: tuple[int, int, int] | None = None
        #: Pods whose claims a filter waited for in vain (not waited for again for a while).
        self._stuck = catch_up.Stuck(lambda: self.clock())
        #: Preemptor UID -> node -> the victims the preempt verb named there.
        self._preempted: TTLCache[str, dict[str, frozenset[str]]] = TTLCache(
            MAX_REMEMBERED_PREEMPTIONS, self.config.preemption_memory_seconds, timer=clock
        )

    def reconfigure(self, config: EngineConfig) -> None:
        """Replace the configuration (on the engine's loop), for decisions and writes alike.

        New features (another Kubernetes release, read from the API server at start) change
        how allocations count: the devices in use are recounted and no snapshot is kept."""
        if config.features != self.config.features or config.release != self.config.release:
            self._allocated = AllocatedState(config.features)
            self._counted = {}
            self.state.changed_claims |= set(self.state.claims)
            self._snapshot = None
            self._snapshot_key = None
        self.config = config
        self.binder.config = config

    # --- what the write path shares ---------------------------------------------------------------

    @property
    def api(self) -> ClusterAPI:
        return self.binder.api

    @api.setter
    def api(self, api: ClusterAPI) -> None:
        self.binder.api = api

    @property
    def observer(self) -> Observer:
        return self.binder.observer

    @observer.setter
    def observer(self, observer: Observer) -> None:
        self.binder.observer = observer

    @property
    def fence(self) -> Callable[[], str | None]:
        """Why this replica may not bind now (leader election), or None."""
        return self.binder.fence

    @fence.setter
    def fence(self, check: Callable[[], str | None]) -> None:
        self.binder.fence = check

    @property
    def cache_stale(self) -> Callable[[], str | None]:
        """Why the cache cannot be trusted for binding right now (a watch is down), or None."""
        return self.binder.cache_stale

    @cache_stale.setter
    def cache_stale(self, check: Callable[[], str | None]) -> None:
        self.binder.cache_stale = check

    @property
    def in_flight(self) -> dict[str, InFlight]:
        return self.binder.in_flight

    @property
    def assumed(self) -> AssumedClaims:
        return self.binder.assumed

    @property
    def expected(self) -> ExpectedBinds:
        return self.binder.expected

    # --- snapshot ------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        if self.assumed.holding:
            self.assumed.expire_holds(self.clock() - self.config.hold_seconds)
        self.assumed.settle(self.state.claims, self.state.claims_seen_rv, self.state.changed_claims)
        # Pods and Nodes are read live; only claims, the inventory and our writes feed a snapshot.
        key = (self.state.inventory_version, self.state.claims_version, self.assumed.version)
        if self._snapshot is None or self._snapshot_key != key:
            previous = self._snapshot
            inventory = None
            if previous is not None and previous.inventory_version == self.state.inventory_version:
                inventory = previous.inventory
            elif previous is not None:
                # Only slices changed (None: classes or taint rules too): re-index their pools.
                names = self.state.slices_changed_since(previous.inventory_version)
                if names is not None:
                    inventory = previous.inventory.updated({n: self.state.slices.get(n) for n in names})
            claims = self.assumed.overlay(self.state.claims)
            changed, changed_claims = self._count_in_use(claims)
            self._snapshot = Snapshot(
                self.state,
                self.config.features,
                self.cel,
                claims=claims,
                allocated=self._allocated,
                changed=changed,
                changed_claims=changed_claims,
                clock=self.clock,
                wall_clock=self.wall_clock,
                binding_timeout=self.config.binding_timeout,
                timeout_is_error=self.config.release.filter_timeout_is_error,
                inventory=inventory,
                previous=previous if inventory is not None else None,
            )
            self._snapshot_key = key
            if self.config.features.node_allocatable_resources:
                self._snapshot.node_pods = self.binder.node_pods
                self._snapshot.node_requests = self._node_requests
        if self.state.changed_nodes:
            # Node changes make no new snapshot: the current one forgets those nodes' entries.
            changed_nodes, self.state.changed_nodes = self.state.changed_nodes, set()
            self._snapshot.forget_nodes(changed_nodes)
        return self._snapshot

    def _count_in_use(self, claims: Mapping[Key, ResourceClaim]) -> tuple[set[DeviceID], set[Key]]:
        """Bring the devices in use up to date with the claims that changed since the last
        snapshot (in the cache, or in our writes not shown yet). Returns the devices whose use
        may have changed, and those claims. Unchanged allocations are the same objects: identity
        finds changes."""
        keys = self.state.changed_claims | self.assumed.touched
        self.state.changed_claims = set()
        self.assumed.touched = set()
        allocated, counted = self._allocated, self._counted
        changed: set[DeviceID] = set()
        for key in keys:
            shown = claims.get(key)
            now = [shown.allocation] if shown is not None and shown.allocation is not None else []
            now += [devices for _pod, devices in self.assumed.held_for(key, shown)]
            before = counted.get(key, ())
            if len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True)):
                continue
            for allocation in before:
                changed |= allocated.remove(allocation)
            for allocation in now:
                changed |= allocated.add(allocation)
            if now:
                counted[key] = tuple(now)
            else:
                counted.pop(key, None)
        return changed, keys

    def claims_of(self, snapshot: Snapshot, pod: Pod) -> PodClaims:
        """PreFilter: the pod's claims, with another pod's bind still allocating one a reason to wait."""
        features = self.config.features
        grouped = features.workload_resource_claims and pod.pod_group  # a missing group still fails
        if not pod.claims and not (features.extended_resource and er.may_request(pod)) and not grouped:
            return PodClaims()

        def pending(claim: ResourceClaim) -> bool:
            record = self.assumed.allocating(claim.key)
            return record is not None and record.pod_uid != pod.uid

        return snapshot.claims_of(pod, pending)

    def nodes_as_sent(self, labels_by_name: Mapping[str, Mapping[str, str]]) -> dict[str, Node] | None:
        """Nodes as a full NodeList from kube-scheduler shows them (name and labels); None when
        every one is the informer's Node with the same labels (then decisions use the cache's
        records, whose per-node answers are memoized: decoding and filtering a 500-node list
        took 3.1 ms in process with every node rebuilt, 1.5 ms reusing the records)."""
        cached = self.state.nodes
        out: dict[str, Node] = {}
        all_cached = True
        for name, labels in labels_by_name.items():
            node = cached.get(name)
            if node is None or node.labels != labels:
                # Device plugins' extended resources still come from the cached Node.
                node = (
                    Node(name, Labels(labels), node.allocatable, {}, node.declared_features)
                    if node is not None
                    else Node(name, Labels(labels), {}, {})
                )
                all_cached = False
            out[name] = node
        return None if all_cached else out

    # --- filter ------------------------------------------------------------------------------

    def filter(
        self, pod: Pod, node_names: Sequence[str], nodes: Mapping[str, Node] | None = None
    ) -> FilterResult:
        """``nodes``: the Node records as the request sent them; None means the cached ones."""
        started = self.clock()
        self.binder.seen.remember(pod)
        self.assumed.release_holds(pod.uid)  # tried again: kube-scheduler did not bind it
        result = FilterResult()
        snapshot = self.snapshot()
        claims = self.claims_of(snapshot, pod)
        if claims.empty:
            result.passed = list(node_names)
            self._log("filter", pod, started, passed=len(result.passed), note="no resource claims")
            self.observer.filtered(len(result.passed), 0, False)
            return result
        groups, answers = self._answers(snapshot, pod, claims, node_names, nodes, started)
        result.error = next((a.error for a in answers.values() if a.error is not None), "")
        for cause in _cut_short(answers.values(), bool(result.error)):
            self.observer.filter_cut_short(cause)
        if not result.error:
            # Per node a lookup in C (map, compress): per-node Python work was a third of a
            # 2000-node filter.
            fits = {group: a.fits for group, a in answers.items()}
            mask = list(map(fits.__getitem__, groups))
            result.passed = list(compress(node_names, mask))
            if result.passed and claims.allocates:
                self.expected.expect(pod.uid)
            if result.passed and pod.pod_group and self.config.features.workload_resource_claims:
                self.binder.group_activity.passed(pod.namespace, pod.pod_group, self.clock())
            if len(result.passed) < len(node_names):
                why = {g: a.reason or "does not fit" for g, a in answers.items() if not a.fits}
                failing = [not fit for fit in mask]
                result.unresolvable = dict(
                    zip(
                        compress(node_names, failing),
                        map(why.__getitem__, compress(groups, failing)),
                        strict=True,
                    )
                )
                # Unschedulable, not Unresolvable (nodes not reached; node resources that
                # evicting pods could free): moved over (a name may repeat).
                skipped = {g for g, a in answers.items() if a is NOT_EVALUATED or a.resolvable}
                if skipped:
                    for name, group in zip(node_names, groups, strict=True):
                        if group in skipped and name in result.unresolvable:
                            result.failed[name] = result.unresolvable.pop(name)
        lookup = nodes if nodes is not None else self.state.nodes
        if (
            self.config.device_preemption
            and result.unresolvable
            and not result.error
            and victims.may_preempt(self.state, pod, claims)
        ):
            # A node whose allocation ran out of time is not tried again with fewer devices in
            # use: it would likely spend the budget the same way.
            to_check = {
                name: group
                for name, group in zip(node_names, groups, strict=True)
                if name in result.unresolvable and not answers[group].timed_out
            }
            self._preemption_may_help(snapshot, pod, claims, result, lookup, started, to_check)
        if (
            not result.error
            and not result.passed
            and (
                claims.allocated
                or (claims.extended and claims.extended.existing)
                or (pod.pod_group and self.config.features.workload_resource_claims)
            )
        ):
            candidates = [lookup[n] for n in node_names if n in lookup]
            self.binder.deallocate_unavailable(snapshot, pod, claims, candidates)
        # Names the cache does not know are not counted: a caller cannot inflate the counter.
        unknown = sum(1 for name in result.unresolvable if name not in lookup)
        self.observer.filtered(
            len(result.passed), len(result.failed) + len(result.unresolvable) - unknown, bool(result.error)
        )
        rejected = len(result.unresolvable) + len(result.failed)
        self._log(
            "filter",
            pod,
            started,
            passed=len(result.passed),
            unresolvable=len(result.unresolvable),
            failed=len(result.failed),
            error=result.error or None,
            reasons=(
                dict(islice(chain(result.unresolvable.items(), result.failed.items()), LOGGED_REASONS))
                if rejected
                else None
            ),
            moreReasons=rejected - LOGGED_REASONS if rejected > LOGGED_REASONS else None,
        )
        return result

    def _preemption_may_help(
        self,
        snapshot: Snapshot,
        pod: Pod,
        claims: PodClaims,
        result: FilterResult,
        lookup: Mapping[str, Node],
        started: float,
        group_of: Mapping[str, Hashable],
    ) -> None:
        """Move to ``failed`` (Unschedulable) the rejected nodes where evicting lower-priority pods
        would make room for the pod's claims: kube-scheduler's preemption then considers them
        and asks the preempt verb which pods to evict. The rest stay Unresolvable, as the
        in-tree plugin reports every rejection. ``group_of``: the rejected nodes to check, with
        their groups of look-alike nodes."""
        rejected = {name: lookup[name] for name in group_of if name in lookup}
        found = victims.where_it_may_help(
            snapshot,
            pod,
            claims,
            rejected,
            nominations=self.nominations(),
            timeout=self.config.allocation_timeout,
            deadline=started + self.config.filter_budget,
            clock=self.clock,
            groups=group_of,
        )
        for name, addition in found.items():
            result.failed[name] = result.unresolvable.pop(name) + addition

    def _victims_of(self, uid: str, node: str) -> frozenset[str]:
        """The victims the preempt verb named on ``node`` for the pod with this UID (if remembered)."""
        return self._preempted.get(uid, {}).get(node, frozenset())

    def nominations(self) -> nominated.Nominations | None:
        """Whose nominations keep devices (with device preemption only): pods of the schedulers
        this extender serves, except those being bound (their writes hold their devices)."""
        if not self.config.device_preemption:
            return None
        return nominated.Nominations(self.config.scheduler_names, self._victims_of, frozenset(self.in_flight))

    def _answers(
        self,
        snapshot: Snapshot,
        pod: Pod,
        claims: PodClaims,
        names: Sequence[str],
        nodes: Mapping[str, Node] | None,
        started: float,
        *,
        stop_at_error: bool = True,
    ) -> tuple[list[Hashable], dict[Hashable, Assessment]]:
        """Per node name its group, and one answer per group (kube-scheduler's Filter per node).

        Look-alike nodes (:meth:`Snapshot.node_groups`) share a group, so a call costs one
        allocation per distinct group and a dict lookup per node; otherwise every node is its own
        group. Groups are judged in order until an error (the pod's answer) or until the filter
        budget runs out: the rest are :data:`NOT_EVALUATED`. Prioritize goes on past a node's
        error (``stop_at_error`` False): a timeout there costs only that node's score.
        """
        groups: list[Hashable] | None = None
        if nodes is None and not self._timeouts.remembers(claims.key()):  # these are remembered by name
            groups = snapshot.node_groups(claims, names)
        if groups is None:
            groups = list(names)
        assess = self._assessor(snapshot, claims)
        deadline = started + self.config.filter_budget
        lookup = nodes if nodes is not None else self.state.nodes
        answers: dict[Hashable, Assessment] = {}
        representatives = dict(zip(groups, names, strict=True))
        for group, name in representatives.items():
            node = lookup.get(name)
            if node is None:
                answers[group] = Assessment(False, f"node {name} is not known to the DRA extender")
            elif self.clock() > deadline:
                answers[group] = NOT_EVALUATED
            else:
                answers[group] = answer = assess(node)
                if answer.error is not None and stop_at_error:
                    break
        for group in representatives:  # after an error: the remaining groups are not judged
            if group not in answers:
                answers[group] = NOT_EVALUATED
        if not claims.allocates or any(a.error is not None for a in answers.values()):
            return groups, answers
        nominations = self.nominations()
        judged = nominated.Judged(names, groups, answers, lookup)
        if nominations is not None and self.state.nominated:
            nominated.kept_for_others(
                snapshot,
                pod,
                claims,
                judged,
                nominations,
                deadline,
                self.clock,
                self.config.allocation_timeout,
            )
        target = self.nominated_node(pod)
        if target:
            freeing = self.releasing(snapshot, pod, claims, target)
            nominated.preemptor(
                snapshot, pod, claims, judged, target, freeing, nominations, self.config.allocation_timeout
            )
        return groups, answers

    def releasing(
        self, snapshot: Snapshot, pod: Pod, claims: PodClaims, node_name: str
    ) -> list[ResourceClaim]:
        """Claims the preemption that nominated the pod to ``node_name`` is releasing there
        (:func:`nominated.releasing`); none when the pod is not nominated to that node."""
        if self.nominated_node(pod) != node_name:
            return []
        return nominated.releasing(snapshot, pod, node_name, self._victims_of, nominated.own_claims(claims))

    def while_released(
        self, snapshot: Snapshot, pod: Pod, claims: PodClaims, node: Node, decision: NodeDecision
    ) -> tuple[NodeDecision, list[ResourceClaim]]:
        """A bind's decision for a preemptor on its nominated node with the devices of its
        victims' claims free, and those claims (the bind writes once they are released); or
        ``decision`` unchanged, and none."""
        freeing = self.releasing(snapshot, pod, claims, node.name)
        if not freeing:
            return decision, []
        freed = nominated.decide(
            snapshot,
            pod,
            claims,
            node,
            nominations=self.nominations(),
            freed=[c.allocation for c in freeing if c.allocation is not None],
            timeout=self.config.allocation_timeout,
        )
        return (freed, freeing) if freed.fits else (decision, [])

    def nominated_node(self, pod: Pod) -> str:
        """The node a preemption nominated the pod to, as the request or the cache shows it."""
        if pod.nominated_node_name:
            return pod.nominated_node_name
        cached = self.state.pods.get(pod.key)
        if cached is None or cached.uid != pod.uid or cached.node_name:
            return ""
        return cached.nominated_node_name

    # --- prioritize ----------------------------------------------------------------------------

    def prioritize(
        self, pod: Pod, node_names: Sequence[str], nodes: Mapping[str, Node] | None = None
    ) -> list[tuple[str, int]]:
        started = self.clock()
        pod = catch_up.with_statuses(pod, self.state.pods.get(pod.key))  # as filter judged it
        self.assumed.release_holds(pod.uid)
        snapshot = self.snapshot()
        claims = self.claims_of(snapshot, pod)
        if claims.empty or not claims.allocates or claims.reason or claims.error:
            return [(n, MIN_SCORE) for n in node_names]
        self.expected.expect(pod.uid)  # the bind follows the scores
        groups, answers = self._answers(
            snapshot, pod, claims, node_names, nodes, started, stop_at_error=False
        )
        judged = {g: a for g, a in answers.items() if a is not NOT_EVALUATED}
        scores = dict.fromkeys(answers, MIN_SCORE)  # past the budget: 0
        scores.update(score_nodes(judged, self.config.score_policy))
        answer = list(zip(node_names, map(scores.__getitem__, groups), strict=True))
        if self.config.hold_seconds > 0:
            node = holds.best_alone(answer, nodes if nodes is not None else self.state.nodes)
            if node is not None:
                holds.hold(
                    snapshot,
                    self.assumed,
                    pod,
                    claims,
                    node,
                    self.nominations(),
                    self.clock(),
                    self.config.allocation_timeout,
                )
        self._log("prioritize", pod, started, nodes=len(node_names), best=max(scores.values(), default=0))
        return answer

    # --- bind (the write path: binder.py) -------------------------------------------------------

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> str:
        """Allocate, write the claims, bind the pod. Returns '' or the error for kube-scheduler."""
        return await self.binder.bind(namespace, name, uid, node_name)

    # --- catching up with kube-scheduler's view ------------------------------------------------

    async def caught_up(self, pod: Pod) -> Pod:
        """Before a filter: the pod to filter, once its claims are in the cache
        (:func:`catch_up.for_filter`)."""
        return await catch_up.for_filter(
            self.state, pod, self._stuck, seconds=self.config.catch_up_wait, clock=self.clock
        )

    async def preemptor(self, pod: Pod) -> Pod:
        """Before a preemption: the pod once its claims are in the cache (:func:`catch_up.created`)."""
        return await catch_up.created(
            self.state, self.binder.seen, pod, seconds=self.config.catch_up_wait, clock=self.clock
        )

    # --- preemption ----------------------------------------------------------------------------------

    def preempt(self, pod: Pod, candidates: Mapping[str, Candidate]) -> dict[str, Candidate]:
        """The preempt verb (:func:`extender.scheduling.preempt.victims.preempt` on the current snapshot)."""
        started = self.clock()
        self.binder.seen.remember(pod)
        snapshot = self.snapshot()
        answer = victims.preempt(
            snapshot,
            pod,
            candidates,
            claims=self.claims_of(snapshot, pod),
            nominations=self.nominations(),
            timeout=self.config.allocation_timeout,
            budget=self.config.filter_budget,
            clock=self.clock,
            pdb_selectors_as_policy_v1=self.config.release.pdb_selectors_as_policy_v1,
        )
        cached = self.state.pods.get(pod.key)
        if answer and cached is not None and cached.uid == pod.uid and cached.priority == pod.priority:
            # kube-scheduler nominates one of these nodes: what the pod keeps there (nominated.py).
            # Only for the pod the cache knows: a made-up request cannot make devices be kept.
            self._preempted[pod.uid] = {node: frozenset(c.uids) for node, c in answer.items()}
        self._log(
            "preempt",
            pod,
            started,
            candidates=len(candidates),
            kept=len(answer),
            victims={node: list(c.uids) for node, c in answer.items()} or None,
        )
        return answer

    # --- explanations --------------------------------------------------------------------------------

    def explain(self, pod: Pod, node_names: Iterable[str] | None = None) -> dict[str, NodeDecision]:
        """Full decisions (with devices) per node: the debug endpoint's answer."""
        snapshot = self.snapshot()
        claims = self.claims_of(snapshot, pod)
        names = sorted(node_names) if node_names is not None else sorted(self.state.nodes)
        deadline = self.clock() + self.config.filter_budget
        nominations = self.nominations()
        out = {}
        for name in names:
            node = self.state.nodes.get(name)
            if node is None:
                continue
            if self.clock() > deadline:
                reason = "not evaluated: the DRA extender's time budget for this view ran out"
                out[name] = NodeDecision(name, False, reason=reason, timed_out=True)
            else:
                out[name] = nominated.decide(
                    snapshot,
                    pod,
                    claims,
                    node,
                    nominations=nominations,
                    timeout=self.config.allocation_timeout,
                )
        return out

    def _assessor(self, snapshot: Snapshot, claims: PodClaims) -> Callable[[Node], Assessment]:
        """The snapshot's assessor, with nodes that just timed out for these claims remembered
        (:mod:`extender.scheduling.decide.timeout_memo`)."""
        assess = snapshot.assessor(claims, timeout=self.config.allocation_timeout)
        return self._timeouts.wrap(assess, claims.key())

    def _log(self, verb: str, pod: Pod | None, started: float, **details: Any) -> None:
        entry: dict[str, Any] = {
            "time": self.wall_clock(),
            "verb": verb,
            "pod": details.pop("pod_key", None) or (f"{pod.namespace}/{pod.name}" if pod else None),
            "durationMs": round((self.clock() - started) * 1e3, 3),
        }
        entry.update({k: v for k, v in details.items() if v is not None})
        self.decisions.append(entry)
        if self.log_sink is not None:
            self.log_sink(entry)


def score_nodes(assessed: Mapping[K, Assessment], policy: str) -> dict[K, int]:
    """0..10 per node (or per group of look-alike nodes): the DynamicResources plugin's score
    first, then the packing policy.

    When the plugin's Score (prioritized lists: earlier subrequests score higher) differs among
    the fitting nodes, the answer is its NormalizeScore (``DefaultNormalizeScore``: score * max
    / highest) on the extender's 0..10 scale. Otherwise binpack prefers the node left with the
    fewest free matching devices (keeping whole nodes free for large claims) and spread the
    most. Nodes that do not fit get 0.
    """
    fitting = {n: a for n, a in assessed.items() if a.fits}
    if not fitting:
        return dict.fromkeys(assessed, MIN_SCORE)
    highest = max(a.dra_score for a in fitting.values())
    scores: dict[K, int] = {}
    if highest > 0 and len({a.dra_score for a in fitting.values()}) > 1:
        scores = {name: MAX_SCORE * a.dra_score // highest for name, a in fitting.items()}
    else:
        frees = [a.free_after for a in fitting.values()]
        low, high = min(frees), max(frees)
        for name, a in fitting.items():
            if high == low:
                packing = MAX_SCORE / 2
            elif policy == "spread":
                packing = MAX_SCORE * (a.free_after - low) / (high - low)
            else:
                packing = MAX_SCORE * (high - a.free_after) / (high - low)
            scores[name] = max(MIN_SCORE, min(MAX_SCORE, round(packing)))
    for name in assessed:
        scores.setdefault(name, MIN_SCORE)
    return scores
