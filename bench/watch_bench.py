"""In-process watch-event benchmark: CPU the informers spend per bound pod (issue 54).

Run: ``python -m bench.watch_bench`` (``--pods``, ``--rounds``, ``--order``, ``--json FILE``).

For each pod, the watch events a bind brings, as kube-apiserver encodes them (managed fields,
defaulted spec, service-account volume): the claim's ADDED, the pod's ADDED, the claim's
MODIFIED after the finalizer update and after the status write (whose answer the bind handed to
the cache first, :meth:`ClusterState.answered`), and the pod's MODIFIED after its Binding.
``--order late-finalizer`` delivers the finalizer update's event after the status write was
answered (a watch behind the writes). Each event goes the informers' whole way on this thread:
the watch line decoded (:func:`extender.model.nesting.loads`, the reflector's thread in the
service), the reflector's bookkeeping, the sink, :class:`~extender.service.worker.Batches` and
the cache (:meth:`ClusterState.apply`). Reported: CPU microseconds per bound pod, the best and
the median of ``--rounds`` (each round a fresh cache; the collector tuned as the service tunes
it). On a shared machine compare the best of several runs, old and new code alternating.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from extender.cluster.reflector import Reflector
from extender.cluster.state import ClusterState
from extender.model import nesting
from extender.model.dra import parse_resource_claim
from extender.service.worker import Batches

NAMESPACE = "bench"
STAMP = "2025-01-01T00:00:00Z"


def managed(manager: str, operation: str, fields: dict[str, Any], subresource: str = "") -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": STAMP,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def pod(i: int, rv: int, node: str = "") -> dict[str, Any]:
    """Pod ``i`` as kube-apiserver answers a watch (``node``: after its Binding)."""
    name = f"p-{i:05d}"
    obj: dict[str, Any] = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-pod-{i}",
            "resourceVersion": str(rv),
            "creationTimestamp": STAMP,
            "managedFields": [
                managed(
                    "bench",
                    "Update",
                    {
                        "f:spec": {
                            "f:containers": {'k:{"name":"main"}': {".": {}, "f:image": {}, "f:name": {}}},
                            "f:resourceClaims": {'k:{"name":"devices"}': {".": {}, "f:name": {}}},
                            "f:schedulerName": {},
                            "f:terminationGracePeriodSeconds": {},
                        }
                    },
                )
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": f"kube-api-access-{i:05d}",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "devices"}]},
                    "volumeMounts": [
                        {
                            "name": f"kube-api-access-{i:05d}",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {},
            "schedulerName": "dra-extender-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "resourceClaims": [{"name": "devices", "resourceClaimName": f"c-{i:05d}"}],
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }
    if node:
        obj["spec"]["nodeName"] = node
        obj["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": STAMP}
        ]
    return obj


def claim(i: int, rv: int, step: int, node: str = "") -> dict[str, Any]:
    """Claim ``i``: created (step 0), with the finalizer (1), allocated and reserved (2)."""
    fields: dict[str, Any] = {"f:spec": {"f:devices": {"f:requests": {}}}}
    obj: dict[str, Any] = {
        "kind": "ResourceClaim",
        "apiVersion": "resource.k8s.io/v1",
        "metadata": {
            "name": f"c-{i:05d}",
            "namespace": NAMESPACE,
            "uid": f"uid-claim-{i}",
            "resourceVersion": str(rv),
            "creationTimestamp": STAMP,
            "managedFields": [managed("bench", "Update", fields)],
        },
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        },
        "status": {},
    }
    if step >= 1:
        obj["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        obj["metadata"]["managedFields"].append(
            managed(
                "dra-extender",
                "Update",
                {
                    "f:metadata": {
                        "f:finalizers": {".": {}, 'v:"resource.kubernetes.io/delete-protection"': {}}
                    }
                },
            )
        )
    if step >= 2:
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": "gpu-3"}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": f"p-{i:05d}", "uid": f"uid-pod-{i}"}],
        }
        obj["metadata"]["managedFields"].append(
            managed(
                "dra-extender", "Update", {"f:status": {"f:allocation": {}, "f:reservedFor": {}}}, "status"
            )
        )
    return obj


def line(etype: str, obj: dict[str, Any]) -> bytes:
    return orjson.dumps({"type": etype, "object": obj})


#: One bound pod's events: ("line", bytes) to deliver, or ("answer", claim) handed to the cache.
Step = tuple[str, Any]


def script(pods: int, order: str) -> list[Step]:
    out: list[Step] = []
    rv = 1000
    for i in range(pods):
        node = f"node-{i % 500:04d}"
        rv += 5
        answer = claim(i, rv + 3, 2, node)
        finalizer: Step = ("line", line("MODIFIED", claim(i, rv + 2, 1)))
        steps: list[Step] = [
            ("line", line("ADDED", claim(i, rv, 0))),
            ("line", line("ADDED", pod(i, rv + 1))),
        ]
        if order == "in-order":
            steps += [finalizer, ("answer", answer)]
        else:
            steps += [("answer", answer), finalizer]
        steps += [("line", line("MODIFIED", answer)), ("line", line("MODIFIED", pod(i, rv + 4, node)))]
        out += steps
    return out


class _Inline:
    """An engine worker whose loop is this thread: a queued drain runs at once."""

    def call_soon(self, fn: Callable[..., object], *args: Any) -> None:
        fn(*args)


class _Lines:
    """A RawKube whose watch answers with prepared lines, decoded as kube.watch_lines does."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def watch_lines(self, *_: Any, **__: Any) -> Iterator[dict[str, Any]]:
        for raw in self.lines:
            yield nesting.loads(raw)


