"""The extender's verbs, read like the in-tree DynamicResources plugin's hooks: filter
(PreFilter, Filter, and PostFilter's write), prioritize (Score), preempt, bind (PreBind:
:mod:`extender.scheduling.write`), explain.

Each verb takes a snapshot from :class:`~extender.scheduling.inflight.snapshots.Snapshots`,
decides with the pure rooms (:mod:`~extender.scheduling.decide`,
:mod:`~extender.scheduling.preempt`) and changes in-flight state only through the
:class:`~extender.scheduling.inflight.tracker.Tracker`. No HTTP here, and no writes but the
binder's. :mod:`extender.scheduling.assembly` builds an engine with its parts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import chain, islice

from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.model.core import Node, Pod
from extender.model.labels import Labels
from extender.scheduling.config import EngineConfig, NoObserver, Observer
from extender.scheduling.decide import post_filter, what_if
from extender.scheduling.decide.answers import FilterResult, answer_nodes, cut_short, reasons, split_apart
from extender.scheduling.decide.claim_hints import ClaimHints, with_claim_hints
from extender.scheduling.decide.decision import NOT_EVALUATED, Assessment, NodeDecision
from extender.scheduling.decide.last_filter import LastFilter
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.scores import MIN_SCORE, NodeScores, score_nodes
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.decide.timeout_memo import TimeoutMemo
from extender.scheduling.decide.what_if import NodeAdjustment
from extender.scheduling.decision_log import DecisionLog
from extender.scheduling.hint_line import Hints, NoHints, with_hint
from extender.scheduling.inflight import catch_up, holds
from extender.scheduling.inflight.snapshots import Snapshots
from extender.scheduling.inflight.tracker import Tracker
from extender.scheduling.preempt import nominated, victims
from extender.scheduling.preempt.victims import Candidate
from extender.scheduling.write.binder import Binder

log = logging.getLogger("dra_extender.engine")

#: Per-node reasons a filter's decision entry keeps (log line, /debug/decisions); the rest counted.
LOGGED_REASONS = 20


class Engine:
    def __init__(
        self,
        state: ClusterState,
        cel: CelEnvironment,
        config: EngineConfig,
        tracker: Tracker,
        snapshots: Snapshots,
        binder: Binder,
        log: DecisionLog,
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        observer: Observer | None = None,
        hints: Hints | None = None,
    ) -> None:
        self.state = state
        self.cel = cel
        self.config = config
        #: In-flight state (what is being bound, assumed writes, expected binds, nominations).
        self.tracker = tracker
        #: The view every decision is made on: the cache with the tracker's writes over it.
        self.snapshots = snapshots
        #: The write room: binds and PostFilter's writes.
        self.binder = binder
        #: One entry per verb answered (``/debug/decisions``, the decision log lines).
        self.log = log
        self.clock = clock
        #: Seconds since the epoch (binding timeouts count from the claims' timestamps).
        self.wall_clock = wall_clock
        self.observer: Observer = observer or NoObserver()
        self.hints: Hints = hints or NoHints()  # make room's hint line, planned off filter's path
        self.claim_hints = ClaimHints(clock)  # claims naming what no driver publishes: lines for reasons
        #: (claims, node) -> an assessment that ran out of time, remembered for a short while.
        self._timeouts = TimeoutMemo(clock, lambda: self.config.timeout_memo_seconds)
        #: Pods whose claims a filter waited for in vain (not waited for again for a while).
        self._stuck = catch_up.Stuck(clock)
        #: The last filter's answers for the nodes it passed, for the prioritize that follows.
        self._last_filter: LastFilter | None = None

    def reconfigure(self, config: EngineConfig) -> None:
        """Replace the configuration (on the engine's loop), for decisions and writes alike."""
        self.snapshots.reconfigure(config)
        self.binder.reconfigure(config)
        self.hints.reconfigure(config)
        self.config = config

    def entries(self) -> dict[str, int]:
        """How many entries each map of in-flight state holds, by map: the tracker's, the
        binder's and the verbs' own memories (``dra_extender_in_flight_entries``)."""
        return {
            **self.tracker.entries(),
            **self.binder.entries(),
            "timed_out_claim_sets": len(self._timeouts),
            "claims_waited_in_vain": len(self._stuck),
            "make_room_hints": self.hints.entries(),
            "claim_hints": len(self.claim_hints),
        }

    def snapshot(self) -> Snapshot:
        """The snapshot a decision would be made on now (views and benchmarks read it)."""
        return self.snapshots.current()

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

    def _claim_hint_lines(self, snapshot: Snapshot, claims: PodClaims) -> list[str]:
        try:  # none when they fail: a hint never turns an answer into an error
            return self.claim_hints.lines(snapshot.state, snapshot.cel, claims.to_allocate)
        except Exception:
            log.exception("claim hints failed; the answer goes without them")
            return []

    def filter(
        self, pod: Pod, node_names: Sequence[str], nodes: Mapping[str, Node] | None = None
    ) -> FilterResult:
        """The in-tree plugin's PreFilter, Filter (per node) and PostFilter, in that order.
        ``nodes``: the Node records as the request sent them; None means the cached ones."""
        started = self.clock()
        self.hints.touch()  # the background planner keeps off the GIL meanwhile
        self.tracker.seen.remember(pod)
        self.tracker.assumed.release_holds(pod.uid)  # tried again: kube-scheduler did not bind it
        result = FilterResult()
        lookup = nodes if nodes is not None else self.state.nodes
        # PreFilter: the pod's claims, resolved on the snapshot.
        snapshot = self.snapshots.current()
        claims = self.snapshots.claims_of(snapshot, pod)
        if claims.empty:
            result.passed = node_names if isinstance(node_names, list) else list(node_names)
            self.log("filter", pod, started, passed=len(result.passed), note="no resource claims")
            self.observer.filtered(len(result.passed), 0, False)
            return result
        # Filter: one answer per node, with what nominations change where they are.
        adjustments = self._adjustments(snapshot, pod, claims, node_names)
        groups, answers = self._answers(snapshot, claims, node_names, nodes, adjustments, started)
        passed_groups = self._sort_answers(result, node_names, groups, answers)
        self._last_filter = None
        if nodes is None and not adjustments and not result.error and result.passed:
            self._last_filter = LastFilter(
                pod.uid,
                claims.key(),
                result.passed,
                passed_groups,
                {g: a for g, a in answers.items() if a.fits},  # the passed nodes' groups
            )
        # Where evicting lower-priority pods would make room: Unschedulable, not Unresolvable.
        if (
            self.config.device_preemption
            and result.unresolvable
            and not result.error
            and victims.may_preempt(self.state, pod, claims)
        ):
            # A node whose allocation ran out of time is not tried again with fewer devices in
            # use: it would likely spend the budget the same way.
            group_of = {
                name: group
                for name, group in zip(node_names, groups, strict=True)
                if name in result.unresolvable and not answers[group].timed_out
            }
            found = victims.where_it_may_help(
                snapshot,
                pod,
                claims,
                {name: lookup[name] for name in group_of if name in lookup},
                nominations=self.tracker.nominations(self.config),
                timeout=self.config.allocation_timeout,
                deadline=started + self.config.filter_budget,
                clock=self.clock,
                groups=group_of,
                adjustments=adjustments,
            )
            for name, addition in found.items():
                result.failed[name] = result.unresolvable.pop(name) + addition
        if not result.passed and claims.allocates and claims.reason is None:
            if not result.error:
                self.hints.ask(pod, node_names)  # no node fits: a plan in the background; an earlier one's:
                with_hint(self.hints.hint(pod), result.unresolvable, result.failed)
            with_claim_hints(self._claim_hint_lines(snapshot, claims), result)
        if result.passed:
            # In flight: a bind may follow (filters wait for it); a group member passed.
            self.hints.drop(pod.uid)  # a plan made while no node fitted is stale: nothing moves for it
            if claims.allocates:
                self.tracker.expected.expect(pod.uid)
            if pod.pod_group and self.config.features.workload_resource_claims:
                self.tracker.groups.passed(pod.namespace, pod.pod_group, self.clock())
        elif not result.error and (
            claims.allocated
            or (claims.extended and claims.extended.existing)
            or (pod.pod_group and self.config.features.workload_resource_claims)
        ):
            # PostFilter: no node fits; release what upstream's PostFilter would (a write),
            # leaving alone what is in flight for the pod.
            in_flight = self.tracker.for_post_filter(self.state, self.config, pod, claims)
            release = post_filter.release(
                self.state,
                self.config,
                snapshot,
                pod,
                claims,
                [lookup[n] for n in node_names if n in lookup],
                in_flight,
                now=self.wall_clock(),
            )
            if release is not None:
                self.binder.post_filter(pod, release)
        self._filtered(pod, result, lookup, started, answers)
        return result

    def _sort_answers(
        self,
        result: FilterResult,
        node_names: Sequence[str],
        groups: Sequence[Hashable],
        answers: Mapping[Hashable, Assessment],
    ) -> list[Hashable]:
        """Filter's answers into the result: passed, Unresolvable, or Unschedulable (nodes not
        reached, node resources that evicting pods could free), or the pod's error. Returns
        the groups of the nodes that passed, in order."""
        result.error = next((a.error for a in answers.values() if a.error is not None), "")
        for cause in cut_short(answers.values(), bool(result.error)):
            self.observer.filter_cut_short(cause)
        if result.error:
            return []
        if all(a.fits for a in answers.values()):
            # No per-node pass when every node fits, not even a copy: copying a list touches
            # every element (5,000 names: 8% of the server's CPU at 5,000 x 8).
            result.passed = node_names if isinstance(node_names, list) else list(node_names)
            return groups if isinstance(groups, list) else list(groups)
        # In C (scans, slices, compress): per-node Python work was a third of a 2000-node filter.
        result.passed, passed_groups, failing, failing_groups = split_apart(node_names, groups, answers)
        result.failed, result.unresolvable = reasons(failing, failing_groups, answers)
        return passed_groups

    def _filtered(
        self,
        pod: Pod,
        result: FilterResult,
        lookup: Mapping[str, Node],
        started: float,
        answers: Mapping[Hashable, Assessment],
    ) -> None:
        """The filter's metrics and decision log entry."""
        # Names the cache does not know are not counted: a caller cannot inflate the counter.
        # Such a name is a group of its own (answer_nodes), so the groups are counted, not the
        # names: at 5,000 full nodes one lookup per rejected name was 7% of the extender's CPU.
        unknown = (
            sum(1 for g in answers if isinstance(g, str) and g not in lookup and g in result.unresolvable)
            if result.unresolvable
            else 0
        )
        rejected = len(result.unresolvable) + len(result.failed)
        self.observer.filtered(len(result.passed), rejected - unknown, bool(result.error))
        self.log(
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

    def _answers(
        self,
        snapshot: Snapshot,
        claims: PodClaims,
        names: Sequence[str],
        nodes: Mapping[str, Node] | None,
        adjustments: Mapping[str, NodeAdjustment],
        started: float,
        *,
        stop_at_error: bool = True,
    ) -> tuple[list[Hashable], dict[Hashable, Assessment]]:
        """Per node name its group, and one answer per group (kube-scheduler's Filter per node:
        :func:`~extender.scheduling.decide.answers.answer_nodes`). Nodes are grouped unless the
        request sent its own Node records or these claims timed out a moment ago (those are
        remembered by name)."""
        return answer_nodes(
            snapshot,
            claims,
            names,
            nodes if nodes is not None else self.state.nodes,
            self._assessor(snapshot, claims),
            grouped=nodes is None and not self._timeouts.remembers(claims.key()),
            adjustments=adjustments,
            deadline=started + self.config.filter_budget,
            clock=self.clock,
            timeout=self.config.allocation_timeout,
            stop_at_error=stop_at_error,
        )

    # --- prioritize ----------------------------------------------------------------------------

    def prioritize(
        self, pod: Pod, node_names: Sequence[str], nodes: Mapping[str, Node] | None = None
    ) -> NodeScores:
        started = self.clock()
        self.hints.touch()
        pod = catch_up.with_statuses(pod, self.state.pods.get(pod.key))  # as filter judged it
        self.tracker.assumed.release_holds(pod.uid)
        snapshot = self.snapshots.current()
        claims = self.snapshots.claims_of(snapshot, pod)
        if claims.empty or not claims.allocates or claims.reason or claims.error:
            return NodeScores(node_names, [MIN_SCORE] * len(node_names))
        self.tracker.expected.expect(pod.uid)  # the bind follows the scores
        adjustments = self._adjustments(snapshot, pod, claims, node_names)
        reused = (
            self._last_filter.for_prioritize(pod.uid, claims.key(), node_names)
            if self._last_filter is not None and nodes is None and not adjustments
            else None
        )
        groups: Sequence[Hashable]
        answers: Mapping[Hashable, Assessment]
        if reused is not None:
            groups, answers = reused
        else:
            groups, answers = self._answers(
                snapshot, claims, node_names, nodes, adjustments, started, stop_at_error=False
            )
        judged = {g: a for g, a in answers.items() if a is not NOT_EVALUATED}
        scores = dict.fromkeys(answers, MIN_SCORE)  # past the budget: 0
        scores.update(score_nodes(judged, self.config.score_policy, self.config.score_tie_break))
        answer = NodeScores(node_names, list(map(scores.__getitem__, groups)))
        if self.config.hold_seconds > 0:
            node = holds.best_alone(answer, nodes if nodes is not None else self.state.nodes)
            if node is not None and holds.may_hold(claims):
                adjustment = self._adjustments(snapshot, pod, claims, [node.name], releasing=False)
                decision = what_if.decide(
                    snapshot,
                    claims,
                    node,
                    adjustment.get(node.name, what_if.UNCHANGED),
                    timeout=self.config.allocation_timeout,
                )
                holds.hold(self.tracker.assumed, pod, claims, node.name, decision, self.clock())
        self.log("prioritize", pod, started, nodes=len(node_names), best=max(scores.values(), default=0))
        return answer

    # --- bind (the write path: binder.py) -------------------------------------------------------

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> str:
        """Allocate, write the claims, bind the pod. Returns '' or the error for kube-scheduler."""
        error = await self.binder.bind(namespace, name, uid, node_name)
        if not error:
            self.hints.forget(uid)
        return error

    # --- the verbs as kube-scheduler's requests reach them -------------------------------------------

    async def filter_request(
        self, pod: Pod, node_names: Sequence[str], labels_by_name: Mapping[str, Mapping[str, str]] | None
    ) -> FilterResult:
        """The filter verb in its order: wait (briefly) for the pod's claims to reach the cache
        and for the binds kube-scheduler has already decided (their devices are taken), then
        :meth:`filter`. ``labels_by_name``: the nodes as a full NodeList sent them, if it did."""
        if pod.claims:  # claims not created yet, or that the cache does not show yet
            pod = await self.caught_up(pod)
        await self.tracker.expected.settle(pod.uid)
        nodes = self.nodes_as_sent(labels_by_name) if labels_by_name is not None else None
        return self.filter(pod, node_names, nodes)

    async def preempt_request(self, pod: Pod, candidates: Mapping[str, Candidate]) -> dict[str, Candidate]:
        """The preempt verb in its order: the pod once its claims are in the cache, then
        :meth:`preempt`."""
        return self.preempt(await self.preemptor(pod), candidates)

    async def caught_up(self, pod: Pod) -> Pod:
        """Before a filter: the pod to filter, once its claims are in the cache
        (:func:`catch_up.for_filter`)."""
        return await catch_up.for_filter(
            self.state, pod, self._stuck, seconds=self.config.catch_up_wait, clock=self.clock
        )

    async def preemptor(self, pod: Pod) -> Pod:
        """Before a preemption: the pod once its claims are in the cache (:func:`catch_up.created`)."""
        return await catch_up.created(
            self.state, self.tracker.seen, pod, seconds=self.config.catch_up_wait, clock=self.clock
        )

    # --- preemption ----------------------------------------------------------------------------------

    def preempt(self, pod: Pod, candidates: Mapping[str, Candidate]) -> dict[str, Candidate]:
        """The preempt verb (:func:`extender.scheduling.preempt.victims.preempt` on the current snapshot)."""
        started = self.clock()
        self.hints.touch()
        self.tracker.seen.remember(pod)
        snapshot = self.snapshots.current()
        answer = victims.preempt(
            snapshot,
            pod,
            candidates,
            claims=self.snapshots.claims_of(snapshot, pod),
            nominations=self.tracker.nominations(self.config),
            timeout=self.config.allocation_timeout,
            budget=self.config.filter_budget,
            clock=self.clock,
            pdb_selectors_as_policy_v1=self.config.release.pdb_selectors_as_policy_v1,
        )
        cached = self.state.pods.get(pod.key)
        if answer and cached is not None and cached.uid == pod.uid and cached.priority == pod.priority:
            # kube-scheduler nominates one of these nodes: what the pod keeps there (nominated.py).
            # Only for the pod the cache knows: a made-up request cannot make devices be kept.
            self.tracker.preempted.remember(pod.uid, {node: c.uids for node, c in answer.items()})
        self.log(
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
        snapshot = self.snapshots.current()
        claims = self.snapshots.claims_of(snapshot, pod)
        names = sorted(node_names) if node_names is not None else sorted(self.state.nodes)
        deadline = self.clock() + self.config.filter_budget
        adjustments = self._adjustments(snapshot, pod, claims, names, releasing=False)
        out = {}
        for name in names:
            node = self.state.nodes.get(name)
            if node is None:
                continue
            if self.clock() > deadline:
                reason = "not evaluated: the DRA extender's time budget for this view ran out"
                out[name] = NodeDecision(name, False, reason=reason, timed_out=True)
            else:
                out[name] = what_if.decide(
                    snapshot,
                    claims,
                    node,
                    adjustments.get(name, what_if.UNCHANGED),
                    timeout=self.config.allocation_timeout,
                )
        return out

    def _adjustments(
        self, snapshot: Snapshot, pod: Pod, claims: PodClaims, names: Sequence[str], *, releasing: bool = True
    ) -> dict[str, NodeAdjustment]:
        """What nominations change on these nodes for the pod (:func:`nominated.adjustments`),
        with what this replica knows: the victims its preempt verb named, the binds in flight."""
        return nominated.adjustments(
            snapshot,
            pod,
            claims,
            names,
            self.tracker.nominations(self.config),
            self.tracker.victims_of,
            releasing=releasing,
        )

    def _assessor(self, snapshot: Snapshot, claims: PodClaims) -> Callable[[Node], Assessment]:
        """The snapshot's assessor, with nodes that just timed out for these claims remembered
        (:mod:`extender.scheduling.decide.timeout_memo`)."""
        assess = snapshot.assessor(claims, timeout=self.config.allocation_timeout)
        return self._timeouts.wrap(assess, claims.key())
