"""The snapshot decisions are made on: the cluster state with claims, inventory and devices in
use fixed, and per pod and node the decision (:meth:`Snapshot.decide`, what filter answers).

The same logic serves ``filter``, ``bind`` (recomputed on the chosen node), the debug endpoints
and ``simulate``. It mirrors the in-tree DynamicResources plugin: claims are found through the
pod (templates via ``status.resourceClaimStatuses``), allocated claims only need a matching
``allocation.nodeSelector``, and all unallocated claims are allocated together.

Longer than the other modules, as one concept: the decisions and the memo tables that make them
cheap (look-alike nodes, claim specs interned, answers carried over to the next snapshot minus
what changed) belong together, since every lookup must be invalidated exactly where its inputs
change.
"""

from __future__ import annotations

import contextlib
import functools
import time
import uuid
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import filterfalse
from types import MappingProxyType
from typing import Any

from extender.allocator import (
    AllocatedState,
    AllocationError,
    AllocationTimeout,
    Allocator,
    Features,
    Inventory,
    NodeAllocationError,
    Unsatisfiable,
)
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState, Key
from extender.defaults import DEFAULT_BINDING_TIMEOUT as DEFAULT_BINDING_TIMEOUT
from extender.model.core import Node, Pod
from extender.model.dra import Allocation, DeviceID, ResourceClaim
from extender.model.node_allocatable import ClaimResources
from extender.scheduling.decide import extended as er
from extender.scheduling.decide import node_allocatable as na
from extender.scheduling.decide.binding import binding_problem
from extender.scheduling.decide.decision import (
    DEFAULT_NODE_TIMEOUT,
    Assessment,
    NodeDecision,
    node_info,
    prioritized_list_score,
    renamed,
)
from extender.scheduling.decide.interner import Interner
from extender.scheduling.decide.prefilter import PodClaims, resolve_claims
from extender.scheduling.decide.projection import ClaimProjection, claim_projection

#: Memo tables grow with every pod's claims; a snapshot carries them over only below this size.
MAX_CARRIED_ENTRIES = 100_000
#: Claim specs remembered past their claims (pods of one Deployment share their answers).
MAX_SPEC_KEYS = 1024


