"""Leader election's fence: when a replica may write, by its own monotonic clock.

Two electors share a Lease on the fake API server (real HTTP); each has a clock of its own that
the test moves. The timing argument (docs/leader-election.md): the holder stops
writing renew_deadline after the *start* of its last successful renewal; a candidate takes over
only after observing the record unchanged for lease_duration, and writes only takeover_delay
later, once no write the old holder sent before its fence can still be applied.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client as k8s

from extender.cluster.kube import RawKube, bounded_retries
from extender.cluster.leader import LeaseElector
from tests.fakeapi.server import FakeApiServer

DURATION, RENEW, TAKEOVER = 3.0, 2.0, 12.0


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


def elector(fake: FakeApiServer, name: str, clock: Clock) -> LeaseElector:
    raw = RawKube(k8s.ApiClient(bounded_retries(k8s.Configuration(host=fake.url))), timeout=5)
    return LeaseElector(
        raw,
        "default",
        "dra-extender",
        name,
        lease_duration=DURATION,
        renew_deadline=RENEW,
        retry_period=0.5,
        takeover_delay=TAKEOVER,
        clock=clock,
    )


def test_the_holder_stops_writing_renew_deadline_after_its_last_renewal_started(fake: FakeApiServer) -> None:
    clock = Clock()
    a = elector(fake, "a", clock)
    assert a.try_acquire_or_renew()
    assert a.may_write() is None  # created the Lease: nobody held it, nothing to wait for
    clock.now += RENEW - 0.01
    assert a.may_write() is None
    clock.now += 0.01
    assert a.may_write() == "this replica does not hold the Lease (or its renewal lapsed)"
    assert not a.is_leader()


def test_a_takeover_waits_for_the_old_leaders_writes_before_its_first(fake: FakeApiServer) -> None:
    clock_a, clock_b = Clock(), Clock(5000.0)  # unrelated clocks: nothing is compared across them
    a, b = elector(fake, "a", clock_a), elector(fake, "b", clock_b)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # observed a's record: waits a whole lease duration
    clock_b.now += DURATION - 0.01
    assert not b.try_acquire_or_renew()
    # a froze (no renewal); its fence closed RENEW after its renewal started.
    clock_a.now += RENEW
    assert a.may_write() is not None
    clock_b.now += 0.02
    assert b.try_acquire_or_renew() and b.is_leader()
    why = b.may_write()
    assert why is not None and why.startswith("took the Lease over 0.0s ago; writes start 12s after")
    for _ in range(int(TAKEOVER) - 1):  # b renews as time passes
        clock_b.now += 1.0
        assert b.try_acquire_or_renew()
        assert b.may_write() is not None
    clock_b.now += 0.99
    assert b.may_write() is not None
    clock_b.now += 0.01
    assert b.may_write() is None
    assert fake.get("Lease", "dra-extender", "default")["spec"]["holderIdentity"] == "b"
    # a wakes up believing nothing happened: its next renewal finds b holding the Lease.
    assert not a.try_acquire_or_renew()
    assert a.may_write() is not None


def test_a_released_lease_is_taken_over_without_the_delay(fake: FakeApiServer) -> None:
    clock_a, clock_b = Clock(), Clock()
    a, b = elector(fake, "a", clock_a), elector(fake, "b", clock_b)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()  # only after its writes drained (the service waits for that before releasing)
    assert a.may_write() is not None
    clock_b.now += 1.0  # the released lease lasts one second
    assert b.try_acquire_or_renew()
    assert b.may_write() is None


def test_a_replica_the_api_server_refuses_as_not_leading_stops_writing_at_once(fake: FakeApiServer) -> None:
    # The store fence (manifests/*leader-fence.yaml) refused one of its writes: another replica
    # holds the Lease. It stops before its next renewal would have found out.
    clock = Clock()
    a = elector(fake, "a", clock)
    assert a.try_acquire_or_renew() and a.may_write() is None
    a.deposed("403: ... denied request: dra-extender: not the leader")
    assert a.may_write() == "this replica does not hold the Lease (or its renewal lapsed)"
    assert not a.is_leader()
