"""/debug/make-room and ``kubectl dra make-room`` (issue 51): which running pods to move so that
a pending pod (or a shape: N devices of a class) fits on one node, and where each goes, as the
planner (:mod:`extender.scheduling.preempt.make_room`) answers on a snapshot, with the rules
the operator set (``--make-room-*``). Read-only: nothing here evicts.

:func:`make_room_data` is the view's JSON, :func:`render` its text; the engine's part (which
snapshot, which clocks) is :func:`extender.service.debug.make_room_view`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from extender.model.core import Pod
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.preempt.make_room import NoPlan, Plan, Rules, Shape, plan

#: What each kind of no plan means, after "no plan: KIND".
NO_PLAN = {
    "impossible": "no node fits the target even with every pod that may move gone",
    "bounds": "none found within the rules' bounds",
}


def target_of(target: Pod | Shape, rules: Rules) -> dict[str, Any]:
    """The target as the answer names it, with the priority ceiling of the pods that may move."""
    if isinstance(target, Shape):
        return {"deviceClass": target.device_class, "count": target.count, "priority": rules.max_priority}
    return {"pod": f"{target.namespace}/{target.name}", "priority": target.priority}


def rules_of(rules: Rules) -> dict[str, Any]:
    return {
        "maxPriority": rules.max_priority,
        "controllerKinds": sorted(rules.controller_kinds),
        "minAgeSeconds": rules.min_age,
        "maxMoves": rules.max_moves,
        "maxNodes": rules.max_nodes,
        "budgetSeconds": rules.budget,
        "exactUpTo": rules.exact_up_to,
        "maxDestinations": rules.max_destinations,
    }


def make_room_data(
    snapshot: Snapshot,
    target: Pod | Shape,
    rules: Rules,
    *,
    now: float,
    clock: Callable[[], float],
    timeout: float | None,
) -> dict[str, Any]:
    """The plan for ``target`` on ``snapshot`` as JSON: ``found`` (a plan, or no move needed),
    ``needsMoves``, a one-line ``summary``, the ``plan`` (the node to free, the search that
    found it, the moves in order, the target's devices) or ``noPlan`` (its kind and, per node,
    why; ``problem``: what is wrong with the target itself), and the ``rules`` used. A bound
    pod has nothing to make room for (``boundTo``)."""
    out: dict[str, Any] = {"target": target_of(target, rules)}
    if isinstance(target, Pod) and target.node_name:
        return {
            **out,
            "found": True,
            "needsMoves": False,
            "summary": f"bound to {target.node_name}: nothing to make room for",
            "boundTo": target.node_name,
            "plan": None,
            "noPlan": None,
            "rules": rules_of(rules),
        }
    found = plan(snapshot, target, rules, now=now, clock=clock, timeout=timeout)
    if isinstance(found, Plan):
        summary = found.explain() + (f" ({found.search} search)" if found.moves else "")
        return {
            **out,
            "found": True,
            "needsMoves": found.needs_moves,
            "summary": summary,
            "plan": {
                "node": found.node,
                "search": found.search,
                "moves": [
                    {
                        "pod": m.pod,
                        "uid": m.uid,
                        "priority": m.priority,
                        "toNode": m.to_node,
                        "devices": list(m.devices),
                    }
                    for m in found.moves
                ],
                "devices": list(found.devices),
            },
            "noPlan": None,
            "rules": rules_of(rules),
        }
    return {
        **out,
        "found": False,
        "needsMoves": True,
        "summary": f"no plan: {found.kind} ({NO_PLAN.get(found.kind, found.kind)})",
        "plan": None,
        "noPlan": no_plan(found),
        "rules": rules_of(rules),
    }


def no_plan(found: NoPlan) -> dict[str, Any]:
    return {
        "kind": found.kind,
        "problem": found.reasons.get("") or None,
        "reasons": {node: why for node, why in sorted(found.reasons.items()) if node},
    }


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def _rules_line(rules: dict[str, Any], priority: Any) -> str:
    kinds = ", ".join(rules.get("controllerKinds") or [])
    return (
        f"rules: pods at or below priority {priority} may move, if owned by {kinds}, started at "
        f"least {rules.get('minAgeSeconds', 0):g} s ago; at most {rules.get('maxMoves')} moves\n"
    )


def render(data: dict[str, Any]) -> str:
    """The answer as text: the target, the summary, then the moves in order and the target's
    devices (a plan), or a line per node saying why not (no plan), and the rules."""
    target = data["target"]
    if "pod" in target:
        named = f"pod {target['pod']} (priority {target['priority']})"
    else:
        named = f"{target['count']} x {target['deviceClass']}"
    text = f"make room for {named}\n{data['summary']}\n"
    held = data.get("heldByMover")
    if held is not None:
        text += f"the mover is making room on {held['node']}: its devices there are held for it\n"
    found = data.get("plan")
    if found is not None and found["moves"]:
        rows = [
            [str(i), m["pod"], str(m["priority"]), m["toNode"], ", ".join(m["devices"]) or "-"]
            for i, m in enumerate(found["moves"], 1)
        ]
        devices = ", ".join(found["devices"])
        rows.append(["then", target.get("pod") or "the target", "", found["node"], devices])
        text += "\n" + _table(["STEP", "POD", "PRIORITY", "TO NODE", "DEVICES"], rows)
    elif found is not None:
        text += f"devices: {', '.join(found['devices']) or 'none'}\n"
    missing = data.get("noPlan")
    if missing is not None:
        if missing.get("problem"):
            text += f"{missing['problem']}\n"
        text += "".join(f"  {node}: {why}\n" for node, why in missing["reasons"].items())
    if "rules" in data:
        text += "\n" + _rules_line(data["rules"], target["priority"])
    return text
