"""Normalizing resource.k8s.io v1beta1 and v1beta2 objects to the v1 shape.

v1beta2 (1.33) already has v1's shape. v1beta1 nests device fields under ``basic`` and puts
request fields directly on the request instead of under ``exactly``.
"""

from __future__ import annotations

import copy
from typing import Any

RESOURCE_GROUP = "resource.k8s.io"
SUPPORTED_VERSIONS = ("v1", "v1beta2", "v1beta1")
#: DeviceTaintRules are also read at v1alpha3, where 1.34 and 1.35 serve them (its shape is
#: v1beta2's; 1.34's alpha class and CEL selectors, removed in 1.35, are not applied).
VERSIONS_OF_KIND: dict[str, tuple[str, ...]] = {"DeviceTaintRule": (*SUPPORTED_VERSIONS, "v1alpha3")}


def supported_versions(kind: str) -> tuple[str, ...]:
    """The resource.k8s.io versions a DRA ``kind`` is read at."""
    return VERSIONS_OF_KIND.get(kind, SUPPORTED_VERSIONS)


_EXACT_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
    "derivedAttributes",
)


def resource_version_of(obj: dict[str, Any]) -> str:
    """The resource.k8s.io version of an object's apiVersion ('' for other groups)."""
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    return version if group == RESOURCE_GROUP else ""


def to_v1(obj: dict[str, Any]) -> dict[str, Any]:
    """A v1-shaped copy of a DRA object (the input is returned as is when already v1/v1beta2)."""
    if resource_version_of(obj) != "v1beta1":
        return obj
    out = copy.deepcopy(obj)
    out["apiVersion"] = f"{RESOURCE_GROUP}/v1"
    kind = out.get("kind")
    spec = out.get("spec")
    if kind == "ResourceSlice" and isinstance(spec, dict):
        for device in spec.get("devices") or []:
            if isinstance(device, dict) and isinstance(device.get("basic"), dict):
                basic = device.pop("basic")
                device.update(basic)
    if kind == "ResourceClaim" and isinstance(spec, dict):
        _requests_to_v1(spec.get("devices"))
    if kind == "ResourceClaimTemplate" and isinstance(spec, dict) and isinstance(spec.get("spec"), dict):
        _requests_to_v1(spec["spec"].get("devices"))
    return out


def _requests_to_v1(devices: Any) -> None:
    if not isinstance(devices, dict):
        return
    for request in devices.get("requests") or []:
        if not isinstance(request, dict) or "exactly" in request or request.get("firstAvailable"):
            continue
        exactly = {field: request.pop(field) for field in _EXACT_FIELDS if field in request}
        if exactly:
            request["exactly"] = exactly


def claim_for_version(claim: dict[str, Any], version: str) -> dict[str, Any]:
    """A v1-shaped ResourceClaim as ``version`` of resource.k8s.io spells it (for creating one)."""
    out = copy.deepcopy(claim)
    out["apiVersion"] = f"{RESOURCE_GROUP}/{version}"
    if version == "v1beta1":
        devices = (out.get("spec") or {}).get("devices") or {}
        for request in devices.get("requests") or []:
            exactly = request.pop("exactly", None)
            if isinstance(exactly, dict):
                request.update(exactly)
    return out
