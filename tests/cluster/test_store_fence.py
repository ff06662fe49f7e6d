"""Whether the API server refuses this replica's writes when it does not lead
(extender/cluster/store_fence.py), judged from what it has installed: the policies shipped in
manifests/ as they are, and variations of them."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from extender.cluster.store_fence import FenceState, Writer, judge
from tests.deploy.test_rendered import STANDALONE, rendered

SIDECAR_USER = "system:serviceaccount:dra-extender:dra-extender"
STANDALONE_USER = "system:serviceaccount:dra-extender:dra-extender-standalone"
STANDALONE_LEASE = ("dra-extender", "dra-extender")


def shipped(kind: str) -> list[dict[str, Any]]:
    docs = [*rendered(), *rendered(STANDALONE)]
    return [copy.deepcopy(d) for d in docs if d["kind"] == kind]


POLICIES = shipped("ValidatingAdmissionPolicy")
BINDINGS = shipped("ValidatingAdmissionPolicyBinding")


def audit_only(bindings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(bindings)
    for b in out:
        b["spec"]["validationActions"] = ["Audit"]
    return out


@dataclass(frozen=True)
class Case:
    writer: Writer
    state: str
    identity: str | None = None
    lease: tuple[str, str] | None = None
    policies: list[dict[str, Any]] = field(default_factory=lambda: POLICIES)
    bindings: list[dict[str, Any]] = field(default_factory=lambda: BINDINGS)


CASES = {
    "sidecar, as shipped, pod-bound token": Case(Writer(SIDECAR_USER, "sched-7f9-abcde"), "enforced"),
    "standalone, as shipped, identity from its pod": Case(
        Writer(STANDALONE_USER, "ext-1"), "enforced", "ext-1_0a1b2c3d", STANDALONE_LEASE
    ),
    "nothing installed": Case(Writer(SIDECAR_USER, "p"), "absent", policies=[], bindings=[]),
    "the policy without a binding": Case(Writer(SIDECAR_USER, "p"), "absent", bindings=[]),
    "a binding that only audits": Case(Writer(SIDECAR_USER, "p"), "absent", bindings=audit_only(BINDINGS)),
    "another user's policy only": Case(Writer("system:serviceaccount:other:sa", "p"), "absent"),
    "a token not bound to a pod": Case(Writer(SIDECAR_USER, ""), "unusable"),
    "an identity that does not start with the pod name": Case(
        Writer(STANDALONE_USER, "ext-1"), "unusable", "laptop-0a1b2c3d", STANDALONE_LEASE
    ),
    "the pod name without its separator": Case(
        Writer(STANDALONE_USER, "ext-1"), "unusable", "ext-10_0a1b2c3d", STANDALONE_LEASE
    ),
    "the binding names another Lease than the one it elects on": Case(
        Writer(STANDALONE_USER, "ext-1"), "unusable", "ext-1_0a1b2c3d", ("dra-extender", "test-extender")
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_the_store_fence_is_judged_from_what_the_api_server_has(case: Case) -> None:
    found = judge(case.writer, case.identity, case.lease, case.policies, case.bindings)
    assert found.state == case.state, found.detail


def test_each_deployment_ships_one_fence_for_its_own_account_and_lease() -> None:
    for docs, user, lease in (
        (rendered(), SIDECAR_USER, ("dra-extender", "dra-extender-scheduler")),
        (rendered(STANDALONE), STANDALONE_USER, STANDALONE_LEASE),
    ):
        policies = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
        bindings = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
        assert len(policies) == len(bindings) == 1
        assert judge(Writer(user, "p"), "p_1", lease, policies, bindings).state == "enforced"
        (condition,) = policies[0]["spec"]["matchConditions"]
        assert condition["expression"] == f"request.userInfo.username == '{user}'"


def test_the_two_fences_check_the_same_rule() -> None:
    sidecar, standalone = (p["spec"] for p in POLICIES)
    for key in ("validations", "variables", "matchConstraints", "paramKind", "failurePolicy"):
        assert sidecar[key] == standalone[key], key


def test_a_state_is_one_of_the_four() -> None:
    with pytest.raises(ValueError, match="not one of"):
        FenceState("maybe", "")


def test_an_enforced_fence_names_its_lease_and_pod() -> None:
    found = judge(Writer(SIDECAR_USER, "sched-1"), None, None, POLICIES, BINDINGS)
    assert (found.state, found.lease, found.pod) == (
        "enforced",
        ("dra-extender", "dra-extender-scheduler"),
        "sched-1",
    )


ADMITS = {
    "the holder's own pod": ("sched-1_abc", True),
    "another pod": ("sched-2_abc", False),
    "a pod whose name extends ours": ("sched-10_abc", False),
    "nobody": ("", False),
    "no holder field": (None, False),
}


@pytest.mark.parametrize(("holder", "admitted"), ADMITS.values(), ids=ADMITS.keys())
def test_an_enforced_fence_admits_only_the_holders_pod(holder: str | None, admitted: bool) -> None:
    # What the sidecar's extender asks before its sweep: the standby pod's writes would be refused.
    fence = judge(Writer(SIDECAR_USER, "sched-1"), None, None, POLICIES, BINDINGS)
    assert fence.admits(holder) is admitted


def test_a_fence_not_enforced_admits_everyone() -> None:
    assert FenceState("absent", "").admits(None) and FenceState("unknown", "").admits("x_1")
