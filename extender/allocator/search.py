"""The structured allocator: which devices of one node satisfy a pod's claims, first fit.

Semantics are upstream's incubating allocator (k8s.io/dynamic-resource-allocation/structured):
claims in order, requests in spec order, the devices of a request one after another, candidates
in pool/slice/device order; depth-first with backtracking across devices, requests and claims,
and across the alternatives of ``firstAvailable``. The allocator is pure: no I/O, no clock reads
except the injected one for the time budget, no randomness except the injected share-ID source.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from extender.allocator import capacity as cap
from extender.allocator.constraints import Constraint, DistinctAttribute, MatchAttribute
from extender.allocator.counters import CounterLedger
from extender.allocator.derived import AttributeLookup, derived_of
from extender.allocator.errors import AllocationError, AllocationTimeout, AllocatorError, NodeAllocationError
from extender.allocator.explanations import (
    INCOMPATIBLE_GROUPS,
    SKIPS_OPERATIONS_GATE_OFF,
    SKIPS_OPERATIONS_UNDECLARED,
    explain,
)
from extender.allocator.inventory import Inventory, Pool, device_on_node
from extender.allocator.requests import Candidate, RequestData
from extender.allocator.results import DeviceResult, build_allocation
from extender.allocator.state import AllocatedState
from extender.allocator.tolerations import taints_tolerated
from extender.cel import CelCompileError, CelEnvironment, CelEvalError, CelInterruptedError
from extender.model.dra import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT,
    ALLOCATION_RESULTS_MAX,
    Device,
    DeviceID,
    DeviceRequest,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
    Selector,
)
from extender.model.nodeselector import NodeSelectorError
from extender.quantity import Quantity


class _ResultLimit(Exception):
    """A claim would exceed 32 results (upstream ``errAllocationResultMaxSizeExceeded``).

    No device choice can fix that, only a cheaper firstAvailable alternative: it propagates
    out of a firstAvailable request only when every alternative exceeded the limit, and is
    swallowed where one claim hands over to the next.
    """


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    #: The node declares DRAOptionalNodeOperations in ``status.declaredFeatures``.
    optional_node_operations: bool = False


@dataclass(slots=True)
class Unsatisfiable:
    """No allocation fits on this node; ``reason`` says what was missing, for people."""

    reason: str


class Allocator:
    """Allocates claims on one node at a time against one inventory and allocated state."""

    def __init__(
        self,
        inventory: Inventory,
        allocated: AllocatedState,
        cel: CelEnvironment,
        *,
        clock: Callable[[], float] = time.monotonic,
        new_share_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.inventory = inventory
        self.features = inventory.features
        self.allocated = allocated
        self.cel = cel
        self.clock = clock
        self.new_share_id = new_share_id

    def allocate(
        self, node: NodeInfo, claims: Sequence[ResourceClaim], *, timeout: float | None = None
    ) -> list[dict[str, Any]] | Unsatisfiable:
        """One ``status.allocation`` per claim (same order), or :class:`Unsatisfiable`.

        Raises :class:`AllocationError` (fatal), :class:`NodeAllocationError` (this node only)
        or :class:`AllocationTimeout` (the budget ran out).
        """
        deadline = None if timeout is None else self.clock() + timeout
        return _Attempt(self, node, claims, deadline).run()

    def free_matching(self, node: NodeInfo, claims: Sequence[ResourceClaim]) -> int:
        """How many devices of the node are free and match some request of ``claims`` (for scoring)."""
        return len(self.matching(node, claims, free_only=True))

    def matching(
        self, node: NodeInfo, claims: Sequence[ResourceClaim], *, free_only: bool = False
    ) -> list[tuple[Device, bool]]:
        """The node's devices that some request of ``claims`` selects (its class and selectors),
        each with whether it is free for such a request; ``free_only``: only the free ones (the
        cheap availability check first). Empty when a claim cannot be prepared (an unknown
        class, a CEL error)."""
        attempt = _Attempt(self, node, claims, None)
        try:
            for index, claim in enumerate(claims):
                attempt._prepare_claim(index, claim)
        except AllocatorError:
            return []
        requests = [data for per_claim in attempt.requests for alts in per_claim for data in alts]
        out: list[tuple[Device, bool]] = []
        for candidate in attempt.candidates:
            if attempt.refuses_node_operations(candidate.slice):
                continue  # never usable on this node: neither free nor held by anyone
            device = candidate.device
            found: bool | None = None  # None: no request selects it
            for data in requests:
                try:
                    if free_only and not attempt.available(data, device):
                        continue
                    if not attempt.selectable(data, device, candidate.slice):
                        continue
                    if free_only or attempt.available(data, device):
                        found = True
                        break
                    found = False
                except AllocatorError:
                    continue
            if found is not None:
                out.append((device, found))
        return out


class _Attempt:
    """The state of one Allocate call."""

    def __init__(
        self, allocator: Allocator, node: NodeInfo, claims: Sequence[ResourceClaim], deadline: float | None
    ) -> None:
        self.a = allocator
        self.features = allocator.features
        self.inventory = allocator.inventory
        self.node = node
        self.claims = claims
        self.deadline = deadline
        self.pools = self.inventory.pools_for(node.name, node.labels)
        self.candidates = [
            Candidate(d, s, p)
            for p in self.pools
            if not p.incomplete and not p.invalid
            for s in p.slices
            for d in s.devices
        ]
        #: Per claim, per request: the alternatives (one for plain requests).
        self.requests: list[list[list[RequestData]]] = []
        self.constraints: list[list[Constraint]] = []
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
        #: device -> claim indices allocating it in this attempt (non-shared picks).
        self.allocating: dict[DeviceID, set[int]] = {}
        #: shared devices: capacity consumed in this attempt.
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        #: Counters (available after allocated claims, consumed in this attempt) and compatibility groups.
        self.counters = CounterLedger(self.inventory.devices_of_pool, self.a.allocated)
        self.match_cache: dict[tuple[int, DeviceID], bool] = {}
        self.attribute = AttributeLookup(allocator.cel, deadline)
        self.rejected: dict[tuple[int, int], dict[str, set[DeviceID]]] = {}
        self.steps = 0

    # --- setup -------------------------------------------------------------------------------

    def claim_name(self, index: int) -> str:
        c = self.claims[index]
        return f"{c.namespace}/{c.name}"

    def run(self) -> list[dict[str, Any]] | Unsatisfiable:
        gather_error = self.inventory.gather_error(self.node.name, self.node.labels)
        if gather_error is not None:
            raise AllocationError(f"gather pool information: {gather_error}")
        for index, claim in enumerate(self.claims):
            self._prepare_claim(index, claim)
        try:
            found = self._allocate_one(0, 0, None, 0, 0)
        except _ResultLimit:
            found = False
        if found:
            return [
                build_allocation(self.claims[i], self.results[i], self.node.name, self.features)
                for i in range(len(self.claims))
            ]
        invalid = [p for p in self.pools if p.invalid]
        if invalid:
            reasons = "; ".join(f"{p}: {p.invalid_reason}" for p in invalid)
            raise NodeAllocationError(f"invalid resource pools were encountered ({reasons})")
        return Unsatisfiable(explain(self))

    def _prepare_claim(self, index: int, claim: ResourceClaim) -> None:
        name = self.claim_name(index)
        total = 0
        per_request: list[list[RequestData]] = []
        for request in claim.spec.requests:
            alternatives = self._prepare_request(index, name, request)
            per_request.append(alternatives)
            total += min(r.num_devices for r in alternatives)
        if total > ALLOCATION_RESULTS_MAX:
            raise AllocationError(
                f"claim {name}: number of requested devices {total} exceeds the claim limit of "
                f"{ALLOCATION_RESULTS_MAX}"
            )
        constraints: list[Constraint] = []
        lists = self.features.list_type_attributes
        for i, c in enumerate(claim.spec.constraints):
            if c.match_attribute is not None:
                constraints.append(MatchAttribute(c.requests, c.match_attribute, list_values=lists))
            elif c.distinct_attribute is not None and self.features.variant != "stable":
                constraints.append(
                    DistinctAttribute(
                        c.requests,
                        c.distinct_attribute,
                        list_values=lists,
                        every_device=self.features.since_1_37,
                    )
                )
            else:
                raise AllocationError(
                    f"claim {name}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
        self.requests.append(per_request)
        self.constraints.append(constraints)

    def _prepare_request(self, index: int, claim_name: str, request: DeviceRequest) -> list[RequestData]:
        # Upstream Allocate: the gate checks cover every subrequest before any is validated.
        if request.first_available and not self.features.prioritized_list:
            raise AllocationError(
                f"claim {claim_name}, request {request.name}: has subrequests, "
                "but the DRAPrioritizedList feature is disabled"
            )
        if not self.features.consumable_capacity:
            checked: list[tuple[str, ExactRequest | None]] = [
                ("subrequest", sub) for sub in request.first_available
            ]
            for kind, req in checked or [("request", request.exactly)]:
                if req is not None and req.capacity_requests is not None:
                    raise AllocationError(
                        f"claim {claim_name}, {kind} {req.name}: has capacity requests, "
                        "but the DRAConsumableCapacity feature is disabled"
                    )
        if request.first_available:
            return [
                self._validate(index, claim_name, sub, f"{request.name}/{sub.name}", request.name, sub.name)
                for sub in request.first_available
            ]
        # Neither field: kube-scheduler's PreFilter stops such a claim first ("unknown request
        # type"); called directly, the allocator reports what its validation would.
        exact = request.exactly or ExactRequest(
            request.name, "", (), ALLOCATION_MODE_EXACT, 1, None, (), None
        )
        return [self._validate(index, claim_name, exact, request.name, request.name, "")]

    def _validate(
        self, index: int, claim_name: str, req: ExactRequest, name: str, base: str, sub: str
    ) -> RequestData:
        # Upstream validateDeviceRequest says "request <name>" for subrequests too.
        where = f"claim {claim_name}, request {req.name}"
        # 1.37 validateDeviceRequest checks derived attributes first; 1.36 has no such field.
        derived = (
            derived_of(req.derived_attributes, enabled=self.features.derived_attributes, where=where)
            if self.features.since_1_37
            else {}
        )
        for i, selector in enumerate(req.selectors):
            if selector.expression is None:
                raise AllocationError(
                    f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        if req.admin_access is not None and not self.features.admin_access:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        if not req.device_class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.inventory.classes.get(req.device_class_name)
        if device_class is None:
            raise AllocationError(
                f"{where}: could not retrieve device class {req.device_class_name}: "
                f'deviceclass.resource.k8s.io "{req.device_class_name}" not found'
            )
        data = RequestData(index, req, name, base, sub, device_class, 0, derived=derived)
        if req.allocation_mode == ALLOCATION_MODE_EXACT:
            data.num_devices = req.count
        elif req.allocation_mode == ALLOCATION_MODE_ALL:
            data.all_devices = self._all_devices(data, where)
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {req.allocation_mode}")
        return data

    def _all_devices(self, data: RequestData, where: str) -> list[tuple[Device, ResourceSlice, Pool]]:
        out = []
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool} is currently invalid"
                )
            for s in pool.slices:
                for device in s.devices:
                    if not self.selectable(data, device, s):
                        continue
                    if self.features.consumable_capacity and not self._capacity_ok(data, device):
                        continue
                    out.append((device, s, pool))
        return out

    def _capacity_ok(self, data: RequestData, device: Device) -> bool:
        """:meth:`_capacity_fits` as a yes/no, without the arithmetic in the common case.

        A device nothing has consumed from, asked for no particular amount, with no request
        policy, is consumed whole: that always fits.
        """
        did = device.id
        if (
            data.request.capacity_requests is None
            and did not in self.a.allocated.capacity
            and did not in self.allocating_capacity
            and not any(c.request_policy is not None for c in device.capacity.values())
        ):
            return True
        return self._capacity_fits(data, device) is not None

    def _capacity_fits(self, data: RequestData, device: Device) -> dict[str, Quantity] | None:
        """Upstream ``CmpRequestOverCapacity``, run for every device while DRAConsumableCapacity is on.

        What allocated shares consumed, plus this attempt's shares, plus this request's
        consumption must stay within each capacity; a dedicated device has no shares, so for it
        this checks the request against the capacity (and the request policy) alone. Returns
        the consumption of every capacity (upstream ``GetConsumedCapacityFromRequest``), or None.
        """
        did = device.id
        return cap.fit(
            device.capacity,
            data.request.capacity_requests,
            self.a.allocated.capacity.get(did, {}),
            self.allocating_capacity.get(did, {}),
            self.features.fractional_capacity_range,
            self.features.since_1_37,
        )

    # --- selection -----------------------------------------------------------------------------

    def selectable(self, data: RequestData, device: Device, s: ResourceSlice) -> bool:
        """Upstream ``isSelectable``: class and request selectors, then per-device node selection.

        Devices that consume counters stay selectable with DRAPartitionableDevices off (their
        selectors run); :meth:`_allocate_device` refuses them.
        """
        if not self.features.device_binding and device.has_binding_conditions:
            return False
        key = (id(data), device.id)
        cached = self.match_cache.get(key)
        if cached is not None:
            return cached
        result = self._selectors_match(
            data, device, data.device_class.selectors, data.device_class.name
        ) and (self._selectors_match(data, device, data.request.selectors, None))
        if result and s.per_device_node_selection:
            try:
                result = device_on_node(device, self.node.name, self.node.labels)
            except NodeSelectorError as exc:
                raise AllocationError(str(exc)) from None
        self.match_cache[key] = result
        return result

    def _selectors_match(
        self, data: RequestData, device: Device, selectors: Sequence[Selector], cls: str | None
    ) -> bool:
        for i, selector in enumerate(selectors):
            expression = selector.expression or ""
            owner = f"class {cls}" if cls is not None else f"claim {self.claim_name(data.claim_index)}"
            program = self.a.cel.compile(expression)
            if isinstance(program, CelCompileError):
                raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {program}")
            try:
                if not self.a.cel.matches(program, device.cel(), self.deadline):
                    return False
            except CelInterruptedError:
                raise AllocationTimeout(
                    "timed out trying to allocate devices (during CEL evaluation)"
                ) from None
            except CelEvalError as exc:
                raise AllocationError(
                    f"{owner}: selector #{i} on device {device.id}: CEL runtime error: {exc}"
                ) from None
        return True

    # --- the search ----------------------------------------------------------------------------

    def _reject(self, data: RequestData, ri: int, reason: str, device: Device) -> None:
        self.rejected.setdefault((data.claim_index, ri), {}).setdefault(reason, set()).add(device.id)

    def _allocate_one(self, ci: int, ri: int, alternative: int | None, di: int, start: int) -> bool:
        """Upstream ``allocateOne`` (incubating), depth first."""
        if ci >= len(self.claims):
            return True
        per_request = self.requests[ci]
        if ri >= len(per_request):
            try:
                return self._allocate_one(ci + 1, 0, None, 0, 0)
            except _ResultLimit:
                return False  # not fatal: another choice for an earlier claim may need fewer devices
        alternatives = per_request[ri]
        if alternative is None:
            if len(alternatives) == 1 and not alternatives[0].sub:
                return self._allocate_one(ci, ri, 0, 0, 0)
            all_exceeded = True
            for a in range(len(alternatives)):
                try:
                    if self._allocate_one(ci, ri, a, 0, 0):
                        return True
                except _ResultLimit:
                    continue  # the next alternative may need fewer devices
                all_exceeded = False
            if all_exceeded:
                raise _ResultLimit  # no choice for this request fits: earlier requests must change
            return False
        data = alternatives[alternative]
        if data.all_devices is not None and not data.all_devices:
            return False  # "All" needs at least one device
        if di >= data.num_devices:
            return self._allocate_one(ci, ri + 1, None, 0, 0)
        if len(self.results[ci]) + data.num_devices - di > ALLOCATION_RESULTS_MAX:
            raise _ResultLimit
        self._tick()
        if data.all_devices is not None:
            device, s, pool = data.all_devices[di]
            undo = self._allocate_device(data, ri, device, s, pool, must=True)
            if undo is None:
                return False
            return self._descend(undo, ci, ri, alternative, di + 1, 0)
        if not self._enough_candidates(data, ri, start, data.num_devices - di):
            return False
        check_capacity = self.features.consumable_capacity
        for position in range(start, len(self.candidates)):
            candidate = self.candidates[position]
            device = candidate.device
            if not self.available(data, device) or not self.selectable(data, device, candidate.slice):
                continue
            if check_capacity and not self._capacity_ok(data, device):
                self._reject(data, ri, "out of capacity", device)
                continue
            undo = self._allocate_device(data, ri, device, candidate.slice, candidate.pool, must=False)
            if undo is None:
                continue
            if self._descend(undo, ci, ri, alternative, di + 1, position + 1):
                return True
        return False

    def _descend(
        self, undo: Callable[[], None], ci: int, ri: int, alternative: int, di: int, start: int
    ) -> bool:
        """Continue the search after a pick; on failure (or a result-limit abort) undo the pick."""
        try:
            found = self._allocate_one(ci, ri, alternative, di, start)
        except BaseException:
            undo()
            raise
        if not found:
            undo()
        return found

    def _enough_candidates(self, data: RequestData, ri: int, start: int, needed: int) -> bool:
        """A bound that never changes the answer: enough devices from ``start`` on that could be picked.

        Devices are picked in increasing position within a request, so a branch with fewer
        possibly-usable candidates left than devices still needed cannot succeed, and walking
        it changes nothing (a rejected candidate leaves no state behind: see
        :meth:`_allocate_device`). Upstream has no such bound; it walks that branch and
        evaluates the selectors of every device not in use, so this evaluates them first (in
        the same order) and lets a CEL error propagate.
        """
        constraints = self.constraints[data.claim_index]
        if data.derived and any(
            c.attribute in data.derived and c.covers(data.base, data.sub) for c in constraints
        ):
            return True  # upstream walks the branch and evaluates the derived attribute (errors are fatal)
        count = 0
        check_taints = self.features.device_taints
        fixed = [
            c
            for c in constraints
            if isinstance(c, MatchAttribute) and c.count > 0 and c.covers(data.base, data.sub)
        ]
        for position in range(start, len(self.candidates)):
            candidate = self.candidates[position]
            device = candidate.device
            if not self.available(data, device):
                continue
            if not self.selectable(data, device, candidate.slice):
                continue
            if any(not c.admits(device.attribute(c.attribute)) for c in fixed):
                self._reject(data, ri, "excluded by a constraint", device)  # the search would never see it
                continue
            if check_taints and not taints_tolerated(self.inventory.taints(device), data.request.tolerations):
                continue
            count += 1
            if count >= needed:
                return True
        return False

    def _tick(self) -> None:
        self.steps += 1
        if self.deadline is not None and self.steps % 16 == 0 and self.a.clock() > self.deadline:
            raise AllocationTimeout("timed out trying to allocate devices")

    def _shared(self, device: Device) -> bool:
        """Upstream ``allowMultipleAllocations``: only counts while DRAConsumableCapacity is on."""
        return self.features.consumable_capacity and device.allow_multiple_allocations

    def available(self, data: RequestData, device: Device) -> bool:
        """Upstream's cheap "in use" check (allocateOne's loop and allocateDevice).

        Admin access ignores every other holder, exclusive or not; only the same claim taking
        the device twice is refused. Otherwise a device is in use when an allocated claim holds
        it exclusively or this attempt picked it exclusively; shares never make it "in use".
        """
        did = device.id
        if data.request.admin_access:
            return data.claim_index not in self.allocating.get(did, ())
        return did not in self.a.allocated.dedicated and not self.allocating.get(did)

    def _allocate_device(
        self, data: RequestData, ri: int, device: Device, s: ResourceSlice, pool: Pool, *, must: bool
    ) -> Callable[[], None] | None:
        """Upstream ``allocateDevice``: take ``device`` if usable; the undo, or None.

        The checks run in upstream's order. Since kubernetes#140431 (v1.37.0, and v1.36.3 by
        cherry-pick #140663; read at v1.36.3, structured/internal/incubating
        ``allocateDevice``/``rollbackDevice``) a rejected candidate leaves nothing behind: every
        rejection after the counters were charged undoes what this call did (counters, the
        constraints added so far, the allocating mark), and a pick's undo is the same rollback.
        The counters of a device that allows multiple allocations are charged by its first
        share in this attempt (``countersReserved``) and released when that share is undone;
        the device's allocating-capacity entry (the "already shared" mark that lets later
        shares skip the counter check) is kept while an earlier share still needs it.
        """
        did = device.id
        multi = self._shared(device)
        admin = bool(data.request.admin_access)
        # Upstream repeats the loop's in-use checks here (skipping the same-claim one for
        # multi-allocatable devices, which are never marked allocating: the same answer).
        if not self.available(data, device):
            return None
        if not self.features.partitionable_devices and device.consumes_counters:
            self._reject(data, ri, "consuming counters while DRAPartitionableDevices is off", device)
            return None
        if self.refuses_node_operations(s):
            why = (
                SKIPS_OPERATIONS_UNDECLARED
                if self.features.optional_node_operations
                else SKIPS_OPERATIONS_GATE_OFF
            )
            self._reject(data, ri, why, device)
            return None
        skip_counter_check = multi and self._shared_already(did)
        counters_reserved = False
        leave_groups: Callable[[], None] | None = None
        if not skip_counter_check and device.consumes_counters:
            if self.features.device_compatibility_groups:
                leave_groups = self.counters.join_groups(device, pool)
                if leave_groups is None:
                    self._reject(data, ri, INCOMPATIBLE_GROUPS, device)
                    return None
            if not self.counters.charge_if_available(device, pool):
                if leave_groups is not None:
                    leave_groups()
                self._reject(data, ri, "out of counters", device)
                return None
            counters_reserved = True
        constraints = self.constraints[data.claim_index]
        added = 0
        marked = False
        consumption: dict[str, Quantity] | None = None
        entry_existed = False
        results = self.results[data.claim_index]
        result_added = False

        def rollback() -> None:
            # Upstream rollbackDevice: the opposite order of the changes below.
            if result_added:
                results.pop()
            if consumption is not None:
                totals = self.allocating_capacity.get(did)
                if totals is not None:
                    for name, amount in consumption.items():
                        if name in totals:
                            totals[name] -= amount.value
                    if all(v == 0 for v in totals.values()):
                        del self.allocating_capacity[did]
                if entry_existed and did not in self.allocating_capacity:
                    self.allocating_capacity[did] = {}
            if marked:
                self.allocating[did].discard(data.claim_index)
            for constraint in reversed(constraints[:added]):
                constraint.remove(data.base, data.sub)
            if leave_groups is not None:
                leave_groups()
            if counters_reserved:
                self.counters.charge(device, pool, -1)

        if self.features.device_taints and not taints_tolerated(
            self.inventory.taints(device), data.request.tolerations
        ):
            rollback()
            return None

        def derived_or_own(name: str) -> tuple[str, Any] | None:
            return self.attribute(data.derived, device, name)

        value_of = derived_or_own if data.derived else device.attribute
        for constraint in constraints:
            try:
                fits = constraint.add(data.base, data.sub, value_of)
            except AllocatorError:
                rollback()  # a derived attribute's CEL error: fatal, nothing left behind
                raise
            if not fits:
                rollback()
                if must:
                    raise AllocationError(
                        f"claim {self.claim_name(data.claim_index)}, request {data.request.name}: "
                        f"cannot add device {did} because a claim constraint would not be satisfied"
                    )
                self._reject(data, ri, "excluded by a constraint", device)
                return None
            added += 1
        if not multi:
            self.allocating.setdefault(did, set()).add(data.claim_index)
            marked = True
        if self.features.consumable_capacity:
            if multi:
                fitted = self._capacity_fits(data, device)
                fits = fitted is not None
            else:
                fitted, fits = None, self._capacity_ok(data, device)
            if not fits:
                # Only reachable in All mode (the search loop checked capacity already).
                rollback()
                self._reject(data, ri, "out of capacity", device)
                return None
            if fitted is not None:
                entry_existed = did in self.allocating_capacity
                totals = self.allocating_capacity.setdefault(did, {})
                for name, amount in fitted.items():
                    totals[name] = totals.get(name, Fraction(0)) + amount.value
                consumption = fitted
        results.append(
            DeviceResult(
                request=data,
                device=device,
                slice=s,
                admin_access=admin,
                share_id=self.a.new_share_id() if multi else None,
                consumed_capacity=consumption or None,
            )
        )
        result_added = True
        return rollback

    def refuses_node_operations(self, s: ResourceSlice) -> bool:
        """v1.37.0 allocateDevice (DRAOptionalNodeOperations, kubernetes#139933): a device whose
        slice skips node operations needs the gate and a node that declares the feature."""
        return bool(s.skip_node_operations) and not (
            self.features.optional_node_operations and self.node.optional_node_operations
        )

    def _shared_already(self, did: DeviceID) -> bool:
        """Upstream ``deviceCapacityInUse``: a share of ``did`` exists, so its counters are paid.

        An allocated share counts whether or not it recorded consumedCapacity: since
        kubernetes#140437 (v1.37.0; not in 1.36) a share known only by its shareID in
        ``AllocatedSharedDeviceIDs`` lets a new share skip the counter check as well.
        """
        allocated = self.a.allocated
        return did in allocated.capacity or did in allocated.shared_ids or did in self.allocating_capacity
