"""Pods as they get a node, from a watch on the real API server (no polling of thousands of
pods): when each was first seen bound. The benchmarks count binds with it, and the failover runs
time the first bind after a fault."""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import httpx

from tests.realcluster.controlplane import ControlPlane


class Watching:
    """A watch on the real API server from ``rv``, on a thread of its own: :meth:`_event` for
    each event, resumed from the last resourceVersion seen when a stream ends. Subclasses set
    their state, then call ``__init__`` (the thread starts there)."""

    #: What the watch is of, for the line it prints when it restarts.
    what = "watch"

    def __init__(self, plane: ControlPlane, path: str, rv: str) -> None:
        self.plane, self.path, self.rv = plane, path, rv
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=self.what, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        http = self.plane.api.http
        while not self.stop.is_set():
            params = {"watch": "1", "resourceVersion": self.rv, "allowWatchBookmarks": "true"}
            try:
                with http.stream(
                    "GET", self.path, params=params, timeout=httpx.Timeout(5, read=None)
                ) as answer:
                    for line in answer.iter_lines():
                        if self.stop.is_set():
                            return
                        if line:
                            self._event(json.loads(line))
            except httpx.HTTPError as exc:
                if self.stop.is_set():
                    return
                print(f"{self.what} restarted at {self.rv}: {exc!r}", file=sys.stderr)

    def _event(self, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.stop.set()


class BindWatch(Watching):
    what = "pod watch"

    def __init__(self, plane: ControlPlane, namespace: str = "default") -> None:
        path = f"/api/v1/namespaces/{namespace}/pods"
        #: Pod name -> when (time.monotonic) the watch first showed it bound.
        self.bound: dict[str, float] = {}
        self.last_bind = 0.0
        listed = plane.api.request("GET", path, params={"limit": "1"})
        super().__init__(plane, path, listed["metadata"]["resourceVersion"])

    def first_bind_after(self, moment: float) -> float | None:
        """When the first pod was bound after ``moment`` (None: none yet)."""
        later = [t for t in list(self.bound.values()) if t > moment]
        return min(later) if later else None

    def _event(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        self.rv = (obj.get("metadata") or {}).get("resourceVersion", self.rv)
        if event.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
            name = obj["metadata"]["name"]
            if name not in self.bound:
                self.last_bind = self.bound[name] = time.monotonic()