def one_round(steps: list[Step], pods: int) -> float:
    state = ClusterState()
    changes = Batches(_Inline())  # type: ignore[arg-type]

    def deliver(etype: str, obj: dict[str, Any] | None, items: list[dict[str, Any]] | None) -> None:
        # ClusterMode._deliver_to_cache
        if etype == "DELETED" and obj is not None:
            changes.put(state.remove, obj)
        elif obj is not None:
            changes.put(state.apply, obj)

    raw = _Lines()
    reflectors = {
        kind: Reflector(raw, "/", kind, deliver, threading.Event(), api_version=version)  # type: ignore[arg-type]
        for kind, version in (("Pod", "v1"), ("ResourceClaim", "resource.k8s.io/v1"))
    }
    # The answers are parsed by the bind (not watch handling): ready before the clock starts.
    parsed = {id(obj): parse_resource_claim(obj) for kind, obj in steps if kind == "answer"}
    gc.collect()
    started = time.thread_time()
    for kind, value in steps:
        if kind == "answer":
            state.answered(parsed[id(value)])
            continue
        raw.lines = [value]
        reflectors["Pod" if b'"kind":"Pod"' in value else "ResourceClaim"]._watch()
    elapsed = time.thread_time() - started
    assert len(state.pods) == pods and len(state.claims) == pods
    assert all(c.allocation is not None for c in state.claims.values())
    assert all(p.node_name for p in state.pods.values())
    return elapsed / pods * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--order", choices=("in-order", "late-finalizer", "both"), default="both")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    gc.set_threshold(50_000, 10, 10)  # the service's (serve_command.py)
    results: dict[str, Any] = {"pods": args.pods, "rounds": args.rounds}
    for order in ("in-order", "late-finalizer") if args.order == "both" else (args.order,):
        steps = script(args.pods, order)
        one_round(steps, args.pods)  # warm-up
        samples = [one_round(steps, args.pods) for _ in range(args.rounds)]
        results[order] = {"best_us": min(samples), "median_us": statistics.median(samples)}
        print(
            f"{order:15s} CPU per bound pod: best {min(samples):6.1f} us, "
            f"median {statistics.median(samples):6.1f} us ({args.rounds} rounds of {args.pods} pods)"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
