"""Building ``status.allocation`` exactly as upstream writes it: results, config, nodeSelector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from extender.allocator.errors import AllocationError
from extender.allocator.features import Features
from extender.allocator.requests import RequestData
from extender.model.dra import Device, ResourceClaim, ResourceSlice
from extender.model.nodeselector import NodeSelector, Requirement, Term, node_name_selector
from extender.quantity import Quantity


@dataclass(slots=True)
class DeviceResult:
    request: RequestData
    device: Device
    slice: ResourceSlice
    admin_access: bool
    share_id: str | None
    consumed_capacity: dict[str, Quantity] | None


def _result_dict(r: DeviceResult, features: Features) -> dict[str, Any]:
    out: dict[str, Any] = {
        "request": r.request.name,
        "driver": r.device.id.driver,
        "pool": r.device.id.pool,
        "device": r.device.id.device,
    }
    if r.admin_access:
        out["adminAccess"] = True
    if r.request.request.tolerations:
        out["tolerations"] = [dict(t.raw) for t in r.request.request.tolerations]
    if features.device_binding:
        if r.device.binding_conditions:
            out["bindingConditions"] = list(r.device.binding_conditions)
        if r.device.binding_failure_conditions:
            out["bindingFailureConditions"] = list(r.device.binding_failure_conditions)
    if features.optional_node_operations and r.slice.skip_node_operations:
        out["skipNodeOperations"] = list(r.slice.skip_node_operations)
    if r.share_id is not None:
        out["shareID"] = r.share_id
    if r.consumed_capacity:
        out["consumedCapacity"] = {name: q.canonical() for name, q in r.consumed_capacity.items()}
    return out


def _configs(claim: ResourceClaim, chosen: dict[str, RequestData]) -> list[dict[str, Any]]:
    """Class configs once per class (requests = the names using it), then claim configs."""
    out: list[dict[str, Any]] = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    for request in claim.spec.requests:
        data = chosen.get(request.name)
        if data is None:
            continue
        cls = data.device_class
        entries = by_class.get(cls.name)
        if entries is None:
            entries = by_class[cls.name] = [
                {"source": "FromClass", "requests": [data.name], **config} for config in cls.config
            ]
            out.extend(entries)
        else:
            for entry in entries:
                entry["requests"].append(data.name)
    selected = {data.name for data in chosen.values()}
    for config in claim.spec.config:
        if config.requests and not any(name in selected or name in chosen for name in config.requests):
            continue  # names only subrequests that were not chosen
        out.append({"source": "FromClaim", "requests": list(config.requests), **config.configuration})
    # 1.37: an entry covering every request of the claim applies to all: its list is cleared.
    top_level = [r.name for r in claim.spec.requests]
    for entry in out:
        names = set(entry["requests"])
        if names and all(name in names or chosen[name].name in names for name in top_level if name in chosen):
            entry["requests"] = []
    for entry in out:
        if not entry["requests"]:
            del entry["requests"]
    return out


def _node_selector(results: list[DeviceResult], node_name: str) -> NodeSelector | None:
    expressions: list[Requirement] = []
    fields: list[Requirement] = []
    for r in results:
        if r.slice.per_device_node_selection:
            local, selector = r.device.node_name, r.device.node_selector
        else:
            local, selector = r.slice.node_name, r.slice.node_selector
        if local or r.device.binds_to_node:
            return node_name_selector(node_name)
        if selector is None or not selector.terms:
            continue
        if len(selector.terms) > 1:
            raise AllocationError(f"unsupported ResourceSlice.NodeSelector with {len(selector.terms)} terms")
        term = selector.terms[0]
        for req in term.match_expressions:
            if not any(_same(req, seen) for seen in expressions):
                expressions.append(req)
        for req in term.match_fields:
            if not any(_same(req, seen) for seen in fields):
                fields.append(req)
    if not expressions and not fields:
        return None
    return NodeSelector((Term(tuple(expressions), tuple(fields)),))


def _same(a: Requirement, b: Requirement) -> bool:
    return a.key == b.key and a.operator == b.operator and set(a.values) == set(b.values)


def build_allocation(
    claim: ResourceClaim, results: list[DeviceResult], node_name: str, features: Features
) -> dict[str, Any]:
    chosen: dict[str, RequestData] = {}
    for r in results:
        chosen.setdefault(r.request.base, r.request)
    devices: dict[str, Any] = {"results": [_result_dict(r, features) for r in results]}
    config = _configs(claim, chosen)
    if config:
        devices["config"] = config
    allocation: dict[str, Any] = {"devices": devices}
    selector = _node_selector(results, node_name)
    if selector is not None:
        allocation["nodeSelector"] = selector.to_dict()
    return allocation
