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


class BindWatch:
    def __init__(self, plane: ControlPlane, namespace: str = "default") -> None:
        self.plane = plane
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        #: Pod name -> when (time.monotonic) the watch first showed it bound.
        self.bound: dict[str, float] = {}
        self.last_bind = 0.0
        self.stop = threading.Event()
        listed = plane.api.request("GET", self.path, params={"limit": "1"})
        self.rv = listed["metadata"]["resourceVersion"]
        self.thread = threading.Thread(target=self._run, name="bind-watch", daemon=True)
        self.thread.start()

    def first_bind_after(self, moment: float) -> float | None:
        """When the first pod was bound after ``moment`` (None: none yet)."""
        later = [t for t in list(self.bound.values()) if t > moment]
        return min(later) if later else None

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
                print(f"pod watch restarted at {self.rv}: {exc!r}", file=sys.stderr)

    def _event(self, event: dict[str, Any]) -> None:
        obj = event.get("object") or {}
        self.rv = (obj.get("metadata") or {}).get("resourceVersion", self.rv)
        if event.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
            name = obj["metadata"]["name"]
            if name not in self.bound:
                self.last_bind = self.bound[name] = time.monotonic()

    def close(self) -> None:
        self.stop.set()
