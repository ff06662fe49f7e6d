"""Claims and templates checked against what the cluster's drivers publish, offline: what
``dra-extender lint`` and ``kubectl dra lint`` print (the checks:
:mod:`extender.scheduling.decide.claim_hints`).

The cluster (slices, classes) comes from a state file, a snapshot or a listing; the claims and
templates checked are the files' given with ``-f``, else every claim not allocated yet and every
template of the cluster itself. Only hints: nothing is refused or written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from extender.allocator.features import Features
from extender.cel import CelEnvironment, CelOptions
from extender.cluster.state import ClusterState
from extender.model.dra import ClaimSpec
from extender.scheduling.decide.claim_hints import hints_for
from extender.scheduling.decide.published import Published

#: Exit code when some claim or template got a hint.
FOUND = 1


def lint(
    cluster: Iterable[dict[str, Any]], features: Features, checked: Iterable[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """``{"checked": N, "findings": [...], "problems": [...]}``: one finding per hint, each naming
    the object (kind, namespace, name) it is for."""
    state = ClusterState.from_objects(cluster)
    problems = list(state.problems)
    published = Published(
        state, CelEnvironment(CelOptions(list_type_attributes=features.list_type_attributes))
    )
    if checked is None:
        claims = [c for c in state.claims.values() if c.allocation is None]
        templates = list(state.templates.values())
    else:
        given = ClusterState.from_objects(o for o in checked if o.get("kind") in _CHECKED_KINDS)
        problems += given.problems
        claims, templates = list(given.claims.values()), list(given.templates.values())
    targets: list[tuple[str, str, str, ClaimSpec]] = [
        ("ResourceClaim", c.namespace, c.name, c.spec) for c in claims
    ] + [("ResourceClaimTemplate", t.namespace, t.name, t.spec) for t in templates]
    findings = [
        {"kind": kind, "namespace": namespace, "name": name, **hint.to_dict()}
        for kind, namespace, name, spec in sorted(targets, key=lambda t: t[:3])
        for hint in hints_for(spec, published)
    ]
    return {"checked": len(targets), "findings": findings, "problems": problems}


_CHECKED_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


def render(result: dict[str, Any], output: str) -> str:
    if output == "json":
        return orjson.dumps(result, option=orjson.OPT_INDENT_2).decode() + "\n"
    return render_text(result)


def render_text(result: dict[str, Any]) -> str:
    lines = [f"{f['kind']} {f['namespace']}/{f['name']}: {f['text']}" for f in result["findings"]]
    lines += [f"problem: {p}" for p in result["problems"]]
    found = len({(f["kind"], f["namespace"], f["name"]) for f in result["findings"]})
    lines.append(
        f"{result['checked']} checked, {found} with hints"
        + ("" if found else ": none can be seen never to match what the drivers publish")
    )
    return "\n".join(lines) + "\n"
