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

A claim that is gone from the cache (or replaced: another UID) settles every record for it.
Releasing devices (unreserve, deallocate) needs no record: seeing a release late is safe.

Pure: no I/O and no clock; the engine calls :meth:`settle` before every snapshot.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from extender.model.dra import Allocation, ResourceClaim, parse_allocation, parse_resource_claim
from extender.model.errors import ObjectError
from extender.model.reader import Reader

Key = tuple[str, str]


class WriteState(enum.Enum):
    PENDING = "pending"
    WRITTEN = "written"
    UNKNOWN = "unknown"


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


def _rv(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def is_newer(cached: str, reference: str) -> bool:
    """``cached`` > ``reference`` (resourceVersions are etcd revisions; otherwise: just differs)."""
    a, b = _rv(cached), _rv(reference)
    if a is None or b is None:
        return cached != reference
    return a > b


def _settled(record: AssumedWrite, cached: ResourceClaim | None) -> bool:
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
    """At most one record per claim; ``version`` changes whenever decisions could differ."""

    def __init__(self) -> None:
        self._records: dict[Key, AssumedWrite] = {}
        self.version = 0

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[AssumedWrite]:
        return iter(list(self._records.values()))

    def get(self, key: Key) -> AssumedWrite | None:
        return self._records.get(key)

    def _changed(self) -> None:
        self.version += 1

    def assume(
        self,
        claim: ResourceClaim,
        pod_uid: str,
        pod: Key,
        node: str,
        allocation: dict[str, Any] | None,
        now: float,
    ) -> AssumedWrite:
        """Record a write before it is sent (its devices are taken from now on)."""
        devices = parse_allocation(Reader(allocation, "allocation")) if allocation is not None else None
        record = AssumedWrite(claim.key, claim.uid, pod_uid, pod, node, allocation, devices, started=now)
        self._records[claim.key] = record
        self._changed()
        return record

    def sending(self, record: AssumedWrite, resource_version: str) -> None:
        record.state = WriteState.PENDING
        record.sent_on = resource_version

    def written(self, record: AssumedWrite, answer: dict[str, Any]) -> None:
        """The API server answered with the claim as it now is."""
        try:
            claim = parse_resource_claim(answer)
        except ObjectError:
            self.unknown(record)
            return
        record.state = WriteState.WRITTEN
        record.written = claim
        self._changed()

    def unknown(self, record: AssumedWrite) -> None:
        record.state = WriteState.UNKNOWN
        self._changed()

    def forget(self, record: AssumedWrite) -> None:
        """The write provably did not happen (the API server refused it)."""
        if self._records.get(record.key) is record:
            del self._records[record.key]
            self._changed()

    def interrupted(self, pod_uid: str) -> None:
        """The pod's bind ended without resolving its writes (an exception, a cancellation)."""
        for record in list(self._records.values()):
            if record.pod_uid == pod_uid and record.state is WriteState.PENDING:
                if record.sent_on:
                    self.unknown(record)  # it may have been sent: keep its devices taken
                else:
                    self.forget(record)

    def settle(self, claims: Mapping[Key, ResourceClaim]) -> None:
        """Drop the records the cache now shows the outcome of."""
        done = [k for k, r in self._records.items() if _settled(r, claims.get(k))]
        for key in done:
            del self._records[key]
        if done:
            self._changed()

    # --- what decisions see --------------------------------------------------------------------

    def overlay(self, claims: Mapping[Key, ResourceClaim]) -> Mapping[Key, ResourceClaim]:
        """The claims with our newer written objects in place of the cached ones."""
        newer = {
            k: r.written for k, r in self._records.items() if r.state is WriteState.WRITTEN and r.written
        }
        if not newer:
            return claims
        merged = dict(claims)
        merged.update(newer)
        return merged

    def held(self, claims: Mapping[Key, ResourceClaim]) -> list[Allocation]:
        """Devices taken by writes whose outcome ``claims`` (the overlay) does not show yet."""
        out = []
        for key, record in self._records.items():
            if record.devices is None or record.state is WriteState.WRITTEN:
                continue
            shown = claims.get(key)
            if shown is None or shown.allocation is None:
                out.append(record.devices)
        return out

    def allocating(self, key: Key) -> AssumedWrite | None:
        """The record of an allocation of ``key`` whose outcome is not known yet."""
        record = self._records.get(key)
        if record is None or record.devices is None or record.state is WriteState.WRITTEN:
            return None
        return record
