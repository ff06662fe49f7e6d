"""Claim writes the cache may not show yet: the extender's assume cache.

Upstream's scheduler keeps written claims in an assume cache until its informer catches up.
We go one step further, because a write can be applied by the API server with its answer lost:
every write that *takes* devices (storing an allocation) or reserves a claim is recorded here
before it is sent, and stays until the claim cache settles it:

* ``PENDING``: not answered yet. Never dropped, however long the API server takes.
* ``WRITTEN``: answered; we hold the object as written. Until the cache shows the claim at that
  resourceVersion or newer, decisions see our object instead of the cached one (an overlay).
* ``UNKNOWN``: sent on top of resourceVersion R, outcome unknown (timeout, connection lost, 5xx,
  an answer that does not show the write). The write can only ever land as the *next* change
  after R, so once the cache shows the claim at any resourceVersion newer than R, the cache
  says whether it landed; until then its devices stay taken.

A claim that is gone from the cache (or replaced: another UID) settles every record for it,
except a claim this extender creates (the extended-resource claim): until the cache has moved
past the resourceVersion the create answered with, its absence only means the watch is behind.
A shared claim can have one record per pod writing it (one allocating, the others reserving).
Releasing devices (unreserve, deallocate) needs no record: seeing a release late is safe.

Pure: no I/O and no clock; the tracker settles it before every snapshot (:mod:`snapshots`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Set
from dataclasses import dataclass
from typing import Any

from extender.cluster.state import is_newer
from extender.model.dra import Allocation, DeviceID, ResourceClaim, parse_allocation, parse_resource_claim
from extender.model.errors import ObjectError
from extender.model.reader import Reader

#: One settle in this many looks at every record, whatever changed (a safety net: the others
#: look only at claims that changed, and a record missed only keeps its devices taken longer).
FULL_SETTLE_EVERY = 64

Key = tuple[str, str]


class WriteState(enum.Enum):
    PENDING = "pending"
    WRITTEN = "written"
    UNKNOWN = "unknown"
    #: Not a write: devices kept for a pod whose bind kube-scheduler has probably decided but
    #: not sent (see :meth:`AssumedClaims.hold`).
    HELD = "held"


@dataclass(slots=True)
class AssumedWrite:
    key: Key
    claim_uid: str
    pod_uid: str
    pod: Key
    node: str
    #: The ``status.allocation`` being stored, or None when the claim was allocated already.
    allocation: dict[str, Any] | None
    #: Parsed once: the devices this write takes (None: it takes none).
    devices: Allocation | None
    state: WriteState = WriteState.PENDING
    #: resourceVersion the write in flight was based on (its precondition).
    sent_on: str = ""
    #: The claim as the API server answered the last write (WRITTEN).
    written: ResourceClaim | None = None
    started: float = 0.0
    #: The claim is created by this bind: ``claim_uid`` is '' until the create is answered, then
    #: ``created_rv`` is the resourceVersion it was created (or found) at.
    creating: bool = False
    created_rv: str = ""
    #: The ``reservedFor`` entry written, when not the pod's own (its PodGroup's).
    consumer: dict[str, str] | None = None


def _settled(record: AssumedWrite, cached: ResourceClaim | None, seen_rv: str) -> bool:
    if record.state is WriteState.HELD:  # until the claim is gone or allocated (by anyone)
        return cached is None or cached.uid != record.claim_uid or cached.allocation is not None
    if record.creating and not record.claim_uid:
        return False  # being created: nothing to compare with yet (an interrupted bind forgets it)
    if cached is None and record.creating:
        # Created by us: gone only once the cache has moved past its creation without showing it.
        return bool(seen_rv) and is_newer(seen_rv, record.created_rv)
    if cached is None or cached.uid != record.claim_uid:
        return True  # the claim is gone (or was replaced): nothing of it can be held
    if record.state is WriteState.PENDING:
        return False
    if record.state is WriteState.WRITTEN:
        assert record.written is not None
        written = record.written.resource_version
        return cached.resource_version == written or is_newer(cached.resource_version, written)
    return is_newer(cached.resource_version, record.sent_on)


class AssumedClaims:
    """Records by claim and pod (a shared claim can be written for several pods at once);
    ``version`` changes whenever decisions could differ."""

    def __init__(self) -> None:
        self._records: dict[Key, dict[str, AssumedWrite]] = {}
        #: The same records by pod UID: a bind looks at its own pod's records, not at every
        #: write the cache has not shown yet (that scan was 2% of the extender's CPU at 500 x 8).
        self._by_pod: dict[str, dict[Key, AssumedWrite]] = {}
        self.version = 0
        #: Claims whose records changed since the consumer last drained this (see Snapshots).
        self.touched: set[Key] = set()
        #: Claims whose records changed since the last settle, and those with a record of a
        #: claim being created (they settle on the claims cache's progress, not on the claim).
        self._dirty: set[Key] = set()
        self._creating: set[Key] = set()
        self._settled_at_rv = ""
        self._settles = 0
        #: Pod UID -> its held records (see :meth:`hold`), oldest pod first.
        self._holds: dict[str, list[AssumedWrite]] = {}
        #: :meth:`overlay`'s newest written claims, and the claims whose records changed since
        #: (read again for the next overlay, those only: a snapshot is made for every cache
        #: change, and reading every record in flight each time was 1.8% of the extender's CPU
        #: with hundreds of binds in flight, issue 54). Replaced, never changed in place: an
        #: older snapshot's overlay keeps the view it was made with.
        self._newer: dict[Key, ResourceClaim] = {}
        self._newer_stale: set[Key] = set()

    def entries(self) -> dict[str, int]:
        """How many entries each of its maps holds (read by /metrics from the HTTP thread: each
        ``len`` is one step under the GIL)."""
        return {
            "claim_records": len(self._records),
            "pods_with_records": len(self._by_pod),
            "claims_touched": len(self.touched),
            "claims_dirty": len(self._dirty),
            "claims_creating": len(self._creating),
            "holds": len(self._holds),
        }

    def __len__(self) -> int:
        # Read by /metrics from the HTTP thread: copy the view first (one step under the GIL).
        records = [r for by_pod in list(self._records.values()) for r in list(by_pod.values())]
        return sum(1 for r in records if r.state is not WriteState.HELD)

    @property
    def holding(self) -> bool:
        return bool(self._holds)

    def __iter__(self) -> Iterator[AssumedWrite]:
        return iter([r for by_pod in self._records.values() for r in by_pod.values()])

    def of(self, key: Key) -> list[AssumedWrite]:
        """The records of one claim."""
        return list(self._records.get(key, {}).values())

    def of_pod(self, pod_uid: str) -> list[AssumedWrite]:
        """The records of one pod."""
        return list(self._by_pod.get(pod_uid, {}).values())

    def _put(self, record: AssumedWrite) -> None:
        self._records.setdefault(record.key, {})[record.pod_uid] = record
        self._by_pod.setdefault(record.pod_uid, {})[record.key] = record

    def _drop(self, key: Key, pod_uid: str) -> None:
        """Remove the record of ``key`` for ``pod_uid`` from both maps (it must be there)."""
        by_pod = self._records[key]
        del by_pod[pod_uid]
        if not by_pod:
            del self._records[key]
            self._creating.discard(key)
        mine = self._by_pod[pod_uid]
        del mine[key]
        if not mine:
            del self._by_pod[pod_uid]

    def _changed(self, key: Key) -> None:
        self.version += 1
        self._newer_stale.add(key)
        self.touched.add(key)
        self._dirty.add(key)

    def assume(
        self,
        claim: ResourceClaim,
        pod_uid: str,
        pod: Key,
        node: str,
        allocation: dict[str, Any] | None,
        now: float,
        consumer: dict[str, str] | None = None,
    ) -> AssumedWrite:
        """Record a write before it is sent (its devices are taken from now on)."""
        devices = parse_allocation(Reader(allocation, "allocation")) if allocation is not None else None
        record = AssumedWrite(
            claim.key, claim.uid, pod_uid, pod, node, allocation, devices, started=now, consumer=consumer
        )
        self._put(record)
        self._changed(claim.key)
        return record

    def hold(
        self, claim: ResourceClaim, pod_uid: str, pod: Key, node: str, allocation: dict[str, Any], now: float
    ) -> None:
        """Keep ``allocation``'s devices for the pod, which kube-scheduler will probably bind to
        ``node`` next, until :meth:`release_holds` or :meth:`expire_holds` (or the claim is
        allocated or gone). Nothing is written; a write of the claim for that pod replaces it."""
        by_pod = self._records.setdefault(claim.key, {})
        if pod_uid in by_pod:
            return
        devices = parse_allocation(Reader(allocation, "allocation"))
        record = AssumedWrite(
            claim.key, claim.uid, pod_uid, pod, node, allocation, devices, WriteState.HELD, started=now
        )
        self._put(record)
        self._holds.setdefault(pod_uid, []).append(record)
        self._changed(claim.key)

    def release_holds(self, pod_uid: str) -> None:
        """The pod's bind or next filter came: what was held for it is not any more."""
        for record in self._holds.pop(pod_uid, ()):
            if record.state is WriteState.HELD:
                self.forget(record)

    def expire_holds(self, started_before: float) -> None:
        """Drop the holds made before this time (the bind never came: another node, or none)."""
        for pod_uid, records in list(self._holds.items()):
            if records and records[0].started < started_before:
                self.release_holds(pod_uid)

    def assume_creation(
        self, key: Key, pod_uid: str, pod: Key, node: str, allocation: dict[str, Any], now: float
    ) -> AssumedWrite:
        """Record the allocation of a claim this bind is about to create (taken from now on)."""
        devices = parse_allocation(Reader(allocation, "allocation"))
        record = AssumedWrite(key, "", pod_uid, pod, node, allocation, devices, started=now, creating=True)
        self._put(record)
        self._creating.add(key)
        self._changed(key)
        return record

    def created(self, record: AssumedWrite, claim: ResourceClaim) -> None:
        """The create was answered (or the claim found): the record now follows that object."""
        record.claim_uid = claim.uid
        record.created_rv = claim.resource_version
        self._changed(record.key)

    def sending(self, record: AssumedWrite, resource_version: str) -> None:
        record.state = WriteState.PENDING
        record.sent_on = resource_version
        self._newer_stale.add(record.key)  # a written record sent again no longer stands in the overlay

    def written(
        self, record: AssumedWrite, answer: dict[str, Any], previous: ResourceClaim | None = None
    ) -> None:
        """The API server answered with the claim as it now is (``previous``: the claim the write
        was made on, whose unchanged parts are reused)."""
        try:
            claim = parse_resource_claim(answer, previous, record.devices)
        except ObjectError:
            self.unknown(record)
            return
        record.state = WriteState.WRITTEN
        record.written = claim
        self._changed(record.key)

    def unknown(self, record: AssumedWrite) -> None:
        record.state = WriteState.UNKNOWN
        self._changed(record.key)

    def forget(self, record: AssumedWrite) -> None:
        """The write provably did not happen (the API server refused it)."""
        if self._records.get(record.key, {}).get(record.pod_uid) is record:
            self._drop(record.key, record.pod_uid)
            self._changed(record.key)

    def interrupted(self, pod_uid: str) -> None:
        """The pod's bind ended without resolving its writes (an exception, a cancellation)."""
        for record in self.of_pod(pod_uid):
            if record.state is WriteState.PENDING:
                if record.sent_on:
                    self.unknown(record)  # it may have been sent: keep its devices taken
                else:
                    self.forget(record)

    def settle(
        self, claims: Mapping[Key, ResourceClaim], seen_rv: str = "", changed: Set[Key] | None = None
    ) -> None:
        """Drop the records the cache now shows the outcome of.

        ``seen_rv``: the newest resourceVersion the claims cache has seen (list or event).
        ``changed``: the claims the cache changed since the last settle (None: unknown). Only
        those, the claims whose records changed, and claims being created are looked at, so a
        settle costs what changed, not every write in flight; every ``FULL_SETTLE_EVERY``-th
        looks at all (a record left unsettled only keeps its devices taken longer).
        """
        self._settles += 1
        if changed is None or self._settles % FULL_SETTLE_EVERY == 0:
            keys: Iterable[Key] = list(self._records)
        else:
            candidates = changed | self._dirty
            if seen_rv != self._settled_at_rv:
                candidates = candidates | self._creating
            keys = [k for k in candidates if k in self._records]
        self._settled_at_rv = seen_rv
        for key in keys:
            cached = claims.get(key)
            settled = [u for u, r in self._records[key].items() if _settled(r, cached, seen_rv)]
            for uid in settled:
                self._drop(key, uid)
            if settled:
                self._changed(key)
        self._dirty.clear()  # looked at now, with what settling itself changed

    def unsettled(self, claims: Mapping[Key, ResourceClaim], seen_rv: str = "") -> list[AssumedWrite]:
        """The records the cache does not show the outcome of yet, read only (the views use it:
        what :meth:`settle` would keep, without dropping anything)."""
        return [r for r in self if not _settled(r, claims.get(r.key), seen_rv)]

    # --- what decisions see --------------------------------------------------------------------

    def overlay(self, claims: Mapping[Key, ResourceClaim]) -> Mapping[Key, ResourceClaim]:
        """The claims with our newest written objects in place of the cached ones."""
        if self._newer_stale:
            newer = dict(self._newer)
            for key in self._newer_stale:
                best: ResourceClaim | None = None
                for record in self._records.get(key, {}).values():
                    written = record.written
                    if record.state is not WriteState.WRITTEN or written is None:
                        continue
                    if best is None or is_newer(written.resource_version, best.resource_version):
                        best = written
                if best is None:
                    newer.pop(key, None)
                else:
                    newer[key] = best
            self._newer = newer
            self._newer_stale = set()
        newer = self._newer
        if not newer:
            return claims
        # A view, not a copy: copying every cached claim per snapshot made binds cost more as
        # claims accumulated (there is always a write in flight under load).
        return Overlay(newer, claims)

    def held(self, claims: Mapping[Key, ResourceClaim]) -> list[Allocation]:
        """Devices taken by writes whose outcome ``claims`` (the overlay) does not show yet."""
        return [devices for key in self._records for _pod, devices in self.held_for(key, claims.get(key))]

    def held_for(self, key: Key, shown: ResourceClaim | None) -> list[tuple[str, Allocation]]:
        """(pod, devices) of the writes of one claim that ``shown`` (its overlay) does not show."""
        if shown is not None and shown.allocation is not None:
            return []
        return [
            (pod_uid, record.devices)
            for pod_uid, record in self._records.get(key, {}).items()
            if record.devices is not None and record.state is not WriteState.WRITTEN
        ]

    def allocating(self, key: Key) -> AssumedWrite | None:
        """A record of an allocation of ``key`` whose outcome is not known yet."""
        for record in self._records.get(key, {}).values():
            if record.devices is not None and record.state not in (WriteState.WRITTEN, WriteState.HELD):
                return record
        return None


