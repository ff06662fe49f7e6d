"""The snapshot decisions are made on: the cache, with the tracker's claim writes laid over it
and their devices counted as taken (upstream: the DRA manager's ``ListAllAllocatedDevices``,
which adds the in-flight allocations to the assume cache's).

One :class:`Snapshots` serves the engine's verbs and the binder alike, so a bind decides on the
same view as the filter did without calling back into the engine. A snapshot is rebuilt only
when the inventory, the claims or the tracker's writes changed, and then by delta: the devices
in use are brought up to date from the claims that changed, pools re-indexed from the slices
that changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from extender.allocator import AllocatedState
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState, Key
from extender.model.core import Pod
from extender.model.dra import Allocation, DeviceID, ResourceClaim
from extender.scheduling.config import EngineConfig
from extender.scheduling.decide import extended as er
from extender.scheduling.decide import node_allocatable as na
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.inflight.tracker import Tracker


class Snapshots:
    def __init__(
        self,
        state: ClusterState,
        tracker: Tracker,
        cel: CelEnvironment,
        config: EngineConfig,
        *,
        clock: Callable[[], float],
        wall_clock: Callable[[], float],
    ) -> None:
        self.state = state
        self.tracker = tracker
        self.cel = cel
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self._snapshot: Snapshot | None = None
        self._key: tuple[int, int, int] | None = None
        #: Devices in use, kept up to date by delta (see _count_in_use), and what it counts.
        self._allocated = AllocatedState(config.features)
        self._counted: dict[Key, tuple[Allocation, ...]] = {}
        #: DRANodeAllocatableResources: each pod's share of its node's requests, kept across snapshots.
        self._node_requests = na.NodeRequests()

    def reconfigure(self, config: EngineConfig) -> None:
        """New features (another Kubernetes release, read from the API server at start) change
        how allocations count: the devices in use are recounted and no snapshot is kept."""
        if config.features != self.config.features or config.release != self.config.release:
            self._allocated = AllocatedState(config.features)
            self._counted = {}
            self.state.changed_claims |= set(self.state.claims)
            self._snapshot = None
            self._key = None
        self.config = config

    def current(self) -> Snapshot:
        """The snapshot for a decision now (the tracker settled against the cache first)."""
        state, tracker, config = self.state, self.tracker, self.config
        tracker.settle(state, config.hold_seconds)
        # Pods and Nodes are read live; only claims, the inventory and our writes feed a snapshot.
        key = (state.inventory_version, state.claims_version, tracker.assumed.version)
        if self._snapshot is None or self._key != key:
            previous = self._snapshot
            inventory = None
            if previous is not None and previous.inventory_version == state.inventory_version:
                inventory = previous.inventory
            elif previous is not None:
                # Only slices changed (None: classes or taint rules too): re-index their pools.
                names = state.slices_changed_since(previous.inventory_version)
                if names is not None:
                    inventory = previous.inventory.updated({n: state.slices.get(n) for n in names})
            claims = tracker.assumed.overlay(state.claims)
            changed, changed_claims = self._count_in_use(claims)
            self._snapshot = Snapshot(
                state,
                config.features,
                self.cel,
                claims=claims,
                allocated=self._allocated,
                changed=changed,
                changed_claims=changed_claims,
                clock=self.clock,
                wall_clock=self.wall_clock,
                binding_timeout=config.binding_timeout,
                timeout_is_error=config.release.filter_timeout_is_error,
                inventory=inventory,
                previous=previous if inventory is not None else None,
            )
            self._key = key
            if config.features.node_allocatable_resources:
                self._snapshot.node_pods = lambda node: tracker.node_pods(state, node)
                self._snapshot.node_requests = self._node_requests
        if state.changed_nodes:
            # Node changes make no new snapshot: the current one forgets those nodes' entries.
            changed_nodes, state.changed_nodes = state.changed_nodes, set()
            self._snapshot.forget_nodes(changed_nodes)
        return self._snapshot

    def _count_in_use(self, claims: Mapping[Key, ResourceClaim]) -> tuple[set[DeviceID], set[Key]]:
        """Bring the devices in use up to date with the claims that changed since the last
        snapshot (in the cache, or in our writes not shown yet). Returns the devices whose use
        may have changed, and those claims. Unchanged allocations are the same objects: identity
        finds changes."""
        assumed = self.tracker.assumed
        keys = self.state.changed_claims | assumed.touched
        self.state.changed_claims = set()
        assumed.touched = set()
        allocated, counted = self._allocated, self._counted
        changed: set[DeviceID] = set()
        for key in keys:
            shown = claims.get(key)
            now = [shown.allocation] if shown is not None and shown.allocation is not None else []
            now += [devices for _pod, devices in assumed.held_for(key, shown)]
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
        assumed = self.tracker.assumed

        def pending(claim: ResourceClaim) -> bool:
            record = assumed.allocating(claim.key)
            return record is not None and record.pod_uid != pod.uid

        return snapshot.claims_of(pod, pending)
