"""List then watch one resource as raw dicts, resuming from the last resourceVersion.

Each reflector runs in its own thread: it lists (and reconciles: objects missing from a relist
are deleted), then watches from the list's resourceVersion with bookmarks, follows every
event's resourceVersion, relists on 410 Gone, and backs off on errors. Events are handed to a
sink, which the service points at its event loop, so the cache is only ever changed there.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from extender.cluster.api import ClusterAPIError
from extender.cluster.kube import RawKube, without_managed_fields

log = logging.getLogger("dra_extender.reflector")

#: (event type, object, items): ADDED | MODIFIED | DELETED with the object; SYNCED with the full
#: list (the object carries only the list's resourceVersion); BOOKMARK (a resourceVersion).
Sink = Callable[[str, dict[str, Any] | None, list[dict[str, Any]] | None], None]


#: How long a list or watch must have worked before the back-off starts afresh (seconds).
STABLE_SECONDS = 60.0


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): relist."""


class Reflector:
    def __init__(
        self,
        raw: RawKube,
        path: str,
        kind: str,
        sink: Sink,
        stop: threading.Event,
        *,
        api_version: str,
        watch_timeout: int = 300,
        backoff: tuple[float, float] = (0.2, 30.0),
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_synced: Callable[[], None] = lambda: None,
    ) -> None:
        self.raw = raw
        #: Called after each successful list (from the reflector's thread).
        self.on_synced = on_synced
        self.path = path
        self.kind = kind
        self.api_version = api_version
        self.sink = sink
        self.stop = stop
        self.watch_timeout = watch_timeout
        self.backoff = backoff
        self.rng = rng or random.Random()
        self.clock = clock
        self.synced = threading.Event()
        self.resource_version = ""
        self.relists = 0
        #: Failed lists and watches since start (for /metrics).
        self.errors = 0
        #: When (clock) the last list, watch event or bookmark arrived (None: none yet).
        self.last_event: float | None = None
        self._failures = 0
        #: Since when (clock) neither a list nor a watch has been working; None while watching.
        self.down_since: float | None = clock()
        self.last_error = "not listed yet"
        #: This outage was logged at WARNING (once per outage; its end is logged too).
        self._warned = False
        #: When (clock) the outage logged at WARNING began.
        self._outage_since = self.down_since
        #: When the list or watch last started working: the back-off starts afresh only after
        #: it kept working for STABLE_SECONDS (a watch that opens and fails at once backs off).
        self._up_at = clock()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=f"reflector-{self.kind}", daemon=True)
        thread.start()
        return thread

    def _up(self) -> None:
        """A list answered, or a watch opened: not down (for readiness and /metrics)."""
        self.down_since = None
        self._up_at = self.clock()

    def _heard(self) -> None:
        """A list or a watch event arrived: the outage logged at WARNING, if any, is over. A
        watch that opens and fails at once (before any event) stays in the same outage: one
        warning, not two lines per retry."""
        if not self._warned:
            return
        self._warned = False
        log.info(
            "%s %s working again",
            "watch" if self.synced.is_set() else "list",
            self.kind,
            extra={
                "fields": {
                    "kind": self.kind,
                    "downSeconds": round(max(0.0, self.clock() - self._outage_since), 1),
                    "failures": self._failures,
                }
            },
        )

    def _down(self, what: str, error: object) -> None:
        """A list or watch failed: WARNING once per outage (client-go's reflector logs every
        retry), the retries at DEBUG."""
        self.last_error = str(error)
        self.errors += 1
        if self.down_since is None:
            self.down_since = self.clock()
        if not self._warned:
            self._warned = True
            self._outage_since = self.down_since
            log.warning(
                "%s %s failed (retrying with back-off up to %gs; logged again when it works): %s",
                what,
                self.kind,
                self.backoff[1],
                error,
            )
        else:
            log.debug("%s %s failed again: %s", what, self.kind, error)

    def down_for(self) -> float:
        """Seconds since this resource's list/watch stopped working (0 while it works)."""
        since = self.down_since
        return 0.0 if since is None else max(0.0, self.clock() - since)

    def _sleep_after_failure(self) -> None:
        if self.down_since is not None and self.down_since - self._up_at > STABLE_SECONDS:
            self._failures = 0  # it had worked for a while: this is a new outage
        self._failures += 1
        low, high = self.backoff
        delay = min(high, low * 2 ** (self._failures - 1)) * (0.5 + self.rng.random() / 2)
        self.stop.wait(delay)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self._list()
            except Exception as exc:
                self._down("list", exc)
                self._sleep_after_failure()
                continue
            while not self.stop.is_set():
                try:
                    self._watch()
                except Exception as exc:
                    # An error event of 410, or the watch refused with 410 Gone itself.
                    if isinstance(exc, Expired) or (isinstance(exc, ClusterAPIError) and exc.code == 410):
                        log.info(
                            "watch %s: resourceVersion %s expired, relisting",
                            self.kind,
                            self.resource_version,
                        )
                        break
                    self._down("watch", exc)
                    self._sleep_after_failure()

    def _list(self) -> None:
        result = self.raw.request("GET", self.path)
        items = result.get("items") or []
        for item in items:
            without_managed_fields(item)
            item.setdefault("kind", self.kind)
            item.setdefault("apiVersion", self.api_version)
        self.resource_version = (result.get("metadata") or {}).get("resourceVersion", "")
        self.relists += 1
        self.last_event = self.clock()
        self.sink("SYNCED", {"metadata": {"resourceVersion": self.resource_version}}, items)
        self._up()
        self._heard()
        self.synced.set()
        log.info(
            "listed %s, watching",
            self.kind,
            extra={
                "fields": {
                    "kind": self.kind,
                    "objects": len(items),
                    "resourceVersion": self.resource_version,
                    "lists": self.relists,
                }
            },
        )
        self.on_synced()

    def _watch(self) -> None:
        query = {
            "resourceVersion": self.resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": self.watch_timeout,
        }
        for event in self.raw.watch_lines(
            self.path, query, timeout=self.watch_timeout + 30, on_open=self._up
        ):
            if self.stop.is_set():
                return
            etype = event.get("type")
            obj = event.get("object") or {}
            self.last_event = self.clock()
            if self._warned:
                self._heard()
            if etype == "ERROR":
                if obj.get("code") == 410:
                    raise Expired
                raise ClusterAPIError(f"watch error: {obj.get('message')}")
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if rv:
                self.resource_version = rv
            if etype == "BOOKMARK":
                self.sink("BOOKMARK", obj, None)
                continue
            without_managed_fields(obj)
            obj.setdefault("kind", self.kind)
            obj.setdefault("apiVersion", self.api_version)
            self.sink(str(etype), obj, None)
