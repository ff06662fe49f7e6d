"""The writes of one bind's claims (upstream PreBind's ``bindClaim`` and Unreserve): each claim
assumed in the tracker before the first is sent, written under optimistic concurrency, the
pod's extended-resource claim created and recorded, and what was written undone newest first
when the bind fails. A write whose outcome is unknown keeps its devices taken (the tracker's
record) until the cache shows what became of it, and is sent again by the pod's next bind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from extender.cluster.api import ApiNotFound, ClusterAPI, ClusterAPIError
from extender.cluster.state import ClusterState
from extender.model.core import Pod
from extender.model.dra import ResourceClaim, parse_resource_claim
from extender.model.errors import ObjectError
from extender.model.timestamps import rfc3339
from extender.scheduling.config import EngineConfig, Observer
from extender.scheduling.decide.bind_plan import BindPlan, ExtendedClaim, taken_meanwhile
from extender.scheduling.inflight import catch_up
from extender.scheduling.inflight.assumed import AssumedWrite, WriteState, taken_by_others
from extender.scheduling.inflight.tracker import Tracker
from extender.scheduling.write import extended_writes, pod_status_writes
from extender.scheduling.write.claim_writes import (
    ClaimWriteError,
    WriteOutcomeUnknown,
    group_reservation_holds,
    release_claim,
    reserve_claim,
)

log = logging.getLogger("dra_extender.engine")


@dataclass(slots=True)
class CreatedClaim:
    """The extended-resource claim of one bind: its record, and the object once created or found."""

    record: AssumedWrite | None = None
    raw: dict[str, Any] | None = None
    #: The pod's status was (maybe) patched to name the claim: a failed bind takes that back.
    recorded: bool = False
    #: The pod's ``nodeAllocatableResourceClaimStatuses`` were (maybe) recorded by this bind:
    #: a failed bind clears them (upstream Unreserve).
    node_allocatable: bool = False


class PodClaimWrites:
    """The claim writes of the binds of one binder (it hands over its configuration on changes)."""

    def __init__(
        self,
        state: ClusterState,
        api: ClusterAPI,
        config: EngineConfig,
        tracker: Tracker,
        observer: Observer,
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        self.state = state
        self.api = api
        self.config = config
        self.tracker = tracker
        self.observer = observer
        self.clock = clock
        self.wall_clock = wall_clock

    async def settle_earlier(self, pod: Pod) -> str | None:
        """Send again the pod's earlier claim writes whose outcome is unknown (at most one lands)."""
        self.tracker.settle(self.state, self.config.hold_seconds)
        for record in self.tracker.assumed.of_pod(pod.uid):
            if record.state is not WriteState.UNKNOWN:
                continue
            claim = self.state.claims.get(record.key)
            if claim is None and record.creating:
                claim, problem = await self._read_created(record)
                if problem is not None:
                    return problem
            if claim is None:
                continue  # gone: settled with the next snapshot
            if record.devices is not None and claim.allocation is None:
                taken = taken_by_others(self.state.claims.values(), record.key, record.devices)
                if taken:
                    # The cache shows the claim as the write found it and another claim holding
                    # its devices: a later leader allocated them, having waited out this write
                    # (and the store fence refuses it if it arrives now). Sending it again would
                    # give those devices twice: forget it, and the bind decides afresh.
                    self.tracker.assumed.forget(record)
                    continue
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
            self.tracker.assumed.forget(record)  # deleted since: its write cannot land any more
            return None, None
        except (ClusterAPIError, ObjectError) as exc:
            return None, f"an earlier write of resourceclaim {namespace}/{name} is not settled: {exc}"
        if claim.uid != record.claim_uid:
            self.tracker.assumed.forget(record)
            return None, None
        return claim, None

    async def write_all(
        self,
        pod: Pod,
        node: str,
        plan: BindPlan,
        written: list[tuple[ResourceClaim, AssumedWrite]],
        created: CreatedClaim,
    ) -> str:
        """The plan's claims in the pod's order, then its extended-resource claim (as upstream's
        PreBind); '' or why it stopped.

        Every claim is assumed before the first write is sent: the decision's devices are taken
        as one, so no other bind can get one of them while this one is writing the others.
        Claims reserved for the pod's group already are read fresh before they are relied on;
        claims a preemption is releasing hold some of the devices: nothing is written until the
        cache shows them released.
        """
        todo = [
            (
                w.claim,
                w.allocation,
                self.tracker.assumed.assume(
                    w.claim, pod.uid, pod.key, node, w.allocation, self.clock(), w.consumer
                ),
            )
            for w in plan.writes
        ]
        extended = plan.extended
        if extended is not None:
            created.record = self.tracker.assumed.assume_creation(
                (pod.namespace, extended.name), pod.uid, pod.key, node, extended.allocation, self.clock()
            )
        self.tracker.expected.arrived(pod.uid)  # its devices are taken: the next filter sees them
        error = await self._before_writing(pod, plan)
        if not error and plan.releasing:  # it waited: another writer may have taken a device
            error = taken_meanwhile(self.state.claims, plan) or ""
        if error:
            self._forget([record for _claim, _allocation, record in todo], created)
            return error
        for i, (claim, allocation, record) in enumerate(todo):
            error = await self._write_claim(pod, claim, allocation, record)
            if error:
                self._forget([unsent for _claim, _allocation, unsent in todo[i + 1 :]], created)
                return error
            written.append((claim, record))
        if extended is not None:
            return await self._create_extended(pod, extended, created)
        return ""

    async def _before_writing(self, pod: Pod, plan: BindPlan) -> str:
        """'' once the claims the plan relies on hold: its group's reservations (read fresh) and
        the releases of its preemption's victims' claims (the cache shows them)."""
        for claim in plan.reserved_for_group:
            assert pod.pod_group is not None
            if problem := await group_reservation_holds(self.api, claim, pod.pod_group):
                return problem
        if not plan.releasing:
            # Nothing to wait for: parking would only leave a few microseconds on the bind's
            # record, and one parked bind makes bind pressure recount every bind in flight on
            # each filter and bind (4% of the extender's CPU at 100 x 8, issue 54).
            return ""
        with self.tracker.parked(pod.uid):
            return await catch_up.released(
                self.state, plan.releasing, seconds=self.config.release_wait, clock=self.clock
            )

    def _forget(self, unsent: Sequence[AssumedWrite], created: CreatedClaim) -> None:
        """The records of writes that will not be sent (their devices are free again)."""
        for record in unsent:
            self.tracker.assumed.forget(record)
        if created.record is not None:
            self.tracker.assumed.forget(created.record)

    async def _create_extended(self, pod: Pod, extended: ExtendedClaim, created: CreatedClaim) -> str:
        """Create (or find) the pod's extended-resource claim, allocate and reserve it, then record
        the container mappings in the pod's status (upstream bindClaim for the special claim)."""
        record = created.record
        assert record is not None
        try:
            claim, reused = await extended_writes.create_claim(self.api, extended.body, pod)
        except ClaimWriteError as exc:
            self.observer.claim_created("failure")
            self.tracker.assumed.forget(record)  # a create takes no device
            return str(exc)
        self.observer.claim_created("reused" if reused else "success")
        self.tracker.assumed.created(record, claim)
        created.raw = claim.raw
        problem = extended_writes.reuse_problem(claim, extended.node.claim, extended.allocation, pod)
        if problem is not None:
            self.tracker.assumed.forget(record)
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
            await extended_writes.record_mappings(self.api, pod, claim.name, extended.node.mappings)
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
                sending=lambda rv: self.tracker.assumed.sending(record, rv),
                on_conflict=self.observer.conflict,
                pending_since=record.sent_on if again else None,
                allocated_at=rfc3339(self.wall_clock()) if self.config.features.device_binding else None,
                consumer=record.consumer,
            )
        except WriteOutcomeUnknown as exc:
            self.tracker.assumed.unknown(record)  # its devices stay taken until the cache shows the outcome
            return str(exc)
        except ClaimWriteError as exc:
            self.tracker.assumed.forget(record)
            return str(exc)
        self.tracker.assumed.written(record, answer, claim)
        if record.written is not None:  # the watch brings it back: stored as parsed here
            self.state.answered(record.written)
        return ""

    async def release(
        self, pod: Pod, written: list[tuple[ResourceClaim, AssumedWrite]], created: CreatedClaim
    ) -> None:
        """Undo this bind's claim writes, newest first; what cannot be undone is left as written.

        The extended-resource claim is deleted (upstream Unreserve): deleting releases its
        devices whether or not its status write landed.
        """
        if created.node_allocatable:
            await pod_status_writes.clear_node_allocatable(self.api, pod)
        if created.recorded:
            try:
                await extended_writes.record_mappings(self.api, pod, None)
            except ClusterAPIError as exc:
                # The next bind of the pod clears it (see extended_writes.clear_stale_mapping).
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
            if record.written is None or record.consumer is not None:
                continue  # upstream Unreserve never removes a PodGroup's reservation
            try:
                after = await release_claim(
                    self.api, record.written.raw, pod, allocated_here=record.allocation is not None
                )
            except ClusterAPIError as exc:
                # Still reserved for the (unbound) pod: a retry of the pod binds it, or the claim
                # controller releases it when the pod goes away.
                log.warning("releasing resourceclaim %s/%s failed: %s", claim.namespace, claim.name, exc)
                continue
            self.tracker.assumed.written(record, after)
