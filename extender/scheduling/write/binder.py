"""The write path: what turns a bind decision into API writes, and what undoes them.

A bind decides again on the current snapshot (the same :class:`Snapshots` and pure functions
the filter uses: extenders have no CycleState between verbs) and gets a plan
(:mod:`extender.scheduling.decide.bind_plan`); then it assumes the devices in the tracker before
the first write (:mod:`extender.scheduling.inflight.assumed`), writes each claim under optimistic
concurrency (:mod:`extender.scheduling.write.claim_writes`), creates the pod's extended-resource
claim, waits for binding conditions (:mod:`extender.scheduling.decide.binding`), and sends the
Binding; a failure releases what it wrote. PostFilter's release of claims no node can use is
carried out here too: it is a write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from typing import Any

from extender.cluster.api import ApiNotFound, ClusterAPI, ClusterAPIError
from extender.cluster.state import ClusterState, Key
from extender.model.core import Pod, parse_pod
from extender.model.dra import ResourceClaim
from extender.model.errors import ObjectError
from extender.scheduling.config import EngineConfig, NoObserver, Observer
from extender.scheduling.decide import bind_plan, what_if
from extender.scheduling.decide.bind_plan import BindPlan
from extender.scheduling.decide.binding import pod_binding_state
from extender.scheduling.decide.decision import NodeDecision
from extender.scheduling.decide.post_filter import Release
from extender.scheduling.decide.stale_finalizers import stale_finalizers
from extender.scheduling.decision_log import DecisionLog
from extender.scheduling.inflight import catch_up
from extender.scheduling.inflight.assumed import AssumedWrite
from extender.scheduling.inflight.snapshots import Snapshots
from extender.scheduling.inflight.tracker import BindInFlight, Tracker
from extender.scheduling.preempt import nominated
from extender.scheduling.write import (
    bind_failures,
    extended_writes,
    pod_status_writes,
    post_filter,
    stale_claims,
)
from extender.scheduling.write.claim_writes import outcome_unknown
from extender.scheduling.write.pod_claims import CreatedClaim, PodClaimWrites

log = logging.getLogger("dra_extender.engine")

#: Kubernetes' name rules for namespaces (RFC 1123 labels) and pods (RFC 1123 subdomains).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class Binder:
    """Binds (upstream PreBind and Unreserve) and PostFilter's deallocations: the write room's
    entry. Decides again through :class:`Snapshots` and the pure functions; every piece of
    in-flight state it changes is the :class:`Tracker`'s."""

    def __init__(
        self,
        state: ClusterState,
        api: ClusterAPI,
        config: EngineConfig,
        tracker: Tracker,
        snapshots: Snapshots,
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
        log: DecisionLog,
        observer: Observer | None = None,
        fence: Callable[[], str | None] = lambda: None,
        cache_stale: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.state = state
        self.api = api
        self.config = config
        self.tracker = tracker
        self.snapshots = snapshots
        self.clock = clock
        self.wall_clock = wall_clock
        #: Records each bind's outcome in the decision log.
        self.log = log
        self.observer: Observer = observer or NoObserver()
        #: Why this replica may not write now (leader election: not the leader, or taking
        #: over), or None. The API client checks it before each write too.
        self.fence = fence
        #: Why the cache cannot be trusted for binding right now (a watch is down), or None.
        self.cache_stale = cache_stale
        #: The claim writes of each bind, and their undoing.
        self.writes = PodClaimWrites(
            state, api, config, tracker, self.observer, clock=clock, wall_clock=wall_clock
        )
        #: Background work started by decisions (deallocating stale claims).
        self._tasks: set[asyncio.Task[None]] = set()
        #: Claims whose finalizer protects nothing, and since when (:meth:`sweep_finalizers`).
        self._finalizer_seen: dict[Key, float] = {}

    def entries(self) -> dict[str, int]:
        """How many entries its maps hold (see :meth:`Tracker.entries`)."""
        return {"background_writes": len(self._tasks), "finalizers_watched": len(self._finalizer_seen)}

    def reconfigure(self, config: EngineConfig) -> None:
        """Write as ``config`` says from now on (another Kubernetes release read at start)."""
        self.config = config
        self.writes.config = config

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> str:
        """Allocate, write the claims, bind the pod. Returns '' or the error for kube-scheduler.

        However it ends, filters no longer wait for this bind (see :mod:`expected_binds`).
        """
        try:
            return await self._bind_pod(namespace, name, uid, node_name)
        finally:
            self.tracker.expected.arrived(uid)

    async def _bind_pod(self, namespace: str, name: str, uid: str, node_name: str) -> str:
        """:meth:`bind`.

        Whatever happens (an API failure, an unexpected exception, cancellation at shutdown), the
        bind's entry is removed and every concurrent duplicate gets the same answer; the claims
        are either reserved for the pod or released again, or (when a write's outcome is
        unknown) their devices stay taken until the cache shows the outcome.
        """
        started = self.clock()
        self.tracker.assumed.release_holds(uid)  # kept for this very bind: its own decision must not see them
        cached = self.state.pods.get((namespace, name))
        pod = self.tracker.seen.newest(cached, uid) or cached
        if uid and (pod is None or pod.uid != uid) and self.fence() is None and self.cache_stale() is None:
            # kube-scheduler's pod watch ran ahead of ours: it can bind a pod within milliseconds
            # of its creation (seen with a real kube-scheduler). The API server has it.
            pod = await self._pod_from_api(namespace, name, uid) or pod
        refused = self._refuse_bind(pod, uid, node_name)
        if refused is not None:
            return self._bind_done(pod, namespace, name, node_name, started, refused)
        assert pod is not None
        existing = self.tracker.binds.get(pod.uid)
        if existing is not None:
            if existing.node != node_name:
                return self._bind_done(
                    pod, namespace, name, node_name, started, f"pod is being bound to {existing.node}"
                )
            return await asyncio.shield(existing.done)  # the same bind is in progress: same answer
        entry = BindInFlight(pod.uid, pod.key, node_name, started, asyncio.get_running_loop().create_future())
        self.tracker.binds[pod.uid] = entry
        error = "the bind was interrupted (the DRA extender is shutting down)"
        note: str | None = None
        decision: NodeDecision | None = None
        try:
            error, note, decision = await self._bind(pod, node_name)
        except Exception as exc:  # never leave the entry or its waiters behind
            log.exception("bind %s/%s to %s", namespace, name, node_name)
            error = f"internal error while binding to {node_name}: {exc!r}"
        finally:
            self.tracker.bind_ended(pod.uid, failed=bool(error))
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
        fenced = self.fence()
        if fenced is not None:
            return f"this dra-extender replica may not bind: {fenced}"
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
        if pod.deleting and not pod.node_name:  # deleted after its filter: its Binding would fail
            return "pod is being deleted"
        return None

    async def _bind(self, pod: Pod, node_name: str) -> tuple[str, str | None, NodeDecision | None]:
        """(error, note, decision) of one bind: the plan is decided first on the current
        snapshot (:func:`bind_plan.plan`), then carried out."""
        node = self.state.nodes.get(node_name)
        if node is None and not pod.node_name:
            return f"node {node_name} not found", None, None
        await catch_up.claims_shown(
            self.state, pod, spec_claims=True, seconds=self.config.catch_up_wait, clock=self.clock
        )
        unsettled = await self.writes.settle_earlier(pod)
        if unsettled is not None:
            return unsettled, None, None
        # Reserve: decide again, with what nominations change on the node.
        snapshot = self.snapshots.current()
        claims = self.snapshots.claims_of(snapshot, pod)
        adjustments = nominated.adjustments(
            snapshot,
            pod,
            claims,
            [node_name],
            self.tracker.nominations(self.config),
            self.tracker.victims_of,
        )
        plan = bind_plan.plan(
            snapshot,
            pod,
            claims,
            node_name,
            node,
            adjustments.get(node_name, what_if.UNCHANGED),
            timeout=self.config.allocation_timeout,
            now=self.wall_clock(),
            binding_timeout=self.config.binding_timeout,
        )
        # PreBind: carry it out.
        return await self._carry_out(pod, node_name, plan)

    async def _carry_out(
        self, pod: Pod, node_name: str, plan: BindPlan
    ) -> tuple[str, str | None, NodeDecision | None]:
        decision = plan.decision
        if not plan.fits:
            for key in plan.stale_bindings:
                # Failed or timed out since the filter: free it now, so that kube-scheduler's
                # retry (a failed bind goes to back-off) allocates afresh at once.
                await stale_claims.deallocate_failed(self.api, pod, key)
            message = decision.error or decision.reason or "does not fit"
            return f"cannot bind to {node_name}: {message}", None, None
        written: list[tuple[ResourceClaim, AssumedWrite]] = []
        created = CreatedClaim()
        if self.config.features.node_allocatable_resources and not pod.node_name:
            # As kube-scheduler's assumed pod: counted before the writes (waiting filters go on).
            self.tracker.placing.add(pod, node_name, decision.node_allocatable, self.clock())
        error = await self.writes.write_all(pod, node_name, plan, written, created)
        if error:
            await self.writes.release(pod, written, created)
            return await self._failed(pod, f"binding pod to {node_name} failed: {error}"), None, None
        if pod.node_name == node_name:
            # Bound already (a Binding whose answer was lost): the reservations are repaired.
            return "", "already bound", decision
        if error := await self._record_node_allocatable(pod, decision, created):
            await self.writes.release(pod, written, created)
            return await self._failed(pod, f"binding pod to {node_name} failed: {error}"), None, None
        if plan.clears_extended_mapping:
            error = await extended_writes.clear_stale_mapping(self.api, pod)
            if error:
                await self.writes.release(pod, written, created)
                return await self._failed(pod, f"binding pod to {node_name} failed: {error}"), None, None
        if plan.awaits_binding:
            keys = list(plan.claim_keys)
            if created.record is not None:
                keys.append(created.record.key)
            with self.tracker.parked(pod.uid):
                error, failed = await self._await_binding_conditions(pod, node_name, keys)
            if error:
                if failed is not None:
                    await self.writes.release(pod, written, created)
                    await stale_claims.deallocate_failed(self.api, pod, failed)
                return await self._failed(pod, f"binding pod to {node_name}: {error}"), None, None
        return (*await self._create_binding(pod, node_name, written, created), decision)

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

    async def _record_node_allocatable(self, pod: Pod, decision: NodeDecision, created: CreatedClaim) -> str:
        """The node resources the pod's claims stand for go into its status before the Binding
        (none: an earlier attempt's are cleared); '' or why not."""
        if not decision.node_allocatable and not (
            self.config.features.node_allocatable_resources and pod.node_allocatable
        ):
            return ""
        created.node_allocatable = True
        name = created.record.key[1] if created.record is not None else None  # the extended claim's
        return await pod_status_writes.record_node_allocatable(self.api, pod, decision.node_allocatable, name)

    async def _create_binding(
        self, pod: Pod, node: str, written: list[tuple[ResourceClaim, AssumedWrite]], created: CreatedClaim
    ) -> tuple[str, str | None]:
        if pod.uid in self.state.deleted_pods:  # deleted while its claims were written
            await self.writes.release(pod, written, created)
            return await self._failed(pod, "pod is being deleted"), None
        try:
            await self.api.bind_pod(pod.namespace, pod.name, pod.uid, node)
            return "", None
        except ClusterAPIError as exc:
            bound = await self._bound_to(pod, node)
            if bound:
                return "", "the Binding's answer was lost; the pod is bound"
            if outcome_unknown(exc) or bound is None:
                # The pod may be bound (now or when the Binding lands): never release its claims.
                self.tracker.binding_unanswered(pod.uid)
                message = (
                    f"binding pod to {node}: outcome unknown ({exc}); its claims stay reserved "
                    "for it, a retry completes the bind"
                )
                return await self._failed(pod, message), None
            await self.writes.release(pod, written, created)
            return await self._failed(pod, f"binding pod to {node} failed: {exc}"), None

    async def _bound_to(self, pod: Pod, node: str) -> bool | None:
        """Is the pod bound to ``node`` now, according to the API server (None: cannot tell)?"""
        try:
            current = await self.api.get_pod(pod.namespace, pod.name)
        except ApiNotFound:
            return False  # deleted: no Binding of it can land (a pod is never re-created by UID)
        except ClusterAPIError:
            return None
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        return meta.get("uid") == pod.uid and spec.get("nodeName") == node

    async def _failed(self, pod: Pod, message: str) -> str:
        with contextlib.suppress(ClusterAPIError):
            await self.api.record_event(pod.raw, "FailedBinding", message)
        return message

    # --- stale allocations (upstream PostFilter) ---------------------------------------------------

    def post_filter(self, pod: Pod, release: Release) -> None:
        """PostFilter's write (:mod:`post_filter`), in the background: the filter's answer does
        not wait for it. Not from a replica that may not write."""
        if self.fence() is not None:
            return
        group = release.group

        def group_busy() -> bool:
            return group is not None and self.tracker.group_busy(self.state, pod, group)

        self._spawn(post_filter.carry_out(self.api, pod, release, group_busy))

    async def sweep_finalizers(self, grace: float, most: int = 20) -> int:
        """Remove delete protection that protects nothing, left by a bind deposed between its
        finalizer and its allocation (:mod:`~extender.scheduling.decide.stale_finalizers`):
        ``most`` claims a call, only while this replica may write and trusts its cache. How
        many were removed."""
        if self.fence() is not None or self.cache_stale() is not None:
            self._finalizer_seen.clear()  # a new leader starts counting afresh
            return 0
        stale = stale_finalizers(
            self.state,
            lambda key: bool(self.tracker.assumed.of(key)),
            self.clock(),
            self._finalizer_seen,
            grace,
        )
        removed = 0
        for claim in stale[:most]:
            removed += await stale_claims.drop_finalizer(self.api, claim)
        return removed

    async def background_done(self) -> None:
        """Wait for the background writes started so far (PostFilter's; tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, work: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(work)
        except RuntimeError:  # no event loop (a direct, synchronous call): nothing to do
            work.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
        if error:
            self.observer.bound("failure", bind_failures.reason(error))
        else:
            self.observer.bound("success")
        devices = None
        if decision is not None and not error:
            devices = {
                claim: [f"{r['driver']}/{r['pool']}/{r['device']}" for r in a["devices"]["results"]]
                for claim, a in decision.allocations.items()
            }
        self.log(
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
