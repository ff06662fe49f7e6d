"""Bind failures by reason (``dra_extender_bind_failures_total{reason}``), read off the
binder's own messages: one case per message the binder writes."""

from __future__ import annotations

import asyncio

import pytest

from extender.scheduling.config import NoObserver
from extender.scheduling.write import bind_failures
from tests.scheduling.inflight.test_catch_up import cluster, generated_claim, template_pod

MESSAGES = [
    ("this dra-extender replica may not bind: not the leader", "not-leader"),
    (
        "the DRA extender's cache is stale (watch of pods down); not binding until it has caught up",
        "stale-cache",
    ),
    ("refused: the request names no PodUID (kube-scheduler always sends one)", "refused"),
    ("pod not found (neither in the DRA extender's cache nor in the API server)", "pod-not-found"),
    ("pod UID mismatch: the cache has a, the request names b", "pod-not-found"),
    ("pod is already bound to node-2", "already-bound"),
    ("pod is being bound to node-2", "already-bound"),
    ("node node-9 not found", "node-not-found"),
    ("pod is being deleted", "pod-deleted"),
    (
        "binding pod to node-1 failed: 409: pod w0-05 is being deleted, cannot be assigned to a host",
        "pod-deleted",
    ),
    ('binding pod to node-1: outcome unknown (404: pods "w0-04" not found); its claims stay', "pod-deleted"),
    ('cannot bind to node-1: pod "default/w": ResourceClaim not created yet', "claim-not-created"),
    ('cannot bind to node-1: resourceclaim.resource.k8s.io "c" not found', "claim-not-found"),
    # kube-apiserver 1.36.3's 404 to a claim write whose claim the garbage collector removed with
    # its deleted pod (tests/realcluster/test_races.py, deletions mid-scheduling, 2 Dec 2026).
    (
        "binding pod to node-02 failed: resourceclaim default/w2-02-gpu-nkktq: 404: "
        'resourceclaims.resource.k8s.io "w2-02-gpu-nkktq" not found',
        "claim-not-found",
    ),
    ('binding pod to node-1 failed: resourceclaim default/c: resourceclaim "c" not found', "claim-not-found"),
    (
        "binding pod to node-1 failed: the claims of the pods preempted for this one (default/v) still hold the devices after 5s",
        "release-timeout",
    ),
    ("binding pod to node-1: binding conditions not met after 5s (d/p/x: Attached)", "binding-conditions"),
    (
        "an earlier write of resourceclaim default/c for this pod is not settled: timeout",
        "earlier-write-unsettled",
    ),
    ("cannot bind to node-1: cannot allocate all claims", "devices-unavailable"),
    ("the bind was interrupted (the DRA extender is shutting down)", "shutdown"),
    ("internal error while binding to node-1: KeyError('x')", "internal"),
    ("binding pod to node-1 failed: resourceclaims default/c: 422 Invalid", "api-error"),
]


@pytest.mark.parametrize(("message", "expected"), MESSAGES, ids=[m[1] + ": " + m[0][:40] for m in MESSAGES])
def test_reason(message: str, expected: str) -> None:
    assert bind_failures.reason(message) == expected
    assert expected in bind_failures.ALL


class Recorder(NoObserver):
    def __init__(self) -> None:
        self.binds: list[tuple[str, str]] = []

    def bound(self, outcome: str, reason: str = "") -> None:
        self.binds.append((outcome, reason))


def test_a_failed_bind_reports_its_reason() -> None:
    recorder = Recorder()
    e, _store = cluster(template_pod(created=False, rv=10), generated_claim(11), observer=recorder)
    assert asyncio.run(e.bind("default", "worker", "uid-worker", "node-1"))
    assert recorder.binds == [("failure", "claim-not-created")]
