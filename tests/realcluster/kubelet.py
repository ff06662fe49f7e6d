"""Plays the kubelet of every node, just enough for pods to live and die as in a real cluster.

There is no kubelet in the real-control-plane suite: a bound pod stays Pending forever, and a
pod deleted with a grace period (its ``terminationGracePeriodSeconds``) stays Terminating until
something confirms that its containers stopped. A background thread here, every ~0.1 s:

- marks bound pods Running (the status subresource: phase Running, a Ready condition, startTime
  if missing), as a kubelet does once the containers started;
- force-deletes (grace 0, the pod's uid as precondition) pods that have had a deletionTimestamp
  for 0.5 s since this thread first saw it, as a kubelet does once the containers stopped.

Use it as ``with playing_kubelet(api): ...``; it stops (and joins) on exit.
"""

from __future__ import annotations

import contextlib
import datetime
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.realcluster.api import Api, ApiError, path

#: How often the pods are listed.
PERIOD = 0.1
#: How long a pod stays Terminating once its deletion is seen (the containers stopping).
TERMINATING_FOR = 0.5


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Kubelet:
    """The thread's state; ``started``/``deleted`` count what it did (uids)."""

    api: Api
    period: float = PERIOD
    terminating_for: float = TERMINATING_FOR
    started: set[str] = field(default_factory=set)
    deleted: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    _deleting_since: dict[str, float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Kubelet:
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                self.sync()
            except Exception as exc:  # the API server restarting, a connection reset: next round
                self.errors.append(repr(exc))
                if len(self.errors) <= 3:
                    print(f"kubelet: {exc!r}", file=sys.stderr)
            self._stop.wait(max(0.0, self.period - (time.monotonic() - began)))

    def sync(self) -> None:
        """One round over every pod of every namespace."""
        now = time.monotonic()
        seen = set()
        for pod in self.api.list("Pod"):
            meta = pod["metadata"]
            uid = str(meta["uid"])
            seen.add(uid)
            if meta.get("deletionTimestamp"):
                since = self._deleting_since.setdefault(uid, now)
                if now - since >= self.terminating_for:
                    self._force_delete(pod)
            elif pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") != "Running":
                self._run_pod(pod)
        for uid in set(self._deleting_since) - seen:
            del self._deleting_since[uid]

    def _run_pod(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        status = pod.get("status") or {}
        now = _now()
        patch: dict[str, Any] = {
            "metadata": {"uid": meta["uid"]},  # a precondition: not a new pod of the same name
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                ],
            },
        }
        if not status.get("startTime"):
            patch["status"]["startTime"] = now
        try:
            self.api.patch(
                "Pod",
                meta["name"],
                meta["namespace"],
                patch,
                subresource="status",
                content_type="application/strategic-merge-patch+json",
            )
            self.started.add(str(meta["uid"]))
        except ApiError as exc:
            if exc.code not in (404, 409):  # gone, or a new pod by that name: the next round
                raise

    def _force_delete(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        try:
            self.api.request("DELETE", path("Pod", meta["name"], meta["namespace"]), json=body)
            self.deleted.add(str(meta["uid"]))
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise


@contextlib.contextmanager
def playing_kubelet(api: Api, **kw: Any) -> Iterator[Kubelet]:
    kubelet = Kubelet(api, **kw).start()
    try:
        yield kubelet
    finally:
        kubelet.stop()
