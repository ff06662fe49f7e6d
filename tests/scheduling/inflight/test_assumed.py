"""The assume cache of claim writes: when a write's devices stop being taken."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from extender.cluster.state import is_newer
from extender.model.dra import ResourceClaim, parse_resource_claim
from extender.scheduling.inflight.assumed import AssumedClaims, AssumedWrite, Overlay, WriteState
from tests.builders import allocated, claim

ALLOCATION = allocated(("driver-a", "pool-1", "d0"))


def cached(rv: str, *, allocation: dict[str, Any] | None = None, uid: str = "uid-c") -> ResourceClaim:
    raw = claim("c", allocation=allocation, uid=uid)
    raw["metadata"]["resourceVersion"] = rv
    return parse_resource_claim(raw)


def record_in(state: WriteState, assumed: AssumedClaims) -> AssumedWrite:
    record = assumed.assume(cached("10"), "uid-p", ("default", "p"), "node-1", ALLOCATION, 0.0)
    assumed.sending(record, "10")
    if state is WriteState.WRITTEN:
        written = claim("c", allocation=ALLOCATION, uid="uid-c")
        written["metadata"]["resourceVersion"] = "12"
        assumed.written(record, written)
    elif state is WriteState.UNKNOWN:
        assumed.unknown(record)
    return record


# (name, state of the write, the cache's claim) -> settled?
SETTLE_CASES = [
    ("pending never settles, however new the cache", WriteState.PENDING, cached("99"), False),
    ("pending settles when the claim is gone", WriteState.PENDING, None, True),
    ("pending settles when the claim was replaced", WriteState.PENDING, cached("99", uid="other"), True),
    ("written waits for its resourceVersion", WriteState.WRITTEN, cached("11"), False),
    ("written settles at its resourceVersion", WriteState.WRITTEN, cached("12", allocation=ALLOCATION), True),
    ("written settles past it", WriteState.WRITTEN, cached("13"), True),
    ("unknown waits while the claim is at the write's base", WriteState.UNKNOWN, cached("10"), False),
    ("unknown settles once the claim moved past the base", WriteState.UNKNOWN, cached("11"), True),
]


@pytest.mark.parametrize(
    ("state", "cache", "settled"), [c[1:] for c in SETTLE_CASES], ids=[c[0] for c in SETTLE_CASES]
)
def test_settle(state: WriteState, cache: ResourceClaim | None, settled: bool) -> None:
    assumed = AssumedClaims()
    record_in(state, assumed)
    assumed.settle({} if cache is None else {("default", "c"): cache})
    assert (assumed.of(("default", "c")) == []) == settled


def test_unsettled_writes_hold_their_devices_and_written_ones_overlay_the_cache() -> None:
    assumed = AssumedClaims()
    record = record_in(WriteState.UNKNOWN, assumed)
    claims = {("default", "c"): cached("10")}
    assert [a.devices[0].id.device for a in assumed.held(claims)] == ["d0"]
    assert assumed.overlay(claims) is claims
    assert assumed.allocating(("default", "c")) is record
    written = claim("c", allocation=ALLOCATION, uid="uid-c")
    written["metadata"]["resourceVersion"] = "12"
    assumed.written(record, written)
    overlay = assumed.overlay(claims)
    assert overlay[("default", "c")].allocation is not None  # decisions see our write
    assert assumed.held(overlay) == []  # counted once, through the overlay
    assert assumed.allocating(("default", "c")) is None


def test_an_interrupted_bind_keeps_sent_writes_and_forgets_unsent_ones() -> None:
    assumed = AssumedClaims()
    sent = record_in(WriteState.PENDING, assumed)
    other = claim("d", uid="uid-d")
    other["metadata"]["resourceVersion"] = "5"
    unsent = assumed.assume(parse_resource_claim(other), "uid-p", ("default", "p"), "node-1", None, 0.0)
    version = assumed.version
    assumed.interrupted("uid-p")
    assert sent.state is WriteState.UNKNOWN and assumed.of(unsent.key) == []
    assert assumed.version > version


@pytest.mark.parametrize(
    ("cached_rv", "reference", "newer"),
    [("11", "10", True), ("10", "10", False), ("9", "10", False), ("b", "a", True)],
)
def test_resource_versions_compare_as_numbers(cached_rv: str, reference: str, newer: bool) -> None:
    assert is_newer(cached_rv, reference) == newer


def test_a_shared_claim_keeps_the_allocating_write_while_another_pod_reserves_it() -> None:
    # Found by the stress test: pod y's allocation of a shared claim was written (the cache lags);
    # pod x's reservation of the same claim must not replace y's record, or the devices look free.
    assumed = AssumedClaims()
    y = record_in(WriteState.WRITTEN, assumed)
    claims = {("default", "c"): cached("10")}
    x = assumed.assume(cached("10"), "uid-x", ("default", "x"), "node-1", None, 0.0)
    assumed.sending(x, "12")
    assumed.unknown(x)
    overlay = assumed.overlay(claims)
    assert overlay[("default", "c")].allocation is not None
    assert {r.pod_uid for r in assumed.of(("default", "c"))} == {y.pod_uid, "uid-x"}
    # The newest written object wins the overlay.
    newer = claim("c", allocation=ALLOCATION, uid="uid-c")
    newer["metadata"]["resourceVersion"] = "13"
    newer["status"]["reservedFor"] = [{"resource": "pods", "name": "x", "uid": "uid-x"}]
    assumed.written(x, newer)
    assert assumed.overlay(claims)[("default", "c")].resource_version == "13"


def creating_record(assumed: AssumedClaims, *, created_rv: str | None) -> AssumedWrite:
    record = assumed.assume_creation(("default", "c"), "uid-p", ("default", "p"), "node-1", ALLOCATION, 0.0)
    if created_rv is not None:
        assumed.created(record, cached(created_rv))
        assumed.sending(record, created_rv)
        written = claim("c", allocation=ALLOCATION, uid="uid-c")
        written["metadata"]["resourceVersion"] = str(int(created_rv) + 2)
        assumed.written(record, written)
    return record


# A claim the bind creates: (name, created at, the cache's claim, the cache's newest RV) -> settled?
CREATION_CASES = [
    ("not created yet: held, whatever the cache", None, None, "99", False),
    ("created, not cached, cache behind the creation: held", "10", None, "9", False),
    ("created, not cached, cache at the creation: held", "10", None, "10", False),
    ("created, not cached, cache past it: deleted since", "10", None, "11", True),
    ("created and cached at the written version", "10", cached("12", allocation=ALLOCATION), "12", True),
    ("created, cached before the write: held", "10", cached("10"), "10", False),
]


@pytest.mark.parametrize(
    ("created_rv", "cache", "seen", "settled"),
    [c[1:] for c in CREATION_CASES],
    ids=[c[0] for c in CREATION_CASES],
)
def test_settle_of_created_claims(
    created_rv: str | None, cache: ResourceClaim | None, seen: str, settled: bool
) -> None:
    assumed = AssumedClaims()
    creating_record(assumed, created_rv=created_rv)
    assumed.settle({} if cache is None else {("default", "c"): cache}, seen)
    assert (assumed.of(("default", "c")) == []) == settled


def test_a_created_claim_not_cached_yet_is_seen_through_the_overlay_and_holds_its_devices() -> None:
    assumed = AssumedClaims()
    creating = creating_record(assumed, created_rv=None)
    assert [a.devices[0].id.device for a in assumed.held({})] == ["d0"]
    assumed.interrupted("uid-p")  # nothing was sent: forgotten
    assert assumed.of(("default", "c")) == [] and creating.state is WriteState.PENDING
    creating_record(assumed, created_rv="10")
    overlay = assumed.overlay({})
    assert overlay[("default", "c")].allocation is not None and assumed.held(overlay) == []


def test_the_overlay_reads_as_the_merged_mapping() -> None:
    def record(name: str, rv: str) -> ResourceClaim:
        c = claim(name)
        c["metadata"]["resourceVersion"] = rv
        return parse_resource_claim(c)

    base = {("default", "a"): record("a", "1"), ("default", "b"): record("b", "1")}
    newer = {("default", "b"): record("b", "2"), ("default", "c"): record("c", "2")}
    view = Overlay(newer, base)
    merged = {**base, **newer}
    assert dict(view) == merged
    assert len(view) == len(merged) == 3
    assert list(view) == [("default", "a"), ("default", "b"), ("default", "c")]
    assert view[("default", "b")] is newer[("default", "b")]
    assert view.get(("default", "a")) is base[("default", "a")]
    assert view.get(("default", "x")) is None and ("default", "x") not in view
    assert ("default", "c") in view


KEY = ("default", "c")


def test_settle_looks_only_at_claims_that_changed_and_now_and_then_at_all() -> None:
    """A settle costs what changed: a claim the cache did not report changed is not looked at
    (its record stays, devices taken), until a full settle every FULL_SETTLE_EVERY calls."""
    from extender.scheduling.inflight.assumed import FULL_SETTLE_EVERY

    assumed = AssumedClaims()
    record_in(WriteState.UNKNOWN, assumed)
    assumed.settle({KEY: cached("10")}, "10", set())  # the record's own change: looked at, kept
    moved = {KEY: cached("11")}  # the cache moved past the write's base, but says nothing changed
    calls = 1
    while assumed.of(KEY):
        assumed.settle(moved, "11", set())
        calls += 1
        assert calls <= FULL_SETTLE_EVERY
    assert calls == FULL_SETTLE_EVERY


def test_a_claim_the_cache_reports_changed_settles_at_once() -> None:
    assumed = AssumedClaims()
    record_in(WriteState.UNKNOWN, assumed)
    assumed.settle({KEY: cached("10")}, "10", set())
    assumed.settle({KEY: cached("11")}, "11", {KEY})
    assert assumed.of(KEY) == []


def test_a_record_that_became_written_is_looked_at_without_a_cache_change() -> None:
    assumed = AssumedClaims()
    record = record_in(WriteState.PENDING, assumed)
    cache = {KEY: cached("12", allocation=ALLOCATION)}  # the watch was faster than the answer
    assumed.settle(cache, "12", {KEY})
    assert assumed.of(KEY) == [record]  # pending: kept
    written = claim("c", allocation=ALLOCATION, uid="uid-c")
    written["metadata"]["resourceVersion"] = "12"
    assumed.written(record, written)
    assumed.settle(cache, "12", set())
    assert assumed.of(KEY) == []


def test_a_created_claim_settles_on_the_caches_progress_alone() -> None:
    assumed = AssumedClaims()
    record = assumed.assume_creation(KEY, "uid-p", ("default", "p"), "node-1", ALLOCATION, 0.0)
    created = claim("c", uid="uid-c")
    created["metadata"]["resourceVersion"] = "20"
    assumed.created(record, parse_resource_claim(created))
    assumed.settle({}, "20", set())
    assert assumed.of(KEY) == [record]  # the cache has not moved past its creation
    assumed.settle({}, "21", set())  # it has, without showing the claim: gone
    assert assumed.of(KEY) == []


def by_pod_from_iteration(assumed: AssumedClaims) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {}
    for record in assumed:
        out.setdefault(record.pod_uid, set()).add(record.key)
    return out


def by_pod_from_index(assumed: AssumedClaims, pods: list[str]) -> dict[str, set[tuple[str, str]]]:
    return {uid: {r.key for r in assumed.of_pod(uid)} for uid in pods if assumed.of_pod(uid)}


def test_the_records_of_a_pod_follow_every_change_of_the_records() -> None:
    # A bind reads its own pod's records by pod (of_pod), not by scanning every record: the index
    # must show exactly what a scan would, after each kind of change.
    assumed = AssumedClaims()
    pods = ["uid-p", "uid-x", "uid-h"]
    p = record_in(WriteState.WRITTEN, assumed)  # uid-p writes c (written at 12)
    x = assumed.assume(cached("10"), "uid-x", ("default", "x"), "node-1", None, 0.0)  # shares c
    other = parse_resource_claim(claim("d", uid="uid-d"))
    assumed.hold(other, "uid-h", ("default", "h"), "node-2", ALLOCATION, 0.0)
    assumed.assume(other, "uid-x", ("default", "x"), "node-1", ALLOCATION, 0.0)
    steps: list[tuple[str, Callable[[], None]]] = [
        ("after assume and hold", lambda: None),
        ("after a hold is released", lambda: assumed.release_holds("uid-h")),
        ("after a write is forgotten", lambda: assumed.forget(x)),
        ("after a settle drops the written record", lambda: assumed.settle({("default", "c"): cached("12")})),
        ("after an interrupted bind", lambda: assumed.interrupted("uid-x")),
    ]
    for name, step in steps:
        step()
        assert by_pod_from_index(assumed, pods) == by_pod_from_iteration(assumed), name
    assert p not in assumed.of_pod("uid-p")
    assert assumed.entries()["pods_with_records"] == len(by_pod_from_iteration(assumed))


def newest_written_by_scan(assumed: AssumedClaims) -> dict[tuple[str, str], ResourceClaim]:
    """What the overlay must put in place of the cache: per claim, the newest written answer."""
    out: dict[tuple[str, str], ResourceClaim] = {}
    for record in assumed:
        written = record.written
        if record.state is WriteState.WRITTEN and written is not None:
            best = out.get(record.key)
            if best is None or is_newer(written.resource_version, best.resource_version):
                out[record.key] = written
    return out


def test_the_overlay_follows_every_change_of_the_records_and_old_overlays_stay_as_made() -> None:
    # The overlay reads again only the claims whose records changed: after each kind of change it
    # must show what a scan of every record shows, and a snapshot's older overlay must not move.
    assumed = AssumedClaims()
    cache = {("default", "c"): cached("10"), ("default", "d"): parse_resource_claim(claim("d", uid="uid-d"))}
    p = record_in(WriteState.WRITTEN, assumed)  # uid-p's write of c, answered at 12
    x = assumed.assume(cached("10"), "uid-x", ("default", "x"), "node-1", None, 0.0)
    d = assumed.assume(cache[("default", "d")], "uid-x", ("default", "x"), "node-1", ALLOCATION, 0.0)

    def write_d() -> None:
        answer = claim("d", allocation=ALLOCATION, uid="uid-d")
        answer["metadata"]["resourceVersion"] = "20"
        assumed.sending(d, "19")
        assumed.written(d, answer)

    def write_x_newer() -> None:
        answer = claim("c", allocation=ALLOCATION, uid="uid-c")
        answer["metadata"]["resourceVersion"] = "14"
        assumed.sending(x, "12")
        assumed.written(x, answer)

    steps: list[tuple[str, Callable[[], None]]] = [
        ("after assume", lambda: None),
        ("after another claim's write is answered", write_d),
        ("after a newer write of the same claim", write_x_newer),
        ("after a written record is sent again", lambda: assumed.sending(x, "14")),
        ("after its outcome is unknown", lambda: assumed.unknown(x)),
        ("after a write is forgotten", lambda: assumed.forget(d)),
        ("after a settle drops the written record", lambda: assumed.settle({("default", "c"): cached("12")})),
        ("after an interrupted bind", lambda: assumed.interrupted("uid-x")),
    ]
    earlier: list[tuple[Any, dict[tuple[str, str], Any]]] = []
    for name, step in steps:
        step()
        overlay = assumed.overlay(cache)
        expected = newest_written_by_scan(assumed)
        for key in cache:
            assert overlay[key] is expected.get(key, cache[key]), (name, key)
        earlier.append((overlay, {key: overlay[key] for key in cache}))
    for overlay, seen in earlier:
        assert {key: overlay[key] for key in cache} == seen  # made once, never changed after
    assert p.state is WriteState.WRITTEN
