"""Requests described as an audit log names them, for the API request metrics."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster.api_calls import describe

CASES: dict[str, tuple[str, str, dict[str, Any] | None, tuple[str, str]]] = {
    "claim status write": (
        "PUT",
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status",
        {"timeout": "10000ms"},
        ("update", "resourceclaims/status"),
    ),
    "claim finalizer": (
        "PUT",
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c",
        None,
        ("update", "resourceclaims"),
    ),
    "claim read": (
        "GET",
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c",
        None,
        ("get", "resourceclaims"),
    ),
    "claim create": (
        "POST",
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims",
        None,
        ("create", "resourceclaims"),
    ),
    "claim delete": (
        "DELETE",
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c",
        None,
        ("delete", "resourceclaims"),
    ),
    "unreserve": (
        "PATCH",
        "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status",
        None,
        ("patch", "resourceclaims/status"),
    ),
    "binding": ("POST", "/api/v1/namespaces/ns/pods/p/binding", None, ("create", "pods/binding")),
    "pod status": ("PATCH", "/api/v1/namespaces/ns/pods/p/status", None, ("patch", "pods/status")),
    "pods of a namespace": ("GET", "/api/v1/namespaces/ns/pods", None, ("list", "pods")),
    "cluster list": (
        "GET",
        "/apis/resource.k8s.io/v1/resourceslices",
        {"limit": 500},
        ("list", "resourceslices"),
    ),
    "watch": ("GET", "/api/v1/nodes", {"watch": "true", "resourceVersion": "5"}, ("watch", "nodes")),
    "lease": (
        "PUT",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/dra",
        None,
        ("update", "leases"),
    ),
    "a namespace itself": ("GET", "/api/v1/namespaces/ns", None, ("get", "namespaces")),
    "version": ("GET", "/version", None, ("get", "discovery")),
    "group discovery": ("GET", "/apis/resource.k8s.io", None, ("get", "discovery")),
    "version discovery": ("GET", "/apis/resource.k8s.io/v1", None, ("get", "discovery")),
    "core discovery": ("GET", "/api/v1", None, ("get", "discovery")),
    "event": ("POST", "/api/v1/namespaces/ns/events", None, ("create", "events")),
}


@pytest.mark.parametrize("case", CASES)
def test_describe(case: str) -> None:
    method, path, query, expected = CASES[case]
    assert describe(method, path, query) == expected
