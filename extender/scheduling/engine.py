"""The extender's decisions: filter, prioritize and bind over the cached cluster state.

No HTTP here: the service layer decodes requests and encodes answers; the engine decides and,
for bind, writes through a :class:`~extender.cluster.api.ClusterAPI`. Every claim write is
assumed (:mod:`extender.scheduling.assumed`): decisions count its devices as taken until the
cache shows what became of it, however long that takes, so two pods never get the same device.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, islice
from typing import Any, Protocol, TypeVar

from cachetools import TTLCache

from extender.allocator import AllocatedState, Features
from extender.cel import CelEnvironment
from extender.cluster.api import ApiConflict, ApiNotFound, ClusterAPI, ClusterAPIError
from extender.cluster.state import ClusterState, Key
from extender.model.core import Node, Pod, parse_pod
from extender.model.dra import Allocation, DeviceID, ResourceClaim, parse_resource_claim, rfc3339
from extender.model.errors import ObjectError
from extender.model.labels import Labels
from extender.scheduling import extended as er
from extender.scheduling import extended_writes, nominated, preemption
from extender.scheduling.assumed import AssumedClaims, AssumedWrite, WriteState
from extender.scheduling.binding import (
    DEFAULT_BINDING_WAIT,
    allocation_waits,
    binding_problem,
    claim_waits,
    pod_binding_state,
)
from extender.scheduling.claim_writes import (
    ClaimWriteError,
    WriteOutcomeUnknown,
    deallocated,
    outcome_unknown,
    release_claim,
    reserve_claim,
)
from extender.scheduling.decision import DEFAULT_BINDING_TIMEOUT, Assessment, NodeDecision, Snapshot
from extender.scheduling.expected_binds import ExpectedBinds
from extender.scheduling.preemption import Candidate
from extender.scheduling.prefilter import PodClaims

log = logging.getLogger("dra_extender.engine")

MIN_SCORE, MAX_SCORE = 0, 10
SCORE_POLICIES = ("binpack", "spread")
#: The scheduler the shipped manifests run (a second scheduler beside the default one).
DEFAULT_SCHEDULER_NAME = "dra-extender-scheduler"
#: How long after an unanswered Binding it may still land (kube-apiserver's request timeout is
#: 60 s): until then a leftover claim of the pod is not deleted, lest the pod be bound without it.
BINDING_MAY_LAND = 90.0
#: Kubernetes' name rules for namespaces (RFC 1123 labels) and pods (RFC 1123 subdomains).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
#: Bound of the (claims, node) -> timed-out answer table.
MAX_REMEMBERED_TIMEOUTS = 10_000
#: Per-node reasons a filter's decision entry keeps (log line, /debug/decisions); the rest counted.
LOGGED_REASONS = 20
#: A node not judged: the filter budget ran out first (Unschedulable, not Unresolvable).
NOT_EVALUATED = Assessment(
    False, "not evaluated: the DRA extender's filter time budget ran out", timed_out=True
)
#: How many preemptions' victims are remembered (what pods nominated by them keep; see nominated.py).
MAX_REMEMBERED_PREEMPTIONS = 4096
K = TypeVar("K", bound=Hashable)


class Observer(Protocol):
    """Metrics hooks (the service implements them with Prometheus)."""

    def filtered(self, passed: int, failed: int, error: bool) -> None: ...

    def bound(self, outcome: str) -> None: ...

    def conflict(self) -> None: ...

    def claim_created(self, outcome: str) -> None: ...

    def binding_waited(self, outcome: str) -> None: ...


class _NoObserver:
    def filtered(self, passed: int, failed: int, error: bool) -> None:
        pass

    def bound(self, outcome: str) -> None:
        pass

    def conflict(self) -> None:
        pass

    def claim_created(self, outcome: str) -> None:
        pass

    def binding_waited(self, outcome: str) -> None:
        pass


@dataclass(frozen=True, slots=True)
class EngineConfig:
    features: Features = field(default_factory=Features)
    score_policy: str = "binpack"
    #: Allocation budget per node, and for all nodes of one filter call (seconds).
    node_timeout: float = 1.0
    filter_budget: float = 3.0
    #: Pods of these schedulers may be bound (kube-scheduler binds only its own pods).
    scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER_NAME})
    #: How long a node whose allocation timed out keeps that answer for the same claims (seconds).
    timeout_memo_seconds: float = 30.0
    decision_log_size: int = 200
    #: DynamicResourcesArgs.bindingTimeout: how long an allocated claim may wait for its
    #: devices' binding conditions before filter treats it as unavailable (seconds).
    binding_timeout: float = DEFAULT_BINDING_TIMEOUT
    #: How long one bind waits for its devices' binding conditions before it answers
    #: kube-scheduler "not yet" (claims kept; the retry waits again), in seconds: upstream's
    #: PreBind waits up to ``binding_timeout`` in one go, which no bind verb may (httpTimeout).
    binding_wait: float = DEFAULT_BINDING_WAIT
    #: How often a waiting bind looks at the cache again (seconds).
    binding_poll: float = 0.05
    #: Device-aware preemption (kube-scheduler 1.38+): nodes where evicting lower-priority pods
    #: would make room are Unschedulable instead of Unresolvable, and pods nominated to a node
    #: keep the devices their preemption freed. Off: the in-tree plugin's answers exactly.
    device_preemption: bool = False
    #: How long the victims the preempt verb named are remembered (seconds).
    preemption_memory_seconds: float = 600.0


@dataclass(slots=True)
class FilterResult:
    passed: list[str] = field(default_factory=list)
    #: Unschedulable (preemption or a later retry may help): the time budget ran out.
    failed: dict[str, str] = field(default_factory=dict)
    #: UnschedulableAndUnresolvable: no devices for this pod here.
    unresolvable: dict[str, str] = field(default_factory=dict)
    error: str = ""


@dataclass(slots=True)
class CreatedClaim:
    """The extended-resource claim of one bind: its record, and the object once created or found."""

    record: AssumedWrite | None = None
    raw: dict[str, Any] | None = None
    #: The pod's status was (maybe) patched to name the claim: a failed bind takes that back.
    recorded: bool = False


@dataclass(slots=True)
class InFlight:
    """A bind being carried out (its concurrent duplicates wait for the same answer)."""

    pod_uid: str
    pod_key: Key
    node: str
    started: float
    done: asyncio.Future[str]


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
        self.api = api
        self.cel = cel
        self.config = config or EngineConfig()
        self.clock = clock
        self.wall_clock = wall_clock
        self.observer: Observer = observer or _NoObserver()
        #: Binds being carried out, by pod UID.
        self.in_flight: dict[str, InFlight] = {}
        #: Pods kube-scheduler may be binding already (its bind not here yet): filters wait.
        self.expected = ExpectedBinds(clock)
        #: Claim writes the cache does not show yet (their devices stay taken until it does).
        self.assumed = AssumedClaims()
        #: (claims, node) -> an assessment that ran out of time, remembered for a short while.
        #: Per claims key: node -> (until, answer); see :meth:`_assessor`.
        self._timeouts: dict[Any, dict[str, tuple[float, Assessment]]] = {}
        #: Background work started by decisions (deallocating stale claims).
        self._tasks: set[asyncio.Task[None]] = set()
        #: Pods whose Binding was sent with no answer, and when: such a Binding may still land.
        self._binding_unknown: dict[str, float] = {}
        self.decisions: deque[dict[str, Any]] = deque(maxlen=self.config.decision_log_size)
        #: Where every decision is also reported (one structured log line each).
        self.log_sink: Callable[[dict[str, Any]], None] | None = None
        #: Whether this replica may bind (leader election): only one replica decides at a time.
        self.may_bind: Callable[[], bool] = lambda: True
        #: Why the cache cannot be trusted for binding right now (a watch is down), or None.
        self.cache_stale: Callable[[], str | None] = lambda: None
        self._snapshot: Snapshot | None = None
        #: Devices in use, kept up to date by delta (see _count_in_use), and what it counts.
        self._allocated = AllocatedState(self.config.features)
        self._counted: dict[Key, tuple[Allocation, ...]] = {}
        self._snapshot_key: tuple[int, int, int] | None = None
        #: Preemptor UID -> node -> the victims the preempt verb named there.
        self._preempted: TTLCache[str, dict[str, frozenset[str]]] = TTLCache(
            MAX_REMEMBERED_PREEMPTIONS, self.config.preemption_memory_seconds, timer=clock
        )

    # --- snapshot ------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        self.assumed.settle(self.state.claims, self.state.claims_seen_rv)
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
                inventory=inventory,
                previous=previous if inventory is not None else None,
            )
            self._snapshot_key = key
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

    def _claims_of(self, snapshot: Snapshot, pod: Pod) -> PodClaims:
        """PreFilter: the pod's claims, with another pod's bind still allocating one a reason to wait."""
        if not pod.claims and not (self.config.features.extended_resource and er.may_request(pod)):
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
                node = Node(name, Labels(labels), node.allocatable if node is not None else {}, {})
                all_cached = False
            out[name] = node
        return None if all_cached else out

    # --- filter ------------------------------------------------------------------------------

    def filter(
        self, pod: Pod, node_names: Sequence[str], nodes: Mapping[str, Node] | None = None
    ) -> FilterResult:
        """``nodes``: the Node records as the request sent them; None means the cached ones."""
        started = self.clock()
        result = FilterResult()
        snapshot = self.snapshot()
        claims = self._claims_of(snapshot, pod)
        if claims.empty:
            result.passed = list(node_names)
            self._log("filter", pod, started, passed=len(result.passed), note="no resource claims")
            self.observer.filtered(len(result.passed), 0, False)
            return result
        groups, answers = self._answers(snapshot, pod, claims, node_names, nodes, started)
        result.error = next((a.error for a in answers.values() if a.error is not None), "")
        if not result.error:
            # Per node a lookup in C (map, compress): per-node Python work was a third of a
            # 2000-node filter.
            fits = {group: a.fits for group, a in answers.items()}
            mask = list(map(fits.__getitem__, groups))
            result.passed = list(compress(node_names, mask))
            if result.passed and claims.allocates:
                self.expected.expect(pod.uid)
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
                skipped = {g for g, a in answers.items() if a is NOT_EVALUATED}
                if skipped:  # Unschedulable, not Unresolvable: moved over (a name may repeat)
                    for name, group in zip(node_names, groups, strict=True):
                        if group in skipped and name in result.unresolvable:
                            result.failed[name] = result.unresolvable.pop(name)
        lookup = nodes if nodes is not None else self.state.nodes
        if (
            self.config.device_preemption
            and result.unresolvable
            and not result.error
            and preemption.may_preempt(self.state, pod, claims)
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
            and (claims.allocated or (claims.extended and claims.extended.existing))
        ):
            candidates = [lookup[n] for n in node_names if n in lookup]
            self._deallocate_unavailable(snapshot, pod, claims, candidates)
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
        found = preemption.where_it_may_help(
            snapshot,
            pod,
            claims,
            rejected,
            nominations=self._nominations(),
            timeout=self.config.node_timeout,
            deadline=started + self.config.filter_budget,
            clock=self.clock,
            groups=group_of,
        )
        for name, addition in found.items():
            result.failed[name] = result.unresolvable.pop(name) + addition

    def _victims_of(self, uid: str, node: str) -> frozenset[str]:
        """The victims the preempt verb named on ``node`` for the pod with this UID (if remembered)."""
        return self._preempted.get(uid, {}).get(node, frozenset())

    def _nominations(self) -> nominated.Nominations | None:
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
    ) -> tuple[list[Hashable], dict[Hashable, Assessment]]:
        """Per node name its group, and one answer per group (kube-scheduler's Filter per node).

        Look-alike nodes (:meth:`Snapshot.node_groups`) share a group, so a call costs one
        allocation per distinct group and a dict lookup per node; otherwise every node is its own
        group. Groups are judged in order until an error (the pod's answer) or until the filter
        budget runs out: the rest are :data:`NOT_EVALUATED`.
        """
        groups: list[Hashable] | None = None
        if nodes is None and not self._remembered_timeouts(claims):  # these are remembered by name
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
                if answer.error is not None:
                    break
        for group in representatives:  # after an error: the remaining groups are not judged
            if group not in answers:
                answers[group] = NOT_EVALUATED
        nominations = self._nominations()
        if nominations is not None and self.state.nominated and claims.allocates:
            self._nominated_answers(
                snapshot, pod, claims, names, groups, answers, lookup, nominations, deadline
            )
        return groups, answers

    def _nominated_answers(
        self,
        snapshot: Snapshot,
        pod: Pod,
        claims: PodClaims,
        names: Sequence[str],
        groups: list[Hashable],
        answers: dict[Hashable, Assessment],
        lookup: Mapping[str, Node],
        nominations: nominated.Nominations,
        deadline: float,
    ) -> None:
        """Nodes where pods nominated ahead of this one keep devices are judged on their own,
        with those devices taken (see :mod:`extender.scheduling.nominated`); within the filter
        budget, as every node (past it: not evaluated)."""
        if any(a.error is not None for a in answers.values()):
            return
        state = self.state
        targets = {n for n in state.nominated if nominated.nominated_here(state, pod, n, nominations)}
        if not targets:
            return
        for i, name in enumerate(names):
            node = lookup.get(name)
            if name not in targets or node is None:
                continue
            groups[i] = ("nominated", name)
            if self.clock() > deadline:
                answers[groups[i]] = NOT_EVALUATED
                continue
            answers[groups[i]] = nominated.assess(
                snapshot, pod, claims, node, nominations=nominations, timeout=self.config.node_timeout
            )

    # --- prioritize ----------------------------------------------------------------------------

    def prioritize(
        self, pod: Pod, node_names: Sequence[str], nodes: Mapping[str, Node] | None = None
    ) -> list[tuple[str, int]]:
        started = self.clock()
        snapshot = self.snapshot()
        claims = self._claims_of(snapshot, pod)
        if claims.empty or not claims.allocates or claims.reason or claims.error:
            return [(n, MIN_SCORE) for n in node_names]
        self.expected.expect(pod.uid)  # the bind follows the scores
        groups, answers = self._answers(snapshot, pod, claims, node_names, nodes, started)
        judged = {g: a for g, a in answers.items() if a is not NOT_EVALUATED}
        scores = dict.fromkeys(answers, MIN_SCORE)  # past the budget: 0
        scores.update(score_nodes(judged, self.config.score_policy))
        self._log("prioritize", pod, started, nodes=len(node_names), best=max(scores.values(), default=0))
        return list(zip(node_names, map(scores.__getitem__, groups), strict=True))

    # --- bind ------------------------------------------------------------------------------------

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> str:
        """Allocate, write the claims, bind the pod. Returns '' or the error for kube-scheduler.

        However it ends, filters no longer wait for this bind (see :mod:`expected_binds`).
        """
        try:
            return await self._bind_pod(namespace, name, uid, node_name)
        finally:
            self.expected.arrived(uid)

    async def _bind_pod(self, namespace: str, name: str, uid: str, node_name: str) -> str:
        """:meth:`bind`.

        Whatever happens (an API failure, an unexpected exception, cancellation at shutdown), the
        bind's entry is removed and every concurrent duplicate gets the same answer; the claims
        are either reserved for the pod or released again, or (when a write's outcome is
        unknown) their devices stay taken until the cache shows the outcome.
        """
        started = self.clock()
        pod = self.state.pods.get((namespace, name))
        if uid and (pod is None or pod.uid != uid) and self.may_bind() and self.cache_stale() is None:
            # kube-scheduler's pod watch ran ahead of ours: it can bind a pod within milliseconds
            # of its creation (seen with a real kube-scheduler). The API server has it.
            pod = await self._pod_from_api(namespace, name, uid) or pod
        refused = self._refuse_bind(pod, uid, node_name)
        if refused is not None:
            return self._bind_done(pod, namespace, name, node_name, started, refused)
        assert pod is not None
        existing = self.in_flight.get(pod.uid)
        if existing is not None:
            if existing.node != node_name:
                return self._bind_done(
                    pod, namespace, name, node_name, started, f"pod is being bound to {existing.node}"
                )
            return await asyncio.shield(existing.done)  # the same bind is in progress: same answer
        entry = InFlight(pod.uid, pod.key, node_name, started, asyncio.get_running_loop().create_future())
        self.in_flight[pod.uid] = entry
        error = "the bind was interrupted (the DRA extender is shutting down)"
        note: str | None = None
        decision: NodeDecision | None = None
        try:
            error, note, decision = await self._bind(pod, node_name)
        except Exception as exc:  # never leave the entry or its waiters behind
            log.exception("bind %s/%s to %s", namespace, name, node_name)
            error = f"internal error while binding to {node_name}: {exc!r}"
        finally:
            del self.in_flight[pod.uid]
            self.assumed.interrupted(pod.uid)
            if not entry.done.done():
                entry.done.set_result(error)
        return self._bind_done(pod, namespace, name, node_name, started, error, note=note, decision=decision)

    async def _pod_from_api(self, namespace: str, name: str, uid: str) -> Pod | None:
        """The pod as the API server has it, if it is the one with this UID (used for this bind
        only: the cache keeps following its watch). Names that no pod can have are not sent:
        they go into the request's path (``?watch=true``, ``../``)."""
        if not (_DNS_LABEL.fullmatch(namespace) and _DNS_SUBDOMAIN.fullmatch(name) and len(name) <= 253):
            return None
        try:
            found = parse_pod(await self.api.get_pod(namespace, name))
        except (ClusterAPIError, ObjectError):
            return None
        return found if found.uid == uid else None

    def _refuse_bind(self, pod: Pod | None, uid: str, node_name: str) -> str | None:
        if not self.may_bind():
            return "this dra-extender replica is not the leader"
        stale = self.cache_stale()
        if stale is not None:
            return f"the DRA extender's cache is stale ({stale}); not binding until it has caught up"
        # kube-scheduler always sends the pod's UID and only binds its own pods: refuse the rest.
        if not uid:
            return "refused: the request names no PodUID (kube-scheduler always sends one)"
        if pod is None:
            return "pod not found (neither in the DRA extender's cache nor in the API server)"
        if pod.uid != uid:
            return f"pod UID mismatch: the cache has {pod.uid}, the request names {uid}"
        if pod.scheduler_name not in self.config.scheduler_names:
            return (
                f"refused: the pod's schedulerName {pod.scheduler_name!r} is not one this extender "
                f"serves ({', '.join(sorted(self.config.scheduler_names))}; see --scheduler-name)"
            )
        if pod.node_name and pod.node_name != node_name:
            return f"pod is already bound to {pod.node_name}"
        return None

    async def _bind(self, pod: Pod, node_name: str) -> tuple[str, str | None, NodeDecision | None]:
        """(error, note, decision) of one bind."""
        node = self.state.nodes.get(node_name)
        if node is None and not pod.node_name:
            return f"node {node_name} not found", None, None
        unsettled = await self._settle_own_writes(pod)
        if unsettled is not None:
            return unsettled, None, None
        snapshot = self.snapshot()
        claims = self._claims_of(snapshot, pod)
        if pod.node_name:
            claims.extended = None  # bound already: its extended-resource claim is what it is
        if node is not None:
            decision = nominated.decide(
                snapshot, pod, claims, node, nominations=self._nominations(), timeout=self.config.node_timeout
            )
        else:  # a bound pod whose node is gone: only reservations of allocated claims can be repaired
            fits = not (claims.reason or claims.error)
            decision = NodeDecision(node_name, fits, claims.reason, claims.error)
        if not decision.fits:
            if self.config.features.device_binding:
                # Failed or timed out since the filter: free it now, or the retry finds it
                # unavailable everywhere and nothing requeues the pod (_deallocate_failed).
                now = self.wall_clock()
                for claim in claims.allocated:
                    if binding_problem(claim, now, self.config.binding_timeout) is not None:
                        await self._deallocate_failed(pod, claim.key)
            message = decision.error or decision.reason or "does not fit"
            return f"cannot bind to {node_name}: {message}", None, None
        written: list[tuple[ResourceClaim, AssumedWrite]] = []
        created = CreatedClaim()
        error = await self._write_claims(pod, node_name, claims, decision, written, created)
        if error:
            await self._release(pod, written, created)
            return await self._failed(pod, f"binding pod to {node_name} failed: {error}"), None, None
        if pod.node_name == node_name:
            # Bound already (a Binding whose answer was lost): the reservations are repaired.
            return "", "already bound", decision
        if claims.extended is not None and decision.extended is None:
            error = await self._clear_stale_mapping(pod)
            if error:
                await self._release(pod, written, created)
                return await self._failed(pod, f"binding pod to {node_name} failed: {error}"), None, None
        waits = self._awaits_binding_conditions(claims, decision)
        if waits:
            keys = [c.key for c in claims.ordered]
            if created.record is not None:
                keys.append(created.record.key)
            error, failed = await self._await_binding_conditions(pod, node_name, keys)
            if error:
                if failed is not None:
                    await self._release(pod, written, created)
                    await self._deallocate_failed(pod, failed)
                return await self._failed(pod, f"binding pod to {node_name}: {error}"), None, None
        return (*await self._create_binding(pod, node_name, written, created), decision)

    def _awaits_binding_conditions(self, claims: PodClaims, decision: NodeDecision) -> bool:
        """Some claim of the pod is (or is now being) allocated to a device with binding conditions."""
        if not self.config.features.device_binding:
            return False
        return any(claim_waits(c) for c in claims.allocated) or any(
            allocation_waits(a) for a in decision.allocations.values()
        )

    async def _await_binding_conditions(self, pod: Pod, node: str, keys: list[Key]) -> tuple[str, Key | None]:
        """Upstream PreBind's wait for binding conditions, within this bind's ``binding_wait``.

        ('', None): every condition is True, bind. (error, key): a failure condition or the
        binding timeout of that claim: give up. (error, None): not yet; the claims stay
        allocated and reserved for the pod (the devices may be being attached to the node), so
        kube-scheduler's retry comes back to this node and waits again, until the binding
        timeout counted from the allocation.
        """
        with contextlib.suppress(ClusterAPIError):
            await self.api.record_event(
                pod.raw,
                "BindingConditionsPending",
                f"waiting for binding conditions for device on node {node}",
                warning=False,
            )
        deadline = self.clock() + self.config.binding_wait
        while True:
            state = pod_binding_state(
                [self.state.claims.get(k) for k in keys], self.wall_clock(), self.config.binding_timeout
            )
            if state.ready:
                self.observer.binding_waited("success")
                return "", None
            if state.failed is not None:
                self.observer.binding_waited("timeout" if state.timed_out else "failed")
                return f"binding conditions failed: {state.failure}", state.failed.key
            if self.clock() >= deadline:
                self.observer.binding_waited("pending")
                return (
                    f"binding conditions not met after {self.config.binding_wait:g}s "
                    f"({'; '.join(state.pending)}); the claims stay allocated and reserved for the "
                    "pod and the next attempt waits again (up to the binding timeout of "
                    f"{self.config.binding_timeout:g}s from the allocation)",
                    None,
                )
            await asyncio.sleep(min(self.config.binding_poll, max(0.0, deadline - self.clock())))

    async def _deallocate_failed(self, pod: Pod, key: Key) -> None:
        """Free a claim whose binding failed or timed out before answering kube-scheduler, so
        its retry allocates afresh. Upstream leaves this to the next cycle's PostFilter, and its
        queueing hints requeue the pod when the claim changes; kube-scheduler registers no
        claim events for an extender, so a pod parked as unschedulable would wait for minutes.
        Read fresh (the driver's status write moved the claim on), and only while the claim is
        reserved for nobody but this pod."""
        namespace, name = key
        for _ in range(3):
            try:
                claim = parse_resource_claim(await self.api.get_claim(namespace, name))
            except (ClusterAPIError, ObjectError):
                return
            users = [e.get("uid") for e in claim.reserved_for]
            if claim.allocation is None or users not in ([], [pod.uid]):
                return
            try:
                await self.api.update_claim_status(deallocated(claim.raw))
            except ApiConflict:
                continue
            except ClusterAPIError as exc:
                log.info("not deallocating resourceclaim %s/%s: %s", namespace, name, exc)
                return
            log.info(
                "deallocated resourceclaim %s/%s: its binding conditions failed or timed out for pod %s/%s",
                namespace,
                name,
                pod.namespace,
                pod.name,
            )
            return

    async def _clear_stale_mapping(self, pod: Pod) -> str:
        """Device plugins serve the pod's extended resources here: its status must not name a
        claim an earlier, failed attempt created (and deleted); kubelet would wait for it."""
        status = pod.raw.get("status") if isinstance(pod.raw.get("status"), dict) else {}
        if not (status or {}).get("extendedResourceClaimStatus"):
            return ""
        try:
            await extended_writes.record_mappings(self.api, pod, None)
        except ClusterAPIError as exc:
            return f"clearing the pod's extendedResourceClaimStatus of an earlier attempt: {exc}"
        return ""

    async def _settle_own_writes(self, pod: Pod) -> str | None:
        """Send again the pod's earlier claim writes whose outcome is unknown (at most one lands)."""
        self.assumed.settle(self.state.claims, self.state.claims_seen_rv)
        for record in self.assumed:
            if record.pod_uid != pod.uid or record.state is not WriteState.UNKNOWN:
                continue
            claim = self.state.claims.get(record.key)
            if claim is None and record.creating:
                claim, problem = await self._read_created(record)
                if problem is not None:
                    return problem
            if claim is None:
                continue  # gone: settled with the next snapshot
            error = await self._write_claim(pod, claim, record.allocation, record, again=True)
            if error:
                return (
                    f"an earlier write of resourceclaim {claim.namespace}/{claim.name} for this pod "
                    f"is not settled: {error}"
                )
        return None

    async def _read_created(self, record: AssumedWrite) -> tuple[ResourceClaim | None, str | None]:
        """A claim this extender created that the cache does not show yet, read from the API server."""
        namespace, name = record.key
        try:
            claim = parse_resource_claim(await self.api.get_claim(namespace, name))
        except ApiNotFound:
            self.assumed.forget(record)  # deleted since: its write cannot land any more
            return None, None
        except (ClusterAPIError, ObjectError) as exc:
            return None, f"an earlier write of resourceclaim {namespace}/{name} is not settled: {exc}"
        if claim.uid != record.claim_uid:
            self.assumed.forget(record)
            return None, None
        return claim, None

    async def _write_claims(
        self,
        pod: Pod,
        node: str,
        claims: PodClaims,
        decision: NodeDecision,
        written: list[tuple[ResourceClaim, AssumedWrite]],
        created: CreatedClaim,
    ) -> str:
        """Claims in the pod's order, then its extended-resource claim (as upstream's PreBind);
        '' or why it stopped.

        Every claim is assumed before the first write is sent: the decision's devices are taken
        as one, so no other bind can get one of them while this one is writing the others.
        """
        todo = []
        seen: set[Key] = set()
        for claim in claims.ordered:
            if claim.reserved_for_uid(pod.uid) or claim.key in seen:
                continue  # a claim the pod lists twice is written once, with its first allocation
            seen.add(claim.key)
            allocation = decision.allocations.get(claim.name) if claim.allocation is None else None
            record = self.assumed.assume(claim, pod.uid, pod.key, node, allocation, self.clock())
            todo.append((claim, allocation, record))
        extended = decision.extended
        if extended is not None:
            key = (pod.namespace, er.claim_name(pod))
            allocation = decision.allocations[er.IN_MEMORY_NAME]
            created.record = self.assumed.assume_creation(
                key, pod.uid, pod.key, node, allocation, self.clock()
            )
        self.expected.arrived(pod.uid)  # its devices are taken: the next filter sees them
        for i, (claim, allocation, record) in enumerate(todo):
            error = await self._write_claim(pod, claim, allocation, record)
            if error:
                for _claim, _allocation, unsent in todo[i + 1 :]:
                    self.assumed.forget(unsent)
                if created.record is not None:
                    self.assumed.forget(created.record)
                return error
            written.append((claim, record))
        if extended is not None:
            return await self._write_extended(pod, extended, decision, created)
        return ""

    async def _write_extended(
        self, pod: Pod, extended: er.NodeExtendedClaim, decision: NodeDecision, created: CreatedClaim
    ) -> str:
        """Create (or find) the pod's extended-resource claim, allocate and reserve it, then record
        the container mappings in the pod's status (upstream bindClaim for the special claim)."""
        record = created.record
        assert record is not None
        allocation = decision.allocations[er.IN_MEMORY_NAME]
        body = er.claim_object(pod, extended.requests, name=record.key[1])
        try:
            claim, reused = await extended_writes.create_claim(self.api, body, pod)
        except ClaimWriteError as exc:
            self.observer.claim_created("failure")
            self.assumed.forget(record)  # a create takes no device
            return str(exc)
        self.observer.claim_created("reused" if reused else "success")
        self.assumed.created(record, claim)
        created.raw = claim.raw
        problem = extended_writes.reuse_problem(claim, extended.claim, allocation, pod)
        if problem is not None:
            self.assumed.forget(record)
            return problem
        if claim.allocation is not None:
            # Allocated already, to exactly these devices (reuse_problem): only reserve it. The
            # record keeps holding the devices until the cache shows the claim.
            record.allocation = None
        error = await self._write_claim(pod, claim, record.allocation, record)
        if error:
            return error
        if record.written is not None:
            created.raw = record.written.raw
        created.recorded = True
        try:
            await extended_writes.record_mappings(self.api, pod, claim.name, extended.mappings)
        except ClusterAPIError as exc:
            return f"recording the extended-resource claim in pod {pod.namespace}/{pod.name}'s status: {exc}"
        return ""

    async def _write_claim(
        self,
        pod: Pod,
        claim: ResourceClaim,
        allocation: dict[str, Any] | None,
        record: AssumedWrite,
        *,
        again: bool = False,
    ) -> str:
        """Write one claim; ``again``: the record's earlier write has an unknown outcome."""
        try:
            answer = await reserve_claim(
                self.api,
                claim,
                allocation,
                pod,
                sending=lambda rv: self.assumed.sending(record, rv),
                on_conflict=self.observer.conflict,
                pending_since=record.sent_on if again else None,
                allocated_at=rfc3339(self.wall_clock()) if self.config.features.device_binding else None,
            )
        except WriteOutcomeUnknown as exc:
            self.assumed.unknown(record)  # its devices stay taken until the cache shows the outcome
            return str(exc)
        except ClaimWriteError as exc:
            self.assumed.forget(record)
            return str(exc)
        self.assumed.written(record, answer)
        return ""

    async def _release(
        self, pod: Pod, written: list[tuple[ResourceClaim, AssumedWrite]], created: CreatedClaim
    ) -> None:
        """Undo this bind's claim writes, newest first; what cannot be undone is left as written.

        The extended-resource claim is deleted (upstream Unreserve): deleting releases its
        devices whether or not its status write landed.
        """
        if created.recorded:
            try:
                await extended_writes.record_mappings(self.api, pod, None)
            except ClusterAPIError as exc:
                # The next bind of the pod clears it (see _clear_stale_mapping).
                log.warning(
                    "clearing pod %s/%s's extendedResourceClaimStatus failed: %s",
                    pod.namespace,
                    pod.name,
                    exc,
                )
        if created.raw is not None:
            meta = created.raw.get("metadata") or {}
            try:
                # Its record stays until the watch shows the deletion: another finalizer could
                # keep the claim (and its allocation) around for a while.
                await extended_writes.delete_claim(self.api, created.raw)
            except ClusterAPIError as exc:
                # Owned by the pod: the next attempt's PostFilter deletes it, or the garbage
                # collector does when the pod goes away.
                log.warning(
                    "deleting resourceclaim %s/%s failed: %s", meta.get("namespace"), meta.get("name"), exc
                )
        for claim, record in reversed(written):
            if record.written is None:
                continue
            try:
                after = await release_claim(
                    self.api, record.written.raw, pod, allocated_here=record.allocation is not None
                )
            except ClusterAPIError as exc:
                # Still reserved for the (unbound) pod: a retry of the pod binds it, or the claim
                # controller releases it when the pod goes away.
                log.warning("releasing resourceclaim %s/%s failed: %s", claim.namespace, claim.name, exc)
                continue
            self.assumed.written(record, after)

    async def _create_binding(
        self, pod: Pod, node: str, written: list[tuple[ResourceClaim, AssumedWrite]], created: CreatedClaim
    ) -> tuple[str, str | None]:
        try:
            await self.api.bind_pod(pod.namespace, pod.name, pod.uid, node)
            return "", None
        except ClusterAPIError as exc:
            bound = await self._bound_to(pod, node)
            if bound:
                return "", "the Binding's answer was lost; the pod is bound"
            if outcome_unknown(exc) or bound is None:
                # The pod may be bound (now or when the Binding lands): never release its claims.
                self._binding_unknown[pod.uid] = self.clock()
                message = (
                    f"binding pod to {node}: outcome unknown ({exc}); its claims stay reserved "
                    "for it, a retry completes the bind"
                )
                return await self._failed(pod, message), None
            await self._release(pod, written, created)
            return await self._failed(pod, f"binding pod to {node} failed: {exc}"), None

    async def _bound_to(self, pod: Pod, node: str) -> bool | None:
        """Is the pod bound to ``node`` now, according to the API server (None: cannot tell)?"""
        try:
            current = await self.api.get_pod(pod.namespace, pod.name)
        except ClusterAPIError:
            return None
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        return meta.get("uid") == pod.uid and spec.get("nodeName") == node

    async def _failed(self, pod: Pod, message: str) -> str:
        with contextlib.suppress(ClusterAPIError):
            await self.api.record_event(pod.raw, "FailedBinding", message)
        return message

    # --- stale allocations (upstream PostFilter) ---------------------------------------------------

    def _deallocate_unavailable(
        self, snapshot: Snapshot, pod: Pod, claims: PodClaims, nodes: Sequence[Node]
    ) -> None:
        """No node fits: free one allocated claim that is unavailable somewhere (its nodeSelector,
        or its binding conditions failed or timed out) and used by nobody else, so the pod can be
        allocated afresh (upstream PostFilter; it picks one at random, we take the first in the
        pod's order).
        """
        if pod.node_name or pod.uid in self.in_flight or not self.may_bind() or self._binding_may_land(pod):
            return
        stale = claims.extended.existing if claims.extended is not None else None
        if stale is not None:
            # Filter rejected every node for it ("cannot schedule extended resource claim"),
            # before looking at any other claim: upstream PostFilter deletes it.
            if not any(r.pod_uid != pod.uid for r in self.assumed.of(stale.key)):
                self._spawn(self._delete_stale(pod, stale))
            return
        now = self.wall_clock()
        for claim in claims.allocated:
            # Filter's own test (nodeSelector, binding failure or timeout), as upstream's
            # unavailableClaims: unavailable on at least one candidate node.
            if all(snapshot.claim_unavailable(claim, n, now) is None for n in nodes):
                continue
            users = [e.get("uid") for e in claim.reserved_for]
            if users not in ([], [pod.uid]) or self.assumed.of(claim.key):
                continue
            self._spawn(self._deallocate(pod, claim))
            return

    def _spawn(self, work: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(work)
        except RuntimeError:  # no event loop (a direct, synchronous call): nothing to do
            work.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _binding_may_land(self, pod: Pod) -> bool:
        """A Binding of the pod went unanswered recently: it could still land (so its claims stay)."""
        now = self.clock()
        for uid, sent in list(self._binding_unknown.items()):
            if now - sent > BINDING_MAY_LAND:
                del self._binding_unknown[uid]
        return pod.uid in self._binding_unknown

    async def _still_unbound(self, pod: Pod) -> bool:
        """The API server (not the cache, which may be behind) shows this pod, not bound."""
        try:
            current = await self.api.get_pod(pod.namespace, pod.name)
        except ClusterAPIError:
            return False
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        return meta.get("uid") == pod.uid and not spec.get("nodeName")

    async def _delete_stale(self, pod: Pod, claim: ResourceClaim) -> None:
        where = f"resourceclaim {claim.namespace}/{claim.name}"
        if not await self._still_unbound(pod):
            return  # bound (or gone): its claim stays
        try:
            await extended_writes.delete_claim(self.api, claim.raw)
        except ClusterAPIError as exc:
            log.info("not deleting %s for pod %s/%s: %s", where, pod.namespace, pod.name, exc)
            return
        log.info(
            "deleted %s: the extended-resource claim of an earlier attempt for pod %s/%s",
            where,
            pod.namespace,
            pod.name,
        )

    async def _deallocate(self, pod: Pod, claim: ResourceClaim) -> None:
        where = f"resourceclaim {claim.namespace}/{claim.name}"
        if not await self._still_unbound(pod):
            return  # the cache is behind: the pod is bound (or gone), its claims stay
        try:
            await self.api.update_claim_status(deallocated(claim.raw))
        except ClusterAPIError as exc:
            log.info("not deallocating %s for pod %s/%s: %s", where, pod.namespace, pod.name, exc)
            return
        log.info(
            "deallocated %s: allocated to devices no candidate node of pod %s/%s can use, and "
            "reserved for no other pod",
            where,
            pod.namespace,
            pod.name,
        )

    def _bind_done(
        self,
        pod: Pod | None,
        namespace: str,
        name: str,
        node: str,
        started: float,
        error: str,
        *,
        note: str | None = None,
        decision: NodeDecision | None = None,
    ) -> str:
        self.observer.bound("success" if not error else "failure")
        devices = None
        if decision is not None and not error:
            devices = {
                claim: [f"{r['driver']}/{r['pool']}/{r['device']}" for r in a["devices"]["results"]]
                for claim, a in decision.allocations.items()
            }
        self._log(
            "bind",
            pod,
            started,
            pod_key=f"{namespace}/{name}",
            node=node,
            error=error or None,
            note=note,
            devices=devices,
        )
        return error

    # --- preemption ----------------------------------------------------------------------------------

    def preempt(self, pod: Pod, candidates: Mapping[str, Candidate]) -> dict[str, Candidate]:
        """The preempt verb (:func:`extender.scheduling.preemption.preempt` on the current snapshot)."""
        started = self.clock()
        snapshot = self.snapshot()
        answer = preemption.preempt(
            snapshot,
            pod,
            candidates,
            claims=self._claims_of(snapshot, pod),
            nominations=self._nominations(),
            timeout=self.config.node_timeout,
            budget=self.config.filter_budget,
            clock=self.clock,
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
        claims = self._claims_of(snapshot, pod)
        names = sorted(node_names) if node_names is not None else sorted(self.state.nodes)
        deadline = self.clock() + self.config.filter_budget
        nominations = self._nominations()
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
                    snapshot, pod, claims, node, nominations=nominations, timeout=self.config.node_timeout
                )
        return out

    def _assessor(self, snapshot: Snapshot, claims: PodClaims) -> Callable[[Node], Assessment]:
        """The snapshot's assessor, with nodes that just timed out for these claims remembered.

        A node whose allocation ran out of time is answered the same way for
        ``timeout_memo_seconds`` instead of spending the budget on it again at every retry.
        """
        assess = snapshot.assessor(claims, timeout=self.config.node_timeout)
        claims_key = claims.key()
        timeouts = self._timeouts
        ttl = self.config.timeout_memo_seconds

        def remembered(node: Node) -> Assessment:
            mine = timeouts.get(claims_key)  # the common case, none remembered: one lookup per node
            if mine is not None:
                found = mine.get(node.name)
                if found is not None:
                    if found[0] > self.clock():
                        return found[1]
                    del mine[node.name]
            answer = assess(node)
            if answer.timed_out:
                if sum(len(t) for t in timeouts.values()) >= MAX_REMEMBERED_TIMEOUTS:
                    self._expire_timeouts()
                    if sum(len(t) for t in timeouts.values()) >= MAX_REMEMBERED_TIMEOUTS:
                        timeouts.clear()
                timeouts.setdefault(claims_key, {})[node.name] = (self.clock() + ttl, answer)
            return answer

        return remembered

    def _remembered_timeouts(self, claims: PodClaims) -> bool:
        """Whether a node timed out for these claims a short while ago (expired ones dropped)."""
        mine = self._timeouts.get(claims.key())
        if mine is None:
            return False
        now = self.clock()
        for name in [n for n, (until, _) in mine.items() if until <= now]:
            del mine[name]
        if not mine:
            del self._timeouts[claims.key()]
        return bool(mine)

    def _expire_timeouts(self) -> None:
        now = self.clock()
        for key, mine in list(self._timeouts.items()):
            for name in [n for n, (until, _) in mine.items() if until <= now]:
                del mine[name]
            if not mine:
                del self._timeouts[key]

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
