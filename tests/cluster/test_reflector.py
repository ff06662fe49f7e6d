"""An informer's retries: exponential, jittered back-off up to 30 s, one warning per outage.

A list that keeps failing (an optional kind the API server does not serve, RBAC missing) used to
be retried every few tenths of a second with a WARNING each time. The stand-in API here fails
the first lists, then works; the stop event records the back-off waits instead of sleeping.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender.cluster.api import ClusterAPIError
from extender.cluster.reflector import Reflector


class Raw:
    """Fails the first ``failures`` lists with a 404; then lists nothing and watches nothing."""

    def __init__(self, failures: int, stop: threading.Event) -> None:
        self.failures = failures
        self.lists = 0
        self.stop = stop

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.lists += 1
        if self.lists <= self.failures:
            error = ClusterAPIError("404: the server could not find the requested resource")
            error.code = 404
            raise error
        return {"items": [], "metadata": {"resourceVersion": "5"}}

    def watch_lines(
        self, path: str, query: dict[str, Any], timeout: float, on_open: Callable[[], None]
    ) -> Iterator[dict[str, Any]]:
        on_open()
        self.stop.set()  # listed and watching: the test is over
        return iter(())


class RecordedWaits(threading.Event):
    """A stop event whose waits return at once, recording how long they would have slept."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0.0))
        return self.is_set()


def run_reflector(
    failures: int, raw: Callable[[int, threading.Event], Raw] = Raw
) -> tuple[Reflector, RecordedWaits]:
    """A PodDisruptionBudget informer over ``raw(failures, stop)``, run until the stand-in stops it."""
    stop = RecordedWaits()
    reflector = Reflector(
        raw(failures, stop),  # type: ignore[arg-type]
        "/apis/policy/v1/poddisruptionbudgets",
        "PodDisruptionBudget",
        lambda *a: None,
        stop,
        api_version="policy/v1",
        rng=random.Random(1),
    )
    reflector.run()
    return reflector, stop


def test_failing_lists_back_off_exponentially_up_to_30_seconds() -> None:
    reflector, stop = run_reflector(failures=12)
    assert len(stop.waits) == 12
    for n, wait in enumerate(stop.waits):
        ceiling = min(30.0, 0.2 * 2**n)
        assert ceiling / 2 <= wait <= ceiling, (n, wait)  # jittered between half and all of it
    assert max(stop.waits) > 15.0
    assert reflector.synced.is_set() and reflector.down_since is None


def test_one_warning_per_outage_and_a_line_when_it_works_again(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="dra_extender"):
        run_reflector(failures=5)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "list PodDisruptionBudget failed (retrying with back-off up to 30s; logged again when it works)"
    )
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert "list PodDisruptionBudget working again" in infos
    retries = [r for r in caplog.records if r.levelno == logging.DEBUG and "failed again" in r.getMessage()]
    assert len(retries) == 4


class FlappingWatch(Raw):
    """Lists fine; its first ``failures`` watches open and then fail before any event; the next
    delivers one bookmark and ends the test."""

    def __init__(self, failures: int, stop: threading.Event) -> None:
        super().__init__(0, stop)
        self.watch_failures = failures
        self.watches = 0

    def watch_lines(
        self, path: str, query: dict[str, Any], timeout: float, on_open: Callable[[], None]
    ) -> Iterator[dict[str, Any]]:
        self.watches += 1
        on_open()
        if self.watches <= self.watch_failures:
            raise ClusterAPIError("connection reset by peer")
        return self._one_bookmark()

    def _one_bookmark(self) -> Iterator[dict[str, Any]]:
        yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}
        self.stop.set()


def test_a_watch_that_opens_and_fails_at_once_is_one_outage(caplog: pytest.LogCaptureFixture) -> None:
    """Opening is not working: the outage ends with the first event, so a flapping watch gives
    one warning and one line when it works again, not two lines per retry."""
    with caplog.at_level(logging.INFO, logger="dra_extender"):
        reflector, _stop = run_reflector(6, FlappingWatch)
    assert reflector.raw.watches == 7 and reflector.errors == 6  # type: ignore[attr-defined]
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert [m for level, m in messages if level == logging.WARNING] == [
        "watch PodDisruptionBudget failed (retrying with back-off up to 30s; logged again when it works): "
        "connection reset by peer"
    ]
    assert [m for level, m in messages if "working again" in m] == ["watch PodDisruptionBudget working again"]


class GoneWatch(FlappingWatch):
    """Lists fine; its first watch is refused with 410 Gone (the HTTP status, not an error
    event); the next delivers one bookmark and ends the test."""

    def watch_lines(
        self, path: str, query: dict[str, Any], timeout: float, on_open: Callable[[], None]
    ) -> Iterator[dict[str, Any]]:
        self.watches += 1
        if self.watches == 1:
            gone = ClusterAPIError("410: too old resource version: 5 (9)")
            gone.code = 410
            raise gone
        on_open()
        return self._one_bookmark()


def test_a_watch_refused_with_410_gone_relists_at_once_as_an_expired_one_does() -> None:
    """As client-go's reflector does (IsResourceExpired or IsGone from the Watch call): the
    same resourceVersion would be refused again, with back-off, for ever."""
    reflector, stop = run_reflector(0, GoneWatch)  # (no failing lists)
    assert reflector.raw.lists == 2 and reflector.raw.watches == 2  # type: ignore[attr-defined]
    assert stop.waits == [] and reflector.errors == 0


MANAGED = [{"manager": "kube-scheduler", "fieldsV1": {"f:status": {"f:conditions": {}}}}]


class ServedObjects(Raw):
    """Lists one object and watches one event, each with the server's managedFields."""

    def request(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        item = {"metadata": {"name": "listed", "resourceVersion": "4", "managedFields": MANAGED}}
        return {"items": [item], "metadata": {"resourceVersion": "5"}}

    def watch_lines(
        self, path: str, query: dict[str, Any], timeout: float, on_open: Callable[[], None]
    ) -> Iterator[dict[str, Any]]:
        on_open()
        meta = {"name": "watched", "resourceVersion": "6", "managedFields": MANAGED}
        yield {"type": "ADDED", "object": {"metadata": meta}}
        self.stop.set()


def test_listed_and_watched_objects_reach_the_cache_without_managed_fields() -> None:
    """As kube-scheduler's informers keep them (and as the state files and discovery's list)."""
    seen: list[dict[str, Any]] = []

    def sink(kind: str, obj: dict[str, Any] | None, items: list[dict[str, Any]] | None) -> None:
        seen.extend(items if items is not None else [obj] if obj is not None and kind == "ADDED" else [])

    stop = RecordedWaits()
    Reflector(
        ServedObjects(0, stop),  # type: ignore[arg-type]
        "/api/v1/pods",
        "Pod",
        sink,
        stop,
        api_version="v1",
    ).run()
    assert [o["metadata"] for o in seen] == [
        {"name": "listed", "resourceVersion": "4"},
        {"name": "watched", "resourceVersion": "6"},
    ]
    assert all((o["kind"], o["apiVersion"]) == ("Pod", "v1") for o in seen)
