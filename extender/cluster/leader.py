"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

The holder renews ``spec.renewTime`` every ``retry_period``; it stops leading when it could not
renew within ``renew_deadline``. A candidate takes the lease over only after it has *observed*
the same lease record unchanged for a whole ``lease_duration`` on its own clock (no trust in the
other replica's clock). Every write carries the resourceVersion it read, so two candidates can
never both win.
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from extender.cluster.api import ApiConflict, ApiNotFound, ClusterAPIError
from extender.cluster.kube import RawKube

log = logging.getLogger("dra_extender.leader")
#: Per request when releasing the Lease at shutdown (the process is about to exit).
RELEASE_TIMEOUT = 2.0


def _micro_time(wall: float) -> str:
    return _dt.datetime.fromtimestamp(wall, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    def __init__(
        self,
        raw: RawKube,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        takeover_delay: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.raw = raw
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self.collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace, self.name, self.identity = namespace, name, identity
        self.lease_duration, self.renew_deadline, self.retry_period = (
            lease_duration,
            renew_deadline,
            retry_period,
        )
        self.clock, self.wall_clock = clock, wall_clock
        self._leading_until = 0.0  # monotonic: leadership lapses unless renewed before this
        #: After taking the lease over from another holder, how long this replica waits before
        #: its first write: the previous leader's writes that passed its fence may still land
        #: that long after it stopped (docs/leader-election.md).
        self.takeover_delay = takeover_delay
        self._writes_from = 0.0  # monotonic: no write before this (the takeover delay)
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.transitions = 0

    def is_leader(self) -> bool:
        """Holds the lease: the last successful renewal *started* less than renew_deadline ago
        (by this process's monotonic clock; a successor takes over only after observing the
        record unchanged for a whole lease_duration on its own)."""
        return self.clock() < self._leading_until

    def may_write(self) -> str | None:
        """Why this replica may not write to the API server now, or None: the fence every
        write checks right before it is sent."""
        now = self.clock()
        if now >= self._leading_until:
            return "this replica does not hold the Lease (or its renewal lapsed)"
        if now < self._writes_from:
            return (
                f"took the Lease over {now - (self._writes_from - self.takeover_delay):.1f}s ago; "
                f"writes start {self.takeover_delay:g}s after a takeover, when no write of the "
                "previous leader can still land"
            )
        return None

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.try_acquire_or_renew()
            except ClusterAPIError as exc:
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            stop.wait(self.retry_period)
        if self.is_leader():
            self.release()
            log.info("lease %s/%s: released by %s", self.namespace, self.name, self.identity)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="leader-election", daemon=True)
        thread.start()
        return thread

    def _spec(self, acquire: float, transitions: int) -> dict[str, Any]:
        now = self.wall_clock()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": _micro_time(acquire),
            "renewTime": _micro_time(now),
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        now = self.clock()
        try:
            lease = self.raw.request("GET", self.path)
        except ApiNotFound:
            lease = None
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(self.wall_clock(), 0),
            }
            try:
                self.raw.request("POST", self.collection, body=body)
            except ClusterAPIError:
                return self.is_leader()  # someone else created it first
            return self._won(now, "created the lease")
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, now
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now < self._observed_at + duration:
            self._leading_until = 0.0
            return False  # someone else holds a lease that we have seen renewed recently
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire_wall = self.wall_clock()
        if holder == self.identity:
            acquire_text = spec.get("acquireTime")
            lease["spec"] = {
                **self._spec(acquire_wall, transitions),
                "acquireTime": acquire_text or _micro_time(acquire_wall),
            }
        else:
            lease["spec"] = self._spec(acquire_wall, transitions + 1)
        try:
            self.raw.request("PUT", self.path, body=lease)
        except ApiConflict:
            return self.is_leader()
        return self._won(
            now,
            "renewed" if holder == self.identity else f"took over from {holder or 'nobody'}",
            # A released lease (no holder) was given up after its holder's writes had settled.
            takeover=bool(holder) and holder != self.identity,
        )

    def _won(self, started: float, how: str, *, takeover: bool = False) -> bool:
        if not self.is_leader():
            self.transitions += 1
            if takeover:
                self._writes_from = started + self.takeover_delay
            log.info(
                "lease %s/%s: %s is the leader (%s)%s",
                self.namespace,
                self.name,
                self.identity,
                how,
                f"; first write in {self.takeover_delay:g}s" if takeover and self.takeover_delay else "",
            )
        self._leading_until = started + self.renew_deadline
        return True

    def deposed(self, why: str) -> None:
        """The API server refused a write of this replica because another holds the Lease
        (store-enforced fencing): stop writing now, before the next renewal finds out."""
        if self._leading_until:
            log.warning("lease %s/%s: %s stands down: %s", self.namespace, self.name, self.identity, why)
        self._leading_until = 0.0

    def release(self) -> None:
        """Give the lease up (on shutdown) so a successor does not wait a whole duration.

        Call it only once no write of this replica can still land (the caller drains them): a
        successor that finds the lease released writes at once.
        """
        self._leading_until = 0.0  # no write from here on, whatever the release's outcome
        try:
            lease = self.raw.request("GET", self.path, timeout=RELEASE_TIMEOUT)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            # As client-go's ReleaseOnCancel: no holder, a one-second lease (the read's
            # resourceVersion is the precondition: a lease taken meanwhile is left alone).
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            self.raw.request("PUT", self.path, body=lease, timeout=RELEASE_TIMEOUT)
        except ClusterAPIError as exc:
            log.warning("releasing the lease failed: %s", exc)
        self._leading_until = 0.0
