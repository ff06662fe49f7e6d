"""The one owner of everything in flight: what the extender has decided or written that the
cache does not show yet (upstream's DRA manager, ``dra_manager.go``: the assume cache and the
in-flight allocations that kube-scheduler's DynamicResources plugin reads and changes).

The engine's verbs and the binder both hold this tracker; nothing else keeps in-flight state,
and the views (``/debug``, metrics) only read it. Pure bookkeeping: no I/O, the clock injected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from extender.cluster.state import ClusterState, Key
from extender.model.core import Pod
from extender.model.scheduling import PodGroup
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide.post_filter import InFlight
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.inflight.assumed import AssumedClaims
from extender.scheduling.inflight.catch_up import SeenPods
from extender.scheduling.inflight.expected_binds import ExpectedBinds
from extender.scheduling.inflight.placing import Placing
from extender.scheduling.preempt.nominated import Nominations, Preempted, RoomHold

#: How long after an unanswered Binding it may still land (kube-apiserver's request timeout is
#: 60 s): until then a leftover claim of the pod is not deleted, lest the pod be bound without it.
BINDING_MAY_LAND = 90.0
#: Seconds a group member that passed a filter counts as scheduled: kube-scheduler may have
#: assumed it (Reserve, Permit, other plugins' PreBind) before its bind reaches the extender.
PASSED_FILTER_GRACE = 30.0


@dataclass(slots=True)
class BindInFlight:
    """A bind being carried out (its concurrent duplicates wait for the same answer)."""

    pod_uid: str
    pod_key: Key
    node: str
    started: float
    done: asyncio.Future[str]
    #: Waiting on the cluster, not on the API server (for binding conditions, or for the claims
    #: of a preemption's victims to be released) since then; and the seconds it waited so
    #: before. Back-pressure leaves such waits out of a bind's time.
    parked_since: float | None = None
    parked_seconds: float = 0.0


class GroupActivity:
    """When a pod of each PodGroup last passed a filter here, by (namespace, group)."""

    def __init__(self) -> None:
        self._passed: dict[Key, float] = {}

    def passed(self, namespace: str, group: str, now: float) -> None:
        self._passed[(namespace, group)] = now
        if len(self._passed) > 10_000:  # forget the oldest half
            for key, _ in sorted(self._passed.items(), key=lambda kv: kv[1])[:5_000]:
                del self._passed[key]

    def __len__(self) -> int:
        return len(self._passed)

    def recent(self, namespace: str, group: str, now: float) -> bool:
        since = self._passed.get((namespace, group))
        return since is not None and now - since < PASSED_FILTER_GRACE


class Tracker:
    def __init__(self, clock: Callable[[], float], *, preemption_memory_seconds: float) -> None:
        self.clock = clock
        #: Binds being carried out, by pod UID.
        self.binds: dict[str, BindInFlight] = {}
        #: The binds that were ever parked (few): :meth:`parked_binds` reads only these, as
        #: bind pressure asks on every filter and bind with hundreds of binds in flight.
        self._ever_parked: set[str] = set()
        #: Claim writes the cache does not show yet (their devices stay taken until it does),
        #: and devices held after prioritize.
        self.assumed = AssumedClaims()
        #: Pods kube-scheduler may be binding already (its bind not here yet): filters wait.
        self.expected = ExpectedBinds(clock)
        #: The newest version of each pod a request carried: a bind names the pod only, and
        #: decides on what kube-scheduler saw when the cache is behind it.
        self.seen = SeenPods()
        #: DRANodeAllocatableResources: pods bound here that the cache does not show bound yet.
        self.placing = Placing()
        #: When a pod of each PodGroup last passed a filter (PostFilter leaves such groups alone).
        self.groups = GroupActivity()
        #: The victims the preempt verb named, per preemptor and node (what nominated pods keep).
        self.preempted = Preempted(preemption_memory_seconds, clock)
        #: Pods whose Binding was sent with no answer, and when: such a Binding may still land.
        self._binding_unknown: dict[str, float] = {}
        #: Make room's holds (issue 52), by the waiting pod's UID: set and released by the mover.
        self.room_holds: dict[str, RoomHold] = {}
        self._holds_by_node: dict[str, tuple[RoomHold, ...]] | None = None

    # --- reading ----------------------------------------------------------------------------------

    def entries(self) -> dict[str, int]:
        """How many entries each in-flight map holds: each is bounded or emptied as binds
        settle, so these are flat under steady load (the soak checks it; a metric shows it)."""
        return {
            "binds": len(self.binds),
            "binds_ever_parked": len(self._ever_parked),
            **self.assumed.entries(),
            "expected_binds": len(self.expected),
            "seen_pods": len(self.seen),
            "placing": len(self.placing),
            "group_filters": len(self.groups),
            "preemptions": len(self.preempted),
            "unanswered_bindings": len(self._binding_unknown),
            "make_room_holds": len(self.room_holds),
        }

    def hold_room(self, hold: RoomHold) -> None:
        """Keep the devices ``hold.pod`` gets on ``hold.node`` once ``hold.moved`` are gone."""
        self.room_holds[hold.pod.uid] = hold
        self._holds_by_node = None

    def release_room(self, pod_uid: str) -> None:
        if self.room_holds.pop(pod_uid, None) is not None:
            self._holds_by_node = None

    def victims_of(self, pod_uid: str, node: str) -> frozenset[str]:
        """The pods whose going frees devices for ``pod_uid`` on ``node``: the victims the
        preempt verb named for it, and the pods make room moves off the node for it."""
        named = self.preempted.victims_of(pod_uid, node)
        hold = self.room_holds.get(pod_uid)
        if hold is not None and hold.node == node:
            return named | hold.moved
        return named

    def nominations(self, config: EngineConfig) -> Nominations | None:
        """Whose nominations keep devices (with device preemption only): pods of the schedulers
        this extender serves, except those being bound (their writes hold their devices)."""
        if not config.device_preemption and not self.room_holds:
            return None
        if self._holds_by_node is None:
            by_node: dict[str, list[RoomHold]] = {}
            for hold in self.room_holds.values():
                by_node.setdefault(hold.node, []).append(hold)
            self._holds_by_node = {node: tuple(holds) for node, holds in by_node.items()}
        return Nominations(
            config.scheduler_names,
            self.victims_of,
            frozenset(self.binds),
            nominated_pods=config.device_preemption,
            holds=self._holds_by_node,
        )

    def node_pods(self, state: ClusterState, node: str) -> list[Pod]:
        """The pods on ``node`` as kube-scheduler counts them (see :mod:`placing`)."""
        return self.placing.pods_on(node, state, self.binds, self.clock())

    def for_post_filter(
        self, state: ClusterState, config: EngineConfig, pod: Pod, claims: PodClaims
    ) -> InFlight:
        """What is in flight for ``pod`` when no node fits it: what PostFilter's release
        (:mod:`extender.scheduling.decide.post_filter`) must leave alone."""
        keys = [c.key for c in claims.allocated]
        if claims.extended is not None and claims.extended.existing is not None:
            keys.append(claims.extended.existing.key)
        settling = {k for k in keys if self.assumed.of(k)}
        others = {k for k in settling if any(r.pod_uid != pod.uid for r in self.assumed.of(k))}
        group = state.pod_groups.get((pod.namespace, pod.pod_group)) if pod.pod_group else None
        busy = (
            group is not None
            and config.features.workload_resource_claims
            and self.group_busy(state, pod, group)
        )
        return InFlight(
            binding=pod.uid in self.binds,
            may_land=self.binding_may_land(pod),
            settling=frozenset(settling),
            settling_for_others=frozenset(others),
            group_busy=busy,
        )

    def group_busy(self, state: ClusterState, pod: Pod, group: PodGroup) -> bool:
        """A pod of the group may be scheduled as far as this extender knows: bound in the cache
        (and not finished), being bound here, passed a filter recently, or a claim write for the
        group is not settled. The API server is asked too before anything is written."""
        if self.groups.recent(pod.namespace, group.name, self.clock()):
            return True
        if any(r.consumer is not None and r.consumer.get("uid") == group.uid for r in self.assumed):
            return True
        binding = {entry.pod_key for entry in self.binds.values()}
        for other in state.pods.values():
            if other.namespace != pod.namespace or other.pod_group != group.name or other.uid == pod.uid:
                continue
            if (other.node_name and not other.terminal) or other.key in binding:
                return True
        return False

    def parked_binds(self) -> dict[str, float | None]:
        """Per pod whose bind has waited on the cluster rather than on the API server
        (:meth:`parked`): None while it waits, else the seconds it waited."""
        binds = self.binds
        return {
            uid: None if entry.parked_since is not None else entry.parked_seconds
            for uid in self._ever_parked
            if (entry := binds.get(uid)) is not None
            and (entry.parked_since is not None or entry.parked_seconds)
        }

    def binding_may_land(self, pod: Pod) -> bool:
        """A Binding of the pod went unanswered recently: it could still land (so its claims stay)."""
        now = self.clock()
        for uid, sent in list(self._binding_unknown.items()):
            if now - sent > BINDING_MAY_LAND:
                del self._binding_unknown[uid]
        return pod.uid in self._binding_unknown

    # --- changing ---------------------------------------------------------------------------------

    def settle(self, state: ClusterState, hold_seconds: float) -> None:
        """Drop what the cache now shows (claim writes it has caught up with) and the holds older
        than ``hold_seconds``: before every snapshot, and before a bind decides."""
        if self.assumed.holding:
            self.assumed.expire_holds(self.clock() - hold_seconds)
        self.assumed.settle(state.claims, state.claims_seen_rv, state.changed_claims)
        self.seen.forget_gone(state.pods)

    @contextmanager
    def parked(self, pod_uid: str) -> Iterator[None]:
        """Meanwhile the pod's bind waits on the cluster (binding conditions, a release), not
        on the API server."""
        entry = self.binds.get(pod_uid)
        if entry is not None:
            entry.parked_since = self.clock()
            self._ever_parked.add(pod_uid)
        try:
            yield
        finally:
            if entry is not None and entry.parked_since is not None:
                entry.parked_seconds += self.clock() - entry.parked_since
                entry.parked_since = None

    def binding_unanswered(self, pod_uid: str) -> None:
        self._binding_unknown[pod_uid] = self.clock()

    def bind_ended(self, pod_uid: str, failed: bool) -> None:
        """A bind is over, however it ended: its entry goes, a failed one's placed pod too
        (unless its Binding may still land), and its unsent writes are forgotten."""
        del self.binds[pod_uid]
        self._ever_parked.discard(pod_uid)
        self.seen.forget(pod_uid)  # its bind was the one reader; a retry is sent afresh
        if failed and pod_uid not in self._binding_unknown:
            self.placing.discard(pod_uid)
        self.assumed.interrupted(pod_uid)
