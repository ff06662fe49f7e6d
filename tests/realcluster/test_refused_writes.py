"""What counts as a write the API server refused (controlplane.refused_in), judged on audit
events as kube-apiserver writes them (level Metadata: verb, objectRef, responseStatus)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.realcluster.controlplane import refused_in


def event(
    verb: str, resource: str, name: str, code: int, subresource: str = "", agent: str = "dra-extender/1"
) -> dict[str, Any]:
    ref = {"resource": resource, "namespace": "default", "name": name}
    uri = f"/api/v1/namespaces/default/{resource}/{name}"
    if subresource:
        ref["subresource"] = subresource
        uri += f"/{subresource}"
    return {
        "verb": verb,
        "objectRef": ref,
        "requestURI": uri,
        "userAgent": agent,
        "responseStatus": {"code": code},
    }


CASES: dict[str, tuple[dict[str, Any], set[str], bool]] = {
    "a write accepted": (event("update", "resourceclaims", "c", 200, "status"), set(), False),
    "a conflict (retried)": (event("update", "resourceclaims", "c", 409, "status"), set(), False),
    "a delete of what is gone": (event("delete", "resourceclaims", "c", 404), set(), False),
    "kube-scheduler's own request": (
        event("create", "events", "e", 422, agent="kube-scheduler/v1.36"),
        set(),
        False,
    ),
    "a binding of a pod the test deleted": (event("create", "pods", "p", 404, "binding"), {"p"}, False),
    "a binding of a pod the test did not delete": (event("create", "pods", "p", 404, "binding"), {"q"}, True),
    "a binding refused otherwise": (event("create", "pods", "p", 403, "binding"), {"p"}, True),
    "a claim's status of a deleted pod's name": (
        event("update", "resourceclaims", "p", 404, "status"),
        {"p"},
        True,
    ),
    "an invalid write": (event("update", "resourceclaims", "c", 422, "status"), set(), True),
}


@pytest.mark.parametrize("case", CASES)
def test_refused(case: str) -> None:
    audit, deleted, refused = CASES[case]
    assert bool(refused_in([audit], deleted)) is refused
