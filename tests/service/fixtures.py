"""Request bodies exactly as kube-scheduler sends them (compact JSON, Go field names, nulls).

The Pod and Nodes come from the scheduler's informer cache: no kind/apiVersion, server-defaulted
fields present, ``spec.nodeName`` empty; Node status carries the legacy ``"Port"`` key.
"""

from __future__ import annotations

from typing import Any

import orjson

EXAMPLE_NODES = ["cpu-node-1", "gpu-node-1", "gpu-node-2", "gpu-node-3"]


def scheduler_pod(
    name: str,
    uid: str,
    claims: list[dict[str, str]],
    namespace: str = "default",
    statuses: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "4711",
            "creationTimestamp": "2026-11-22T08:00:00Z",
            "labels": {"app": name},
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-abcde",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example.com/app:1.0",
                    "resources": {"claims": [{"name": c["name"]} for c in claims]},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "dra-extender-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "resourceClaims": claims,
        },
        "status": {"phase": "Pending", "qosClass": "BestEffort"},
    }
    if not claims:
        del pod["spec"]["resourceClaims"]
    if statuses:
        pod["status"]["resourceClaimStatuses"] = statuses
    return pod


def scheduler_node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "99",
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
        },
        "spec": {"podCIDR": "10.244.1.0/24"},
        "status": {
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "kubeletVersion": "v1.37.0",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def args_names(pod: dict[str, Any], names: list[str]) -> bytes:
    """nodeCacheCapable: true."""
    return orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})


def args_nodes(pod: dict[str, Any], nodes: list[dict[str, Any]]) -> bytes:
    """nodeCacheCapable: false: a NodeList without kind/apiVersion and empty metadata."""
    return orjson.dumps({"Pod": pod, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None})


def binding(name: str, uid: str, node: str, namespace: str = "default") -> bytes:
    return orjson.dumps({"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node})


TRAINER = scheduler_pod("trainer", "uid-pod-trainer", [{"name": "gpus", "resourceClaimName": "trainer-gpus"}])
INFERENCE = scheduler_pod(
    "inference-0",
    "uid-pod-inference-0",
    [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
    statuses=[{"name": "gpu", "resourceClaimName": "inference-0-gpu-x7k2p"}],
)
WEB = scheduler_pod("web", "uid-pod-web", [])