def taken_by_others(claims: Iterable[ResourceClaim], key: Key, devices: Allocation) -> set[DeviceID]:
    """The devices ``devices`` (an allocation of claim ``key``) takes that another of ``claims``
    holds: a device either takes whole (a share of a device shared by ID can sit beside
    others; admin access takes nothing)."""
    mine = set(devices.exclusive)
    shared = {r.id for r in devices.shares}
    out: set[DeviceID] = set()
    for claim in claims:
        other = claim.allocation
        if other is None or claim.key == key:
            continue
        out |= mine & ({*other.exclusive} | {r.id for r in other.shares})
        out |= shared & set(other.exclusive)
    return out


class Overlay(Mapping[Key, ResourceClaim]):
    """``base`` with ``newer`` in place (read-only view; lookups cost two dict probes at most)."""

    __slots__ = ("_base", "_newer")

    def __init__(self, newer: Mapping[Key, ResourceClaim], base: Mapping[Key, ResourceClaim]) -> None:
        self._newer = newer
        self._base = base

    def __getitem__(self, key: Key) -> ResourceClaim:
        found = self._newer.get(key)
        return found if found is not None else self._base[key]

    def get(self, key: Key, default: Any = None) -> Any:
        found = self._newer.get(key)
        return found if found is not None else self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._newer or key in self._base

    def __iter__(self) -> Iterator[Key]:
        yield from self._base
        yield from (key for key in self._newer if key not in self._base)

    def __len__(self) -> int:
        return len(self._base) + sum(1 for key in self._newer if key not in self._base)

    def copy(self) -> dict[Key, ResourceClaim]:
        """The claims this view shows, as a dict of their own (two dict copies in C)."""
        out = dict(self._base)
        out.update(self._newer)
        return out
