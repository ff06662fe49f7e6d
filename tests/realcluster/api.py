"""A small JSON client for the real kube-apiserver, as the tests' admin (client certificate).

Raw dicts in and out, as the objects are written in the tests; errors carry the server's status
code and its ``Status`` message, so a test can assert exactly what the API server refused.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx

#: kind -> (plural, namespaced). The group/version comes from each object's apiVersion.
KINDS: dict[str, tuple[str, bool]] = {
    "Namespace": ("namespaces", False),
    "Node": ("nodes", False),
    "Pod": ("pods", True),
    "ServiceAccount": ("serviceaccounts", True),
    "ConfigMap": ("configmaps", True),
    "Service": ("services", True),
    "Endpoints": ("endpoints", True),
    "Event": ("events", True),
    "Deployment": ("deployments", True),
    "ReplicaSet": ("replicasets", True),
    "NetworkPolicy": ("networkpolicies", True),
    "PodDisruptionBudget": ("poddisruptionbudgets", True),
    "PriorityClass": ("priorityclasses", False),
    "ClusterRole": ("clusterroles", False),
    "ClusterRoleBinding": ("clusterrolebindings", False),
    "Role": ("roles", True),
    "RoleBinding": ("rolebindings", True),
    "Lease": ("leases", True),
    "ResourceSlice": ("resourceslices", False),
    "DeviceClass": ("deviceclasses", False),
    "ResourceClaim": ("resourceclaims", True),
    "ResourceClaimTemplate": ("resourceclaimtemplates", True),
    "DeviceTaintRule": ("devicetaintrules", False),
    "PodGroup": ("podgroups", True),
    "ValidatingAdmissionPolicy": ("validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("validatingadmissionpolicybindings", False),
    "CustomResourceDefinition": ("customresourcedefinitions", False),
}

#: The apiVersion the tests use for each kind unless an object names its own.
DEFAULT_VERSIONS: dict[str, str] = {
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "NetworkPolicy": "networking.k8s.io/v1",
    "PodDisruptionBudget": "policy/v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "ClusterRole": "rbac.authorization.k8s.io/v1",
    "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    "Role": "rbac.authorization.k8s.io/v1",
    "RoleBinding": "rbac.authorization.k8s.io/v1",
    "Lease": "coordination.k8s.io/v1",
    "ResourceSlice": "resource.k8s.io/v1",
    "DeviceClass": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
    # Release-dependent: an Api of a control plane takes its release's (releases.py api_versions).
    "DeviceTaintRule": "resource.k8s.io/v1beta2",
    "PodGroup": "scheduling.k8s.io/v1alpha2",
    "ValidatingAdmissionPolicy": "admissionregistration.k8s.io/v1",
    "ValidatingAdmissionPolicyBinding": "admissionregistration.k8s.io/v1",
    "CustomResourceDefinition": "apiextensions.k8s.io/v1",
}


class ApiError(Exception):
    def __init__(self, code: int, message: str, reason: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.message = message
        self.reason = reason


def path(
    kind: str,
    name: str | None = None,
    namespace: str | None = None,
    *,
    api_version: str | None = None,
    subresource: str | None = None,
) -> str:
    plural, namespaced = KINDS[kind]
    version = api_version or DEFAULT_VERSIONS.get(kind, "v1")
    base = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    if namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    if name:
        base += f"/{name}"
    if subresource:
        base += f"/{subresource}"
    return base


def tls_context(ca: str, cert: tuple[str, str] | None = None) -> ssl.SSLContext:
    """Trust ``ca``; present the client certificate ``cert`` (certificate, key) if given."""
    context = ssl.create_default_context(cafile=ca)
    if cert is not None:
        context.load_cert_chain(*cert)
    return context


class Api:
    def __init__(
        self,
        server: str,
        *,
        ca: str,
        cert: tuple[str, str] | None = None,
        token: str | None = None,
        versions: dict[str, str] | None = None,
    ):
        """``versions``: kind -> apiVersion where this API server's release differs from
        :data:`DEFAULT_VERSIONS` (tests/realcluster/releases.py)."""
        self.versions = {**DEFAULT_VERSIONS, **(versions or {})}
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=server, verify=tls_context(ca, cert), headers=headers, timeout=30)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, url: str, **kw: Any) -> Any:
        answer = self.http.request(method, url, **kw)
        if answer.status_code >= 400:
            try:
                status = answer.json()
            except ValueError:
                status = {"message": answer.text}
            raise ApiError(answer.status_code, str(status.get("message")), str(status.get("reason", "")))
        return answer.json() if answer.content else None

    def _path(
        self, kind: str, name: str | None, namespace: str | None, *, subresource: str | None = None
    ) -> str:
        return path(kind, name, namespace, api_version=self.versions.get(kind), subresource=subresource)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        kind = obj["kind"]
        obj.setdefault("apiVersion", self.versions.get(kind, "v1"))
        meta = obj.get("metadata") or {}
        return dict(
            self.request(
                "POST",
                path(kind, None, meta.get("namespace"), api_version=obj["apiVersion"]),
                json=obj,
            )
        )

    def create_all(self, objects: Iterable[dict[str, Any]]) -> None:
        for obj in objects:
            self.create(obj)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            return dict(self.request("GET", self._path(kind, name, namespace)))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def list(self, kind: str, namespace: str | None = None, **params: str) -> list[dict[str, Any]]:
        answer = self.request("GET", self._path(kind, None, namespace), params=params)
        return list(answer.get("items") or [])

    def update(self, obj: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
        meta = obj["metadata"]
        url = self._path(obj["kind"], meta["name"], meta.get("namespace"), subresource=subresource)
        return dict(self.request("PUT", url, json=obj))

    def patch(
        self,
        kind: str,
        name: str,
        namespace: str | None,
        body: Any,
        *,
        subresource: str | None = None,
        content_type: str = "application/merge-patch+json",
    ) -> dict[str, Any]:
        url = self._path(kind, name, namespace, subresource=subresource)
        return dict(self.request("PATCH", url, json=body, headers={"Content-Type": content_type}))

    def delete(self, kind: str, name: str, namespace: str | None = None, *, grace: int | None = 0) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace is not None:
            body["gracePeriodSeconds"] = grace  # type: ignore[assignment]
        try:
            self.request("DELETE", self._path(kind, name, namespace), json=body)
        except ApiError as exc:
            if exc.code != 404:
                raise

    def wait_for(self, check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not reached within {timeout:.0f} s")
            time.sleep(0.1)