class Snapshot:
    """One consistent view for decisions: indexed inventory, devices in use, the allocator."""

    def __init__(
        self,
        state: ClusterState,
        features: Features,
        cel: CelEnvironment,
        *,
        claims: Mapping[Key, ResourceClaim] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        binding_timeout: float = DEFAULT_BINDING_TIMEOUT,
        timeout_is_error: bool = True,
        new_share_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        inventory: Inventory | None = None,
        previous: Snapshot | None = None,
        allocated: AllocatedState | None = None,
        changed: set[DeviceID] | None = None,
        changed_claims: Iterable[Key] = (),
    ) -> None:
        """``allocated``: the devices in use, kept up to date by the caller (then ``claims`` are
        not counted again). ``previous`` and ``changed`` (the devices whose use changed since
        it): the snapshot this one replaces, whose memo tables it takes over, minus what it
        remembered of ``changed_claims`` (changed or deleted since). ``timeout_is_error``: an
        allocation that runs out of time is an error for the pod (1.36+), not this node's reason."""
        self.state = state
        self.features = features
        self.wall_clock = wall_clock
        self.binding_timeout = binding_timeout
        self.timeout_is_error = timeout_is_error
        self.inventory = inventory or Inventory(
            state.slices.values(), state.classes, features, state.taint_rules.values()
        )
        #: The claims decisions see: the cache, or the cache with our newer writes in place.
        self.claims = claims if claims is not None else state.claims
        if allocated is None:
            allocations = [c.allocation for c in self.claims.values() if c.allocation is not None]
            allocated = AllocatedState.from_allocations(allocations, features)
        self.allocated = allocated
        self.allocator = Allocator(
            self.inventory, self.allocated, cel, clock=clock, new_share_id=new_share_id
        )
        self.cel = cel
        #: The state's inventory_version this snapshot's inventory was built from.
        self.inventory_version = state.inventory_version
        #: Memoized answers per interned claims id (the pod's own claims, or their content),
        #: then per node key: a claim's change or deletion drops its ids' answers at once.
        self._assessments: dict[int, dict[tuple[Any, ...], Assessment]] = {}
        #: Per content key, then per node key: a "does not fit" and the claims it names, said
        #: again for look-alike pods' claims (:func:`renamed`) instead of allocating again.
        self._failures: dict[int, dict[tuple[Any, ...], tuple[Assessment, tuple[str, ...]]]] = {}
        self._projections: dict[tuple[Any, ...], ClaimProjection | None] = {}
        self._in_use: dict[str, tuple[Node, int]] = {}
        #: projection key -> node name -> (signature, in-use), for this snapshot.
        #: Entries hold the Node record they were computed for: a node whose labels changed is a
        #: new record, and its entries no longer apply (Node changes do not make new snapshots).
        self._node_keys: dict[Any, dict[str, tuple[Node, tuple[int, int, bool] | None]]] = {}
        #: Shared fitting answers by node name, per content key: one lookup per node.
        self._by_name: dict[int, dict[str, tuple[Node, Assessment]]] = {}
        self._in_use_ids: dict[tuple[Any, ...], int] = {}
        #: In-use id -> how many of such a node's devices no claim holds (:meth:`free_devices`).
        self._free_of: dict[int, int] = {}
        #: projection key -> node name -> group: look-alike nodes (equal signature and devices
        #: in use) share a group and so one answer; see :meth:`node_groups`.
        self._groups: dict[Any, dict[str, Hashable]] = {}
        #: projection key -> names :meth:`forget_nodes` dropped from that table: grouped again
        #: first, so that the table stays complete and a call is one lookup per node in C.
        self._regroup: dict[Any, set[str]] = {}
        #: Each group's one int object (groups of many nodes are equal ints).
        self._group_ids: dict[int, int] = {}
        #: Claim keys (identity, or content for shared fitting answers) interned to small ints.
        self._claims_ids = Interner()
        #: Claim -> the interned claim keys that name it (forgotten with it: :meth:`forget_claims`).
        self._claim_refs: dict[Key, set[tuple[Any, ...]]] = {}
        #: Interned keys that name no claim (the specs of claims to allocate), oldest first:
        #: shared by look-alike pods, so kept past their claims, but at most MAX_SPEC_KEYS.
        self._spec_keys: dict[tuple[Any, ...], None] = {}
        self._extended_classes: dict[str, str] | None = None
        self._extended_claims: dict[str, ResourceClaim] | None = None
        #: Nesting depth of :meth:`what_if` (memoized answers must not be read or made inside).
        self._what_if = 0
        #: The pods kube-scheduler counts on a node (DRANodeAllocatableResources: their requests
        #: and claim statuses); Snapshots adds the pods the tracker is placing.
        self.node_pods: Callable[[str], Iterable[Pod]] = lambda n: state.pods_by_node.get(n, {}).values()
        self.node_requests = na.NodeRequests()  # Snapshots keeps one across snapshots
        if previous is not None and changed is not None:
            self._carry_over(previous, changed, changed_claims)  # last: it replaces the tables above

    def claims_of(self, pod: Pod, pending: Callable[[ResourceClaim], bool] | None = None) -> PodClaims:
        """The pod's claims after kube-scheduler's PreFilter checks (``pending``: allocating elsewhere)."""
        return resolve_claims(
            pod,
            self.claims,
            self.state.broken_claims,
            self.state.classes,
            self.features,
            pending,
            self._extended_prefilter if self.features.extended_resource else None,
            self.state.pod_groups,
        )

    def _extended_prefilter(self, pod: Pod) -> er.ExtendedResources | None:
        if not er.may_request(pod):
            return None  # the common case costs a scan of the request names
        if self._extended_classes is None:
            self._extended_classes = er.extended_resource_classes(self.state.classes)
        if self._extended_claims is None:
            self._extended_claims = er.claims_by_owner(self.claims.values())
        return er.prefilter(pod, self._extended_classes, self._extended_claims)

    def decide(
        self, pod_claims: PodClaims, node: Node, *, timeout: float | None = DEFAULT_NODE_TIMEOUT
    ) -> NodeDecision:
        """kube-scheduler's Filter for one node (after PreFilter, whose answer ``pod_claims`` holds).

        Allocated claims are checked first (their nodeSelector, then binding conditions), but the
        allocator runs regardless and its error or "cannot allocate" wins over "not available".
        """
        if pod_claims.error is not None:
            return NodeDecision(node.name, False, error=pod_claims.error)
        if pod_claims.reason is not None:
            return NodeDecision(node.name, False, reason=pod_claims.reason)
        extended = None
        if pod_claims.extended is not None:
            reason, extended = pod_claims.extended.for_node(node)
            if reason is not None:
                return NodeDecision(node.name, False, reason=reason)
            if extended is None and not pod_claims.ordered:
                return NodeDecision(node.name, True)  # device plugins serve the pod here
        pod = pod_claims.pod if self.features.node_allocatable_resources else None
        second_api = self.features.node_allocatable_second_api
        if pod is not None:  # (the gate off costs nothing more here: filter's hot path)
            node_pods = functools.cache(lambda: list(self.node_pods(node.name)))
            devices = functools.cache(
                lambda: {d.id: d for d in self.inventory.node_devices(node.name, node.labels)}
            )
            if pod_claims.allocated and (
                shared := na.shared_claim(pod, node, pod_claims.allocated, node_pods, devices, self.features)
            ):
                return NodeDecision(node.name, False, reason=shared)
        now = self.wall_clock()
        unavailable = [
            problem
            for claim in pod_claims.allocated
            if (problem := self.claim_unavailable(claim, node, now)) is not None
        ]
        allocations: dict[str, dict[str, Any]] = {}
        statuses: tuple[ClaimResources, ...] = ()
        to_allocate = _with_extended(pod_claims.to_allocate, extended)
        if to_allocate:
            try:
                outcome = self.allocator.allocate(node_info(node), to_allocate, timeout=timeout)
            except AllocationTimeout as exc:
                if self.timeout_is_error:
                    # v1.36.3 Filter (kubernetes#137607): "Timeouts are potentially transient.
                    # Return Error so the pod retries via backoff".
                    return NodeDecision(node.name, False, error=f"node {node.name}: {exc}", timed_out=True)
                return NodeDecision(node.name, False, reason=str(exc), timed_out=True)
            except NodeAllocationError as exc:
                # ErrFailedAllocationOnNode: unschedulable on this node, not an error for the pod.
                return NodeDecision(node.name, False, reason=str(exc))
            except AllocationError as exc:
                return NodeDecision(node.name, False, error=str(exc))
            if isinstance(outcome, Unsatisfiable):
                return NodeDecision(node.name, False, reason=outcome.reason)
            for claim, allocation in zip(to_allocate, outcome, strict=True):
                allocations.setdefault(claim.name, allocation)  # a claim listed twice: first wins
        # 1.36 judges only new allocations (inside the allocator's block); 1.37 counts allocated
        # claims too, so it judges whenever the pod has claims (inferred: see docs/fidelity.md).
        if pod is not None and (to_allocate or second_api):
            try:
                verdict = na.judge(
                    pod,
                    node,
                    allocations,
                    devices(),
                    node_pods,
                    self.node_requests,
                    pod_claims.allocated,
                    second_api,
                )
            except na.NodeAllocatableError as exc:
                return NodeDecision(node.name, False, error=str(exc))
            if verdict.reason is not None:
                return NodeDecision(node.name, False, reason=verdict.reason, resolvable=verdict.resolvable)
            statuses = verdict.statuses
        if unavailable:
            return NodeDecision(
                node.name, False, reason="resourceclaim not available on the node: " + "; ".join(unavailable)
            )
        return NodeDecision(
            node.name, True, allocations=allocations, extended=extended, node_allocatable=statuses
        )

    @contextlib.contextmanager
    def what_if(
        self, *, freed: Sequence[Allocation] = (), held: Sequence[Allocation] = (), gone: Collection[str] = ()
    ) -> Iterator[None]:
        """Inside, :meth:`decide` sees the devices of ``freed`` free and those of ``held`` taken.

        For preemption's questions (would the pod fit with these claims gone, with the devices
        of pods nominated here taken?). ``freed`` must be allocations of this snapshot's claims,
        each once: they are counted out of the devices in use and back in on the way out (the
        cost is their devices, not a copy of everything in use). Only :meth:`decide` may run
        inside: memoized answers are keyed by the real devices in use.
        """
        allocated = self.allocated
        uncounted = [d for a in freed for d in a.exclusive if allocated.dedicated.get(d, 0) <= 0]
        if uncounted:
            # Counting out what is not counted would corrupt the devices in use for good.
            raise AssertionError(f"what_if: freed devices not in use: {', '.join(map(str, uncounted[:3]))}")
        for allocation in freed:
            allocated.remove(allocation)
        for allocation in held:
            allocated.add(allocation)
        self._what_if += 1
        node_pods = self.node_pods
        if gone:  # preemption's victims: their node resources are free too (in-tree dry run)
            self.node_pods = lambda n: [p for p in node_pods(n) if p.uid not in gone]
        try:
            yield
        finally:
            self.node_pods = node_pods
            self._what_if -= 1
            for allocation in reversed(held):
                allocated.remove(allocation)
            for allocation in reversed(freed):
                allocated.add(allocation)

    def claim_unavailable(self, claim: ResourceClaim, node: Node, now: float) -> str | None:
        """Why Filter counts an allocated claim as unavailable on ``node`` (None: it is available)."""
        allocation = claim.allocation
        assert allocation is not None
        selector = allocation.node_selector
        if selector is not None and not selector.matches(node.name, node.labels):
            where = f"resourceclaim {claim.namespace}/{claim.name}"
            return f"{where} is allocated to devices not available on this node"
        if allocation.skips_node_operations and not node.optional_node_operations:
            # v1.37.0 Filter, whatever the gate says: a result that skips node operations needs
            # a kubelet that declares DRAOptionalNodeOperations.
            where = f"resourceclaim {claim.namespace}/{claim.name}"
            return f"{where} skips node operations, which this node does not declare (declaredFeatures)"
        if self.features.device_binding:
            return binding_problem(claim, now, self.binding_timeout)
        return None

    # --- memoized assessments (filter and prioritize) -------------------------------------------

    def _carry_over(self, previous: Snapshot, changed: set[DeviceID], changed_claims: Iterable[Key]) -> None:
        """Keep what a change of devices in use, or of slices, did not touch: per-node keys and
        the memo.

        Assessments are keyed by interned (signature, in-use) ids, so they stay valid; only the
        nodes whose devices changed hands, or that can see a pool whose slices changed, need
        new keys.
        """
        affected = self.inventory.nodes_of(changed)
        moved = self.inventory.nodes_changed_since(previous.inventory)
        if affected is None or moved is None:
            return  # a device or pool visible to several nodes changed: start afresh
        affected |= moved
        tables = (
            previous._assessments,
            previous._failures,
            previous._projections,
            previous._in_use_ids,
            previous._claims_ids,
            previous._group_ids,
        )
        if max(len(t) for t in tables) > MAX_CARRIED_ENTRIES:
            return  # keyed by claims that come and go: bounded by starting afresh now and then
        self._in_use_ids = previous._in_use_ids
        self._free_of = previous._free_of
        self._claims_ids = previous._claims_ids
        self._claim_refs = previous._claim_refs
        self._spec_keys = previous._spec_keys
        # Taken over, not copied: a snapshot is replaced by the next one and not used after it,
        # so the cost is the nodes whose devices changed, not every node.
        self._in_use = previous._in_use
        self._assessments = previous._assessments
        self._failures = previous._failures
        self._projections = previous._projections
        self._node_keys = previous._node_keys
        self._by_name = previous._by_name
        self._groups = previous._groups
        self._regroup = previous._regroup
        self._group_ids = previous._group_ids
        self.forget_nodes(affected)
        self.forget_claims(changed_claims)
        previous._in_use, previous._node_keys, previous._by_name, previous._groups = {}, {}, {}, {}
        previous._regroup, previous._group_ids = {}, {}

    def forget_claims(self, keys: Iterable[Key]) -> None:
        """Drop what was remembered for claims that changed or are gone: the answers, projections
        and interned ids of every claim key naming them (a changed claim has a new key anyway)."""
        for key in keys:
            for claims_key in self._claim_refs.pop(key, ()):
                self._forget_key(claims_key)

    def _intern_claims(self, key: tuple[Any, ...], claims: Iterable[ResourceClaim]) -> int:
        """The claim key's small id; the first time, remembered as naming ``claims``."""
        found = self._claims_ids.get(key)
        if found is not None:
            return found
        named = False
        for claim in claims:
            self._claim_refs.setdefault(claim.key, set()).add(key)
            named = True
        if not named:
            self._spec_keys[key] = None
            if len(self._spec_keys) > MAX_SPEC_KEYS:  # the oldest pods' specs go first
                oldest = next(iter(self._spec_keys))
                del self._spec_keys[oldest]
                self._forget_key(oldest)
        return self._claims_ids.add(key)

    def _forget_key(self, claims_key: tuple[Any, ...]) -> None:
        self._projections.pop(claims_key, None)
        claims_id = self._claims_ids.pop(claims_key)
        if claims_id is not None:
            self._assessments.pop(claims_id, None)
            self._failures.pop(claims_id, None)
            self._by_name.pop(claims_id, None)

    def forget_nodes(self, names: Iterable[str]) -> None:
        """Drop the per-node entries of these nodes: their devices in use or Node record changed."""
        tables: list[dict[str, Any]] = [self._in_use, *self._node_keys.values(), *self._by_name.values()]
        names = list(names)
        for name in names:
            for table in tables:
                table.pop(name, None)
        for key, groups in self._groups.items():
            dropped = [name for name in names if groups.pop(name, None) is not None]
            if dropped:
                self._regroup.setdefault(key, set()).update(dropped)

    def _node_in_use(self, node: Node) -> int:
        """Which of the node's devices are in use, interned to a small int."""
        assert not self._what_if, "memoized answers are keyed by the real devices in use"
        cached = self._in_use.get(node.name)
        if cached is not None and cached[0] is node:
            return cached[1]
        held = self.allocated
        devices = self.inventory.node_devices(node.name, node.labels)
        content: tuple[Hashable, ...]
        held_total = len(held.dedicated) + len(held.shared_ids)
        positions = (
            self.inventory.device_positions(node.name, node.labels)
            if len(devices) > SPARSE_IN_USE_FACTOR * held_total
            else None
        )
        if positions is None:
            content = tuple(held.key(d.id) for d in devices)
        else:
            # A node with far more devices than the whole cluster holds: name the positions
            # held instead of a key per device (a 100k-device node: 0.1 ms instead of 30 ms).
            # Nodes that look alike have equal device counts, so they take the same branch.
            spots = sorted({positions[i] for i in (*held.dedicated, *held.shared_ids) if i in positions})
            # With the device count, so that the key tells how many are free (free_devices).
            content = (_SPARSE, len(devices), *((p, held.key(devices[p].id)) for p in spots))
        in_use = self._in_use_ids.setdefault(content, len(self._in_use_ids))
        self._in_use[node.name] = (node, in_use)
        return in_use

    def free_devices(self, node: Node) -> int:
        """How many of the node's devices no claim holds exclusively (shared ones count as free).

        One lookup per node once filter has keyed the node's devices in use (:meth:`node_groups`,
        :meth:`assessor`): counted once per distinct key, which equal nodes share. Outside
        :meth:`what_if` only, as the keys."""
        in_use = self._node_in_use(node)
        free = self._free_of.get(in_use)
        if free is None:
            dedicated = self.allocated.dedicated
            devices = self.inventory.node_devices(node.name, node.labels)
            free = self._free_of[in_use] = sum(1 for d in devices if d.id not in dedicated)
        return free

    def assess(
        self, pod_claims: PodClaims, node: Node, *, timeout: float | None = DEFAULT_NODE_TIMEOUT
    ) -> Assessment:
        """Like :meth:`decide` without device names; nodes that look alike share one allocation."""
        return self.assessor(pod_claims, timeout=timeout)(node)

    def assessor(
        self, pod_claims: PodClaims, *, timeout: float | None = DEFAULT_NODE_TIMEOUT
    ) -> Callable[[Node], Assessment]:
        """A per-pod function node -> :class:`Assessment` (the per-pod work done once)."""
        assert not self._what_if, "memoized answers are keyed by the real devices in use"
        if (
            pod_claims.error is not None
            or pod_claims.reason is not None
            or not pod_claims.allocates
            or self.features.node_allocatable_resources  # answers depend on the node's pods too
        ):

            def direct(node: Node) -> Assessment:
                return self.summarize(pod_claims, node, self.decide(pod_claims, node, timeout=timeout))

            return direct
        claims_key = pod_claims.key()
        projection = self._projection(pod_claims, claims_key)
        # Interned once per assessor: per-node memo keys then hash a few small ints. The content
        # key names the claims already allocated (not those to allocate: it is their specs).
        own_id = self._intern_claims(claims_key, [*pod_claims.to_allocate, *pod_claims.allocated])
        shared_id = self._intern_claims(pod_claims.content_key(), pod_claims.allocated)
        selectors = [
            c.allocation.node_selector
            for c in pod_claims.allocated
            if c.allocation and c.allocation.node_selector
        ]
        # Binding readiness depends on the claims and the time only: read once per assessor.
        now = self.wall_clock()
        bindings = (
            tuple(binding_problem(c, now, self.binding_timeout) for c in pod_claims.allocated)
            if self.features.device_binding and pod_claims.allocated
            else ()
        )
        memo = self._assessments
        node_keys = self._node_keys.setdefault(projection.key, {}) if projection is not None else {}

        def node_key(node: Node) -> tuple[int, int, bool] | None:
            """(signature, in-use, declares optional node operations) of a node; per snapshot, by
            name, for the cached Node records."""
            found = node_keys.get(node.name)
            if found is not None and found[0] is node:
                return found[1]
            assert projection is not None
            signature = self.inventory.node_signature(node.name, node.labels, projection)
            key = (
                None
                if signature is None
                else (signature, self._node_in_use(node), node.optional_node_operations)
            )
            node_keys[node.name] = (node, key)
            return key

        extended = pod_claims.extended
        #: The common case (no allocated claims' selectors or bindings, no extended resources):
        #: a node's answer depends on its key alone; looked up here with one dict access.
        simple = projection is not None and self._shareable(pod_claims)
        by_node_key: dict[Any, Assessment] = {}
        by_name = self._by_name.setdefault(shared_id, {}) if simple else {}
        # A full node fails every look-alike pod alike, but its reason names each pod's claims:
        # said again with these names (at 500 x 8, one failed allocation per filter).
        failures = self._failures.setdefault(shared_id, {}) if simple else {}
        names = tuple(f"{c.namespace}/{c.name}" for c in pod_claims.to_allocate) if simple else ()

        def assess(node: Node) -> Assessment:
            if simple:
                hit = by_name.get(node.name)
                if hit is not None and hit[0] is node:
                    return hit[1]
            key = None
            via_dra: frozenset[str] | None = None
            if extended is not None:
                reason, plan = extended.for_node(node)
                if reason is not None:
                    return Assessment(False, reason)
                via_dra = plan.resources if plan is not None else None
            if projection is not None:
                nk = node_key(node)
                if nk is not None:
                    fits_selectors = (
                        tuple(sel.matches(node.name, node.labels) for sel in selectors) if selectors else ()
                    )
                    rest = (nk, fits_selectors, bindings, via_dra)
                    if simple:
                        cached = by_node_key.get(nk)
                        if cached is not None:
                            if cached.fits:
                                by_name[node.name] = (node, cached)
                            return cached
                    cached = (memo.get(shared_id) or _NONE).get(rest) or (memo.get(own_id) or _NONE).get(rest)
                    if cached is None and rest in failures:
                        failed, named = failures[rest]
                        cached = renamed(failed, named, names)
                        if cached is not None:
                            memo.setdefault(own_id, {})[rest] = cached
                    if cached is not None:
                        if simple:
                            by_node_key[nk] = cached
                            if cached.fits:
                                by_name[node.name] = (node, cached)
                        return cached
                    key = rest
            decision = self.decide(pod_claims, node, timeout=timeout)
            assessment = self.summarize(pod_claims, node, decision)
            if key is not None and not decision.timed_out:
                memo.setdefault(shared_id if assessment.fits else own_id, {})[key] = assessment
                if simple:
                    by_node_key[key[0]] = assessment
                    if assessment.fits:
                        by_name[node.name] = (node, assessment)
                    elif assessment.error is None:
                        failures[key] = (assessment, names)
            return assessment

        return assess

    def node_groups(self, pod_claims: PodClaims, names: Sequence[str]) -> list[Hashable] | None:
        """Per node name, the group whose nodes all get the same answer for these claims.

        Nodes with equal signatures and equal devices in use share an int group (one allocation
        answers them all, as with :meth:`assessor`'s memo); a node that is judged alone (not in
        the cache, or its pools depend on other nodes) is its own group, its name. Kept per
        snapshot and carried over, minus the nodes whose devices changed hands or whose Node
        record changed (:meth:`forget_nodes`), so a call costs a dict lookup per node.

        The cached Node records (``state.nodes``) are meant. None when an answer depends on more
        than the node's devices (allocated claims' node selectors, binding conditions, extended
        resources): then every node is judged on its own.
        """
        if not self._shareable(pod_claims):
            return None
        projection = self._projection(pod_claims, pod_claims.key())
        if projection is None:
            return None
        table = self._groups.get(projection.key)
        if table is None:
            table = self._groups[projection.key] = {}
        for name in self._regroup.pop(projection.key, ()):  # the nodes a bind changed
            table[name] = self._group_of(name, projection)
        try:
            return list(map(table.__getitem__, names))  # the common case: every node is known
        except KeyError:
            pass
        # Only the names not in the table yet, found in C: a Python step per node was a sixth
        # of the server's CPU at 5,000 nodes.
        for name in set(filterfalse(table.__contains__, names)):
            table[name] = self._group_of(name, projection)
        return list(map(table.__getitem__, names))

    def _group_of(self, name: str, projection: ClaimProjection) -> Hashable:
        """The node's group for this projection: its name when it is judged alone."""
        node = self.state.nodes.get(name)
        if node is None:
            return name
        signature = self.inventory.node_signature(name, node.labels, projection)
        if signature is None:
            return name
        declares = int(node.optional_node_operations)
        group = (signature << 33) | (declares << 32) | self._node_in_use(node)
        # One object per group, not per node: a request's thousands of lookups then touch a
        # few objects, not one per node spread over the heap.
        return self._group_ids.setdefault(group, group)

    def _shareable(self, pod_claims: PodClaims) -> bool:
        """Whether look-alike nodes get one answer: nothing but the node's devices matters."""
        return (
            pod_claims.error is None
            and pod_claims.reason is None
            and pod_claims.allocates
            and not self.features.node_allocatable_resources
            and pod_claims.extended is None
            and not any(c.allocation and c.allocation.node_selector for c in pod_claims.allocated)
            and not (self.features.device_binding and pod_claims.allocated)
        )

    def _projection(self, pod_claims: PodClaims, key: tuple[Any, ...]) -> ClaimProjection | None:
        """The projection of the claims ``key`` names. Without extended resources it depends on
        the specs of the claims to allocate alone: made once per content key (every pod of a
        Deployment has claims of its own and the same specs: 0.5% of the extender's CPU at
        500 x 8 went to making each pod's), kept under both keys and forgotten with either."""
        found: ClaimProjection | None = self._projections.get(key, _NO_PROJECTION)
        if found is not _NO_PROJECTION:
            return found
        content = pod_claims.content_key() if pod_claims.extended is None else None
        found = self._projections.get(content, _NO_PROJECTION) if content is not None else _NO_PROJECTION
        if found is _NO_PROJECTION:
            # Any node's extended-resource claim asks a subset of what the full one asks.
            full = pod_claims.extended.all_resources() if pod_claims.extended is not None else None
            claims = _with_extended(pod_claims.to_allocate, full)
            found = claim_projection(claims, self.state.classes, self.cel)
            if content is not None:
                self._projections[content] = found
        self._projections[key] = found
        return found

    def summarize(self, pod_claims: PodClaims, node: Node, decision: NodeDecision) -> Assessment:
        if not decision.fits:
            return Assessment(
                False,
                decision.reason,
                decision.error,
                timed_out=decision.timed_out,
                resolvable=decision.resolvable,
            )
        allocated = sum(len(a["devices"]["results"]) for a in decision.allocations.values())
        claims = _with_extended(pod_claims.to_allocate, decision.extended)
        free = self.allocator.free_matching(node_info(node), claims) if claims else 0
        score = (
            prioritized_list_score(pod_claims, decision.allocations)
            if self.features.prioritized_list and pod_claims.to_allocate
            else 0
        )
        return Assessment(True, allocated=allocated, free_after=max(free - allocated, 0), dra_score=score)


_NONE: Mapping[Any, Any] = MappingProxyType({})
#: Not made yet (a projection may be None: a selector that does not compile).
_NO_PROJECTION: Any = object()
#: Marks an in-use key that lists held positions (see Snapshot._node_in_use).
_SPARSE = object()
#: A node's in-use key lists held positions when it has this many times more devices than
#: the cluster holds in all.
SPARSE_IN_USE_FACTOR = 8


def _with_extended(claims: list[ResourceClaim], extended: er.NodeExtendedClaim | None) -> list[ResourceClaim]:
    """The claims one Allocate call gets: the pod's, then its extended-resource claim (upstream order)."""
    return claims if extended is None else [*claims, extended.claim]
