"""What the extender believes, for people: inventory, claims, in-flight allocations, decisions.

Each view is a JSON-ready dict and has a plain-text table rendering (``?format=text``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from typing import Any

import orjson

from extender.model.core import Pod
from extender.model.dra import DeviceID, ResourceClaim
from extender.scheduling.decide.capacity import SHAPE_COUNTS, Capacity, capacity, product_of
from extender.scheduling.decide.decision import fit_summary, node_info
from extender.scheduling.decide.extended import may_request
from extender.scheduling.engine import Engine
from extender.scheduling.preempt.make_room import Rules, Shape
from extender.service import make_room_view as make_room


def _holders(engine: Engine) -> dict[DeviceID, list[str]]:
    holders: dict[DeviceID, list[str]] = {}
    for claim in engine.state.claims.values():
        if claim.allocation is None:
            continue
        for r in claim.allocation.devices:
            label = f"{claim.namespace}/{claim.name}" + (" (admin)" if r.admin_access else "")
            holders.setdefault(r.id, []).append(label)
    for record in engine.tracker.assumed:
        if record.devices is None:
            continue
        ns, name = record.key
        for r in record.devices.devices:
            label = f"{ns}/{name} ({record.state.value})"
            if label not in holders.get(r.id, []) and f"{ns}/{name}" not in holders.get(r.id, []):
                holders.setdefault(r.id, []).append(label)
    return holders


def inventory(engine: Engine) -> dict[str, Any]:
    snapshot = engine.snapshot()
    holders = _holders(engine)
    nodes = {}
    for name in sorted(engine.state.nodes):
        node = engine.state.nodes[name]
        devices = []
        for pool in snapshot.inventory.pools_for(node.name, node.labels):
            for s in pool.slices:
                for d in s.devices:
                    product = product_of(d.attributes)
                    devices.append(
                        {
                            "device": str(d.id),
                            "product": product or None,
                            "allocatedTo": holders.get(d.id, []),
                            "pool": {"incomplete": pool.incomplete, "invalid": pool.invalid_reason or None},
                        }
                    )
        free = sum(1 for d in devices if not d["allocatedTo"])
        nodes[name] = {"devices": devices, "free": free, "total": len(devices)}
    return {"nodes": nodes}


def claims(engine: Engine) -> dict[str, Any]:
    out = []
    for (ns, name), claim in sorted(engine.state.claims.items()):
        allocation = claim.allocation
        out.append(
            {
                "claim": f"{ns}/{name}",
                "allocated": allocation is not None,
                "devices": [f"{r.request}={r.id}" for r in allocation.devices] if allocation else [],
                "reservedFor": [f"{e.get('resource')}/{e.get('name')}" for e in claim.reserved_for],
                "deleting": claim.deleting,
            }
        )
    broken = [
        {"claim": f"{ns}/{name}", "problem": why}
        for (ns, name), why in sorted(engine.state.broken_claims.items())
    ]
    return {"claims": out, "unreadable": broken}


def in_flight(engine: Engine) -> dict[str, Any]:
    """Binds being carried out, and claim writes the cache does not show yet."""
    writes = engine.tracker.assumed.unsettled(engine.state.claims, engine.state.claims_seen_rv)
    now = engine.clock()
    return {
        "inFlight": [
            {
                "pod": f"{e.pod_key[0]}/{e.pod_key[1]}",
                "podUID": e.pod_uid,
                "node": e.node,
                "ageSeconds": round(now - e.started, 3),
            }
            for e in engine.tracker.binds.values()
        ],
        "claimWrites": [
            {
                "claim": f"{r.key[0]}/{r.key[1]}",
                "pod": f"{r.pod[0]}/{r.pod[1]}",
                "podUID": r.pod_uid,
                "node": r.node,
                "allocating": r.allocation is not None,
                "state": r.state.value,
                "ageSeconds": round(now - r.started, 3),
            }
            for r in writes
        ],
        "makeRoomHolds": room_holds(engine),
        "entries": engine.entries(),
    }


def room_holds(engine: Engine, uid: str | None = None) -> list[dict[str, Any]]:
    """The devices the make-room mover holds (``--make-room``): for which pod, on which node,
    while which pods move off it (only ``uid``'s, when given)."""
    return [
        {
            "pod": f"{hold.pod.namespace}/{hold.pod.name}",
            "podUID": hold.pod.uid,
            "node": hold.node,
            "movingUIDs": sorted(hold.moved),
        }
        for hold in engine.tracker.room_holds.values()
        if uid is None or hold.pod.uid == uid
    ]


#: Claims named per node as holding the devices a pod would need (the largest holders first).
MAX_HOLDERS = 5


def pod(engine: Engine, target: Pod) -> dict[str, Any]:
    """Per node: does the pod fit, with which devices, or why not, and for a node where it does
    not: the claims (and the pods they are reserved for) holding devices the pod's requests
    select there, the ones whose release would free room. A bound pod: where, with which devices."""
    if target.node_name:
        return {
            "pod": f"{target.namespace}/{target.name}",
            "boundTo": target.node_name,
            "claims": engine.state.devices_of(target),
            "nodes": {},
        }
    decisions = engine.explain(target)
    snapshot = engine.snapshot()
    claims = snapshot.claims_of(target).to_allocate
    owners = _holders(engine)  # as /debug/inventory names them (admin access, writes in flight)
    nodes: dict[str, Any] = {}
    for name, decision in decisions.items():
        entry = decision.to_dict()
        node = engine.state.nodes[name]
        if not decision.fits and claims:
            held: dict[str, list[str]] = {}
            for device, free in snapshot.allocator.matching(node_info(node), claims):
                if not free:
                    for owner in owners.get(device.id, ["(a write in flight)"]):
                        held.setdefault(owner, []).append(str(device.id))
            ranked = sorted(held.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            entry["heldBy"] = [
                {"claim": owner, "devices": devices, "reservedFor": _reserved_for(snapshot.claims, owner)}
                for owner, devices in ranked[:MAX_HOLDERS]
            ]
            entry["moreHolders"] = max(0, len(ranked) - MAX_HOLDERS)
        nodes[name] = entry
    out: dict[str, Any] = {"pod": f"{target.namespace}/{target.name}", "nodes": nodes}
    if target.nominated_node_name and not target.node_name:
        out["nominatedNodeName"] = target.nominated_node_name  # where a preemption made room for it
    # Claims naming what no driver publishes: the lines filter adds to a fits-nowhere answer.
    hints = engine.claim_hints.lines(snapshot.state, snapshot.cel, claims)
    if hints:
        out["hints"] = hints
    return out


def _reserved_for(claims: Mapping[tuple[str, str], ResourceClaim], owner: str) -> list[str]:
    namespace, _, name = owner.split(" ", 1)[0].partition("/")
    claim = claims.get((namespace, name))
    if claim is None:
        return []
    return [f"{e.get('resource', 'pods')}/{e.get('name')}" for e in claim.reserved_for]


def decisions(engine: Engine, limit: int) -> dict[str, Any]:
    recent = list(engine.log.entries)[-limit:] if limit > 0 else []
    return {"decisions": recent}


# --- text renderings ------------------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def capacity_view(
    engine: Engine,
    device_class: str | None = None,
    count: int | None = None,
    found: Capacity | None = None,
) -> dict[str, Any]:
    """Free devices per node and driver, per class and product, and pods of a shape that fit.

    ``device_class`` and ``count``: the one shape asked about, with its fit per node.
    ``found``: the capacity already computed (the HTTP layer computes it in slices)."""
    found = found if found is not None else capacity(engine.snapshot())
    out: dict[str, Any] = {
        "nodes": [
            {
                "node": n.node,
                "driver": n.driver,
                "total": n.total,
                "allocated": n.allocated,
                "tainted": n.tainted,
                "free": n.free,
            }
            for n in found.nodes
        ],
        "classes": [
            {"deviceClass": c.device_class, "product": c.product, "total": c.total, "free": c.free}
            for c in found.classes
        ],
        **class_figures(found),
    }
    if device_class is not None:
        wanted = count or 1
        per_node = found.free_by_class.get(device_class, {})
        out["shape"] = {
            "deviceClass": device_class,
            "count": wanted,
            "known": device_class in engine.state.classes,
            "podsThatFit": found.pods_that_fit(device_class, wanted),
            "byNode": {node: free // wanted for node, free in sorted(per_node.items()) if free >= wanted},
        }
    return out


def make_room_view(engine: Engine, target: Pod | Shape, rules: Rules | None = None) -> dict[str, Any]:
    """Which pods to move so that ``target`` fits on one node, on the engine's snapshot, with
    ``rules`` (default: the operator's, ``--make-room-*``): :mod:`extender.service.make_room_view`."""
    data = make_room.make_room_data(
        engine.snapshot(),
        target,
        rules if rules is not None else engine.config.make_room,
        now=engine.wall_clock(),
        clock=engine.clock,
        timeout=engine.config.allocation_timeout,
    )
    if isinstance(target, Pod) and (held := room_holds(engine, target.uid)):
        data["heldByMover"] = held[0]  # the mover is carrying a plan out for it (docs/make-room-mover.md)
    return data


def class_figures(found: Capacity) -> dict[str, Any]:
    """Per class: its devices by state, pods of each shape that fit, free devices stranded for
    them, and the classes that cannot be judged (the capacity view's and the page's)."""
    classes = sorted(found.free_by_class)
    return {
        "devicesByClass": {cls: found.class_states(cls).as_dict() for cls in classes},
        "podsThatFit": {cls: {str(n): found.pods_that_fit(cls, n) for n in SHAPE_COUNTS} for cls in classes},
        "strandedFor": {cls: {str(n): found.stranded(cls, n) for n in SHAPE_COUNTS} for cls in classes},
        "classErrors": found.class_errors,
        "note": "pods that fit: sum over nodes of free // count; constraints (matchAttribute, "
        "distinctAttribute), counters and capacity are not considered; devicesByClass and "
        "strandedFor count a device on every node that reaches it",
    }


#: Pending pods and recent decisions the capacity page lists at most.
PAGE_PENDING = 100
PAGE_DECISIONS = 20


def pending_pods(engine: Engine, limit: int = PAGE_PENDING) -> dict[str, Any]:
    """Pods of the extender's schedulers not bound yet that ask for devices (claims, or
    extended resources), each with what the last filter answered for it (from the decision
    log: what kube-scheduler was told), oldest first by name."""
    schedulers = engine.config.scheduler_names
    waiting = sorted(
        key
        for key, p in engine.state.pods.items()
        if not p.node_name and p.scheduler_name in schedulers and (p.claims or may_request(p))
    )
    last_filter: dict[str, dict[str, Any]] = {}
    for entry in reversed(engine.log.entries):
        if entry.get("verb") == "filter" and entry.get("pod") and entry["pod"] not in last_filter:
            last_filter[entry["pod"]] = entry
    rows = []
    for namespace, name in waiting[:limit]:
        label = f"{namespace}/{name}"
        entry = last_filter.get(label)
        rows.append(
            {
                "pod": label,
                "filtered": entry is not None,
                "time": entry["time"] if entry else None,
                "passed": entry.get("passed") if entry else None,
                "error": entry.get("error") if entry else None,
                "reasons": entry.get("reasons") or {} if entry else {},
            }
        )
    return {"pending": rows, "more": max(0, len(waiting) - limit)}


def page_view(
    engine: Engine, found: Capacity, page: int, per_page: int, device_class: str | None
) -> dict[str, Any]:
    """What the capacity page shows: /debug/capacity's figures, one page of nodes with each
    class's devices there by state, pending pods with their reasons, recent decisions."""
    figures = class_figures(found)  # not the per-node list: 5,000 entries the page pages itself
    classes = [device_class] if device_class is not None else sorted(found.free_by_class)
    names = sorted(engine.state.nodes)
    if device_class is not None:
        names = [n for n in names if n in found.states_by_class.get(device_class, {})]
    pages = max(1, -(-len(names) // per_page))
    page = min(max(page, 1), pages)
    shown = names[(page - 1) * per_page : page * per_page]
    histograms: dict[str, dict[str, int]] = {}
    for cls in classes:
        counts: dict[int, int] = {}
        for free in found.free_by_class.get(cls, {}).values():
            counts[free] = counts.get(free, 0) + 1
        histograms[cls] = {str(free): counts[free] for free in sorted(counts)}
    return {
        "capacity": figures,
        "classes": classes,
        "deviceClass": device_class,
        "nodesByFree": histograms,
        "page": page,
        "pages": pages,
        "nodeCount": len(names),
        "nodes": [
            {
                "node": name,
                "classes": {
                    cls: states.as_dict()
                    for cls in classes
                    if (states := found.states_by_class.get(cls, {}).get(name)) is not None
                },
            }
            for name in shown
        ],
        **pending_pods(engine),
        "decisions": decisions(engine, PAGE_DECISIONS)["decisions"],
    }


def _text(value: Any) -> str:
    """A detail value as text: strings as they are, mappings and lists as compact JSON."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str).decode()


def render_text(view: str, data: dict[str, Any]) -> str:
    if view == "capacity":
        text = _table(
            ["NODE", "DRIVER", "TOTAL", "ALLOCATED", "TAINTED", "FREE"],
            [
                [
                    n["node"],
                    n["driver"],
                    str(n["total"]),
                    str(n["allocated"]),
                    str(n.get("tainted", 0)),  # an extender older than the tainted count
                    str(n["free"]),
                ]
                for n in data["nodes"]
            ],
        )
        text += "\n" + _table(
            ["CLASS", "PRODUCT", "TOTAL", "FREE"],
            [
                [c["deviceClass"], c["product"] or "-", str(c["total"]), str(c["free"])]
                for c in data["classes"]
            ],
        )
        states = ("free", "allocated", "inFlight", "tainted")
        text += "\n" + _table(
            ["CLASS", "FREE", "ALLOCATED", "IN FLIGHT", "TAINTED"],
            [[cls, *(str(by[k]) for k in states)] for cls, by in data.get("devicesByClass", {}).items()],
        )
        counts = [str(n) for n in SHAPE_COUNTS]
        text += "\n" + _table(
            ["CLASS", *(f"PODS x{n}" for n in counts), *(f"STRANDED x{n}" for n in counts[1:])],
            [
                [
                    cls,
                    *(str(fits[n]) for n in counts),
                    *(str(data.get("strandedFor", {}).get(cls, {}).get(n, "-")) for n in counts[1:]),
                ]
                for cls, fits in data["podsThatFit"].items()
            ],
        )
        for cls, error in data["classErrors"].items():
            text += f"class {cls}: {error}\n"
        if "shape" in data:
            shape = data["shape"]
            text += (
                f"\n{shape['podsThatFit']} pods asking for {shape['count']} x {shape['deviceClass']} fit"
                + ("" if shape["known"] else " (no such DeviceClass)")
                + "\n"
            )
            text += _table(["NODE", "PODS"], [[n, str(k)] for n, k in shape["byNode"].items()])
        return text + f"({data['note']})\n"
    if view == "make-room":
        return make_room.render(data)
    if view == "inventory":
        rows = []
        for node, info in data["nodes"].items():
            if not info["devices"]:
                rows.append([node, "-", "-", "(no devices)"])
            for d in info["devices"]:
                rows.append([node, d["device"], d["product"] or "-", ", ".join(d["allocatedTo"]) or "free"])
        return _table(["NODE", "DEVICE", "PRODUCT", "ALLOCATED TO"], rows)
    if view == "claims":
        rows = [
            [
                c["claim"],
                "yes" if c["allocated"] else "no",
                " ".join(c["devices"]) or "-",
                " ".join(c["reservedFor"]) or "-",
            ]
            for c in data["claims"]
        ]
        text = _table(["CLAIM", "ALLOCATED", "DEVICES", "RESERVED FOR"], rows)
        for b in data["unreadable"]:
            text += f"unreadable: {b['claim']}: {b['problem']}\n"
        return text
    if view == "inflight":
        binds = [[e["pod"], e["node"], str(e["ageSeconds"])] for e in data["inFlight"]]
        writes = [
            [
                w["claim"],
                w["pod"],
                w["node"],
                w["state"],
                "yes" if w["allocating"] else "no",
                str(w["ageSeconds"]),
            ]
            for w in data["claimWrites"]
        ]
        return (
            _table(["BINDING POD", "NODE", "AGE(s)"], binds)
            + "\n"
            + _table(["CLAIM WRITE", "POD", "NODE", "STATE", "ALLOCATING", "AGE(s)"], writes)
        )
    if view == "pod" and "boundTo" in data:
        text = f"pod {data['pod']} is bound to {data['boundTo']}\n"
        return text + "".join(
            f"  {claim}: {', '.join(ids) or 'no devices'}\n" for claim, ids in data["claims"].items()
        )
    if view == "pod":
        rows = []
        freeing = []
        for node, d in data["nodes"].items():
            if d["fits"]:
                rows.append([node, "yes", fit_summary(d)])
                continue
            detail = f"error: {d['error']}" if d["error"] else d["reason"] or ""
            rows.append([node, "no", " ".join(detail.split())])  # one line per row
            for held in d.get("heldBy", []):
                pods = ", ".join(held["reservedFor"]) or "no pod"
                freeing.append([node, held["claim"], pods, str(len(held["devices"]))])
            if d.get("moreHolders"):
                freeing.append([node, f"... {d['moreHolders']} more claims", "", ""])
        text = f"pod {data['pod']}\n"
        if data.get("nominatedNodeName"):
            text += f"nominated to {data['nominatedNodeName']} by a preemption\n"
        text += _table(["NODE", "FITS", "DETAIL"], rows)
        if data.get("hints"):
            text += "\nhints (claims that can never match what the drivers publish):\n"
            text += "".join(f"  {line}\n" for line in data["hints"])
        if freeing:
            text += "\nwhat would free room (claims holding devices the pod's requests select):\n"
            text += _table(["NODE", "CLAIM", "RESERVED FOR", "DEVICES"], freeing)
        return text
    if view == "decisions":
        rows = []
        for d in data["decisions"]:
            when = _dt.datetime.fromtimestamp(d["time"], _dt.UTC).strftime("%H:%M:%S.%f")[:-3]
            details = " ".join(
                f"{k}={_text(v)}" for k, v in d.items() if k not in ("time", "verb", "pod", "durationMs")
            )
            rows.append([when, d["verb"], d.get("pod") or "-", f"{d['durationMs']}", details])
        return _table(["TIME", "VERB", "POD", "MS", "DETAILS"], rows)
    raise ValueError(f"unknown view {view}")
