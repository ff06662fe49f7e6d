"""Pod-level decisions: finding the pod's claims, allocated claims, and the allocator's answer."""

from __future__ import annotations

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.scheduling.decide.decision import Assessment, NodeDecision, renamed
from extender.scheduling.decide.snapshot import Snapshot
from tests.builders import allocated, claim, device, device_class, node, pod, resource_slice

CEL = CelEnvironment()


def decide(
    objects: list[dict[str, object]], pod_name: str = "pod", node_name: str = "node-1"
) -> NodeDecision:
    state = ClusterState.from_objects(objects)
    snapshot = Snapshot(state, Features(), CEL)
    return snapshot.decide(snapshot.claims_of(state.pods[("default", pod_name)]), state.nodes[node_name])


BASE = [device_class(), resource_slice("s", [device("d0"), device("d1")]), node("node-1"), node("node-2")]


def test_pod_without_claims_fits() -> None:
    assert decide([*BASE, pod()]) == NodeDecision("node-1", True)


def test_claim_by_name_is_allocated() -> None:
    d = decide([*BASE, claim("c"), pod(claims=["c"])])
    assert d.fits and d.allocations["c"]["devices"]["results"][0]["device"] == "d0"


def test_missing_claim_is_a_reason() -> None:
    d = decide([*BASE, pod(claims=["nope"])])
    # foreachPodResourceClaim: the lister's NotFound error text, Unschedulable.
    assert not d.fits and d.reason == 'resourceclaim.resource.k8s.io "nope" not found'


def test_template_claim_is_found_through_the_pod_status_and_must_be_owned() -> None:
    owned = claim(
        "pod-gpu-abc",
        ownerReferences=[
            {"apiVersion": "v1", "kind": "Pod", "name": "pod", "uid": "uid-pod", "controller": True}
        ],
    )
    assert decide([*BASE, owned, pod(templates={"gpu": "pod-gpu-abc"})]).fits
    stranger = claim("pod-gpu-abc")
    assert "was not created for Pod default/pod (Pod is not owner)" in (
        decide([*BASE, stranger, pod(templates={"gpu": "pod-gpu-abc"})]).reason or ""
    )
    assert "ResourceClaim not created yet" in (
        decide([*BASE, {**pod(templates={"gpu": "x"}), "status": {}}]).reason or ""
    )
    assert decide([*BASE, pod(templates={"gpu": None})]).fits  # no claim needed


def test_allocated_claims_only_need_a_matching_node_selector() -> None:
    allocation = allocated(("driver-a", "pool-1", "d0"))
    allocation["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    }
    objects = [*BASE, claim("shared", allocation=allocation), pod(claims=["shared"])]
    assert decide(objects) == NodeDecision("node-1", True)
    assert "resourceclaim not available on the node" in (decide(objects, node_name="node-2").reason or "")


def test_broken_and_deleted_claims() -> None:
    broken = claim("b")
    broken["spec"]["devices"]["requests"] = 5
    assert "cannot be read" in (decide([*BASE, broken, pod(claims=["b"])]).error or "")
    deleting = claim("d", deletionTimestamp="2026-01-01T00:00:00Z")
    assert "is being deleted" in (decide([*BASE, deleting, pod(claims=["d"])]).reason or "")


def test_allocator_errors_are_errors_and_misfits_are_reasons() -> None:
    from tests.builders import exact

    # A missing class is PreFilter's Unschedulable (validateDeviceClass), not an error.
    assert "request req-0: device class x does not exist" in (
        decide([*BASE, claim("c", requests=[exact(cls="x")]), pod(claims=["c"])]).reason or ""
    )
    bad = device_class("bad", expression="device.attributes['x'].y == 1")
    assert "CEL runtime error" in (
        decide([*BASE, bad, claim("c", requests=[exact(cls="bad")]), pod(claims=["c"])]).error or ""
    )
    assert "needs 3 devices" in (
        decide([*BASE, claim("c", requests=[exact(count=3)]), pod(claims=["c"])]).reason or ""
    )


def test_claims_of_a_pod_are_allocated_together() -> None:
    d = decide([*BASE, claim("a"), claim("b"), pod(claims=["a", "b"])])
    assert [a["devices"]["results"][0]["device"] for a in d.allocations.values()] == ["d0", "d1"]
    assert not decide([*BASE, claim("a"), claim("b"), claim("c"), pod(claims=["a", "b", "c"])]).fits


FULL = (
    "cannot allocate all claims: claim default/a, request gpu: needs 1 device; 8 match, 8 of them "
    "in use; claim default/b, request nic: needs 1 device; 2 match, 2 of them in use"
)

#: name -> (the first pod's answer, its claims, the look-alike pod's claims, the answer said for
#: them or None: judged again).
RENAMED: dict[str, tuple[Assessment, tuple[str, ...], tuple[str, ...], str | None]] = {
    "each claim by its own name": (
        Assessment(False, FULL),
        ("default/a", "default/b"),
        ("default/x", "default/y"),
        FULL.replace("default/a", "default/x").replace("default/b", "default/y"),
    ),
    "names swapped between the pods, in one pass": (
        Assessment(False, FULL),
        ("default/a", "default/b"),
        ("default/b", "default/a"),
        FULL.replace("default/a", "default/T")
        .replace("default/b", "default/a")
        .replace("default/T", "default/b"),
    ),
    "a name used otherwise than for a claim to allocate": (
        Assessment(False, FULL + "; pools being updated: driver/default/a"),
        ("default/a", "default/b"),
        ("default/x", "default/y"),
        None,
    ),
    "a claim the pods do not share": (
        Assessment(False, FULL),
        ("default/a",),
        ("default/x",),
        None,
    ),
    "an error (the pod's answer, not the node's)": (
        Assessment(False, FULL, error="claim default/a: CEL runtime error"),
        ("default/a", "default/b"),
        ("default/x", "default/y"),
        None,
    ),
    "a fit": (Assessment(True), ("default/a",), ("default/x",), None),
    "a claim the first pod names twice": (
        Assessment(False, FULL.replace("default/a", "default/b")),
        ("default/b", "default/b"),
        ("default/x", "default/y"),
        None,
    ),
    "a claim the look-alike pod names twice": (
        Assessment(False, FULL),
        ("default/a", "default/b"),
        ("default/x", "default/x"),
        None,
    ),
}


@pytest.mark.parametrize("case", list(RENAMED))
def test_a_failure_is_said_again_for_a_look_alike_pods_claims(case: str) -> None:
    failed, before, after, expected = RENAMED[case]
    again = renamed(failed, before, after)
    assert (again.reason if again is not None else None) == expected
    if again is not None:
        assert again == Assessment(False, expected, resolvable=failed.resolvable)
