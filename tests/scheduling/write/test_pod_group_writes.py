"""DRAWorkloadResourceClaims: what PreBind, Unreserve and PostFilter write for a PodGroup's claims.

Upstream's cases (v1.36.3 pkg/scheduler/framework/plugins/dynamicresources/dynamicresources_test.go
TestPlugin, the podgroup-*, bind-podgroup-failure, postfilter-*-podgroup* and reserved-okay-podgroup
entries) have their PreFilter/Filter answers in test_plugin_table_136.py; here the same cases run
through the bind verb and the filter verb's PostFilter against an in-memory API server, and what
the store holds afterwards is compared with upstream's ``changes``. Later cases go past the table:
1.37's PodGroupPostFilter (kubernetes#139864), members bound concurrently, a member bound behind
the cache's back.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from extender.allocator.releases import Release, release_of
from extender.cluster.api import ClusterAPIError, api_error
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.model.core import parse_pod
from extender.model.dra import parse_resource_claim
from extender.scheduling.engine import Engine
from extender.scheduling.inflight.tracker import BindInFlight
from extender.scheduling.write.claim_writes import ClaimWriteError, reserve_claim
from extender.service.runtime import follow
from tests.builders import pod as pod_builder
from tests.scheduling.on_store import engine_on_store
from tests.scheduling.test_plugin_table_136 import (
    CASES,
    CLAIM,
    CLAIM2,
    FOR_POD,
    FOR_PODGROUP,
    POD,
    PODGROUP,
    WORKER,
    Case,
    gates_of,
    objects_of,
)

RELEASE_136 = release_of(36)


class FailingBinding(MemoryAPI):
    """The Binding is refused (upstream's bind-podgroup-failure: the Bind step fails)."""

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise api_error(403, "Forbidden", None)


def json_copy(p: dict[str, Any], *, name: str, uid: str) -> dict[str, Any]:
    """Another pod like ``p`` (a member of the same group)."""
    out: dict[str, Any] = json.loads(json.dumps(p))
    out["metadata"].update(name=name, uid=uid)
    return out


def case(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def cluster(
    c: Case,
    *,
    release: Release = RELEASE_136,
    api: type[MemoryAPI] = MemoryAPI,
    following: bool = True,
    **gates: bool,
) -> tuple[Engine, MemoryStore]:
    text = ",".join([gates_of(c), *(f"{k}={str(v).lower()}" for k, v in gates.items())])
    return engine_on_store(objects_of(c), text, release, api=api, following=following)


def claim_of(store: MemoryStore, name: str = CLAIM) -> dict[str, Any]:
    return store.get("ResourceClaim", "default", name)


def status(obj: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = obj.get("status") or {}
    return found


async def bind(engine: Engine, store: MemoryStore, pod: str = POD) -> str:
    p = store.get("Pod", "default", pod)
    return await engine.bind("default", pod, p["metadata"]["uid"], WORKER)


async def post_filter(engine: Engine, store: MemoryStore, pod: str = POD) -> list[str]:
    """The filter verb for the pod on worker (nothing passes), then its PostFilter's write."""
    result = engine.filter(parse_pod(store.get("Pod", "default", pod)), [WORKER])
    await engine.binder.background_done()
    return result.passed


# --- PreBind: whom the claim is reserved for ---------------------------------------------------------

#: upstream case -> reservedFor after PreBind (the claim's allocation: the case's, or the new one).
PREBIND = {
    "podgroup-claim-reference": [FOR_PODGROUP],
    "podgroup-claim-reference-feature-disabled-reserves-for-pod": [FOR_POD],
    "podgroup-claim-template": [FOR_PODGROUP],
    "podgroup-with-resources": [FOR_PODGROUP],
    "podgroup-with-resources-feature-disabled-reserves-for-pod": [FOR_POD],
}


@pytest.mark.parametrize("name", sorted(PREBIND))
def test_prebind_reserves_as_the_136_plugin(name: str) -> None:
    """Upstream's ``changes`` also add an allocationTimestamp to a claim allocated before; the
    real API server refuses any change of an existing allocation (it is immutable), so the
    extender leaves it as it is and only adds the reservation."""
    engine, store = cluster(case(name))
    before = claim_of(store)
    assert asyncio.run(bind(engine, store)) == ""
    after = claim_of(store)
    assert status(after)["reservedFor"] == PREBIND[name]
    assert "resource.kubernetes.io/delete-protection" in after["metadata"]["finalizers"]
    if status(before).get("allocation"):
        assert status(after)["allocation"] == status(before)["allocation"]
    else:  # allocated by this bind, on worker's only device
        results = status(after)["allocation"]["devices"]["results"]
        assert [(r["request"], r["device"]) for r in results] == [("req-1", "instance-1")]
    assert store.get("Pod", "default", POD)["spec"]["nodeName"] == WORKER


def test_reserved_okay_podgroup_writes_nothing_to_the_claim() -> None:
    """reserved-okay-podgroup: the claim is reserved for the pod's PodGroup, which counts as the
    pod's own reservation: PreBind leaves it alone and the pod is bound."""
    engine, store = cluster(case("reserved-okay-podgroup"))
    before = claim_of(store)
    assert asyncio.run(bind(engine, store)) == ""
    assert claim_of(store) == before
    assert store.get("Pod", "default", POD)["spec"]["nodeName"] == WORKER


def test_bind_podgroup_failure_keeps_the_group_reservation() -> None:
    """bind-podgroup-failure: the Binding fails; Unreserve removes the pod's own reservations,
    never the PodGroup's (other members use the claim)."""
    engine, store = cluster(case("bind-podgroup-failure"), api=FailingBinding)
    error = asyncio.run(bind(engine, store))
    assert "403" in error
    assert status(claim_of(store))["reservedFor"] == [FOR_PODGROUP]
    assert status(claim_of(store))["allocation"]
    assert not store.get("Pod", "default", POD)["spec"].get("nodeName")


def test_a_failed_binding_of_a_pod_outside_any_group_still_releases_its_claim() -> None:
    """The contrast: the same failure for the gate-off case takes the pod's reservation back."""
    engine, store = cluster(
        case("podgroup-claim-reference-feature-disabled-reserves-for-pod"), api=FailingBinding
    )
    assert "403" in asyncio.run(bind(engine, store))
    assert not status(claim_of(store)).get("reservedFor")


# --- PostFilter --------------------------------------------------------------------------------------


def test_postfilter_unreserve_podgroup() -> None:
    """postfilter-unreserve-podgroup: no group pod is scheduled, so the group's reservation is
    removed (upstream's strategic merge patch); the allocation stays for a later attempt."""
    engine, store = cluster(case("postfilter-unreserve-podgroup"))
    before = claim_of(store)
    assert asyncio.run(post_filter(engine, store)) == []
    after = claim_of(store)
    assert not status(after).get("reservedFor")
    assert status(after)["allocation"] == status(before)["allocation"]
    # The next attempt finds it reserved for nobody and unavailable: deallocated (rule one).
    asyncio.run(post_filter(engine, store))
    assert "allocation" not in status(claim_of(store))


def test_postfilter_skip_unreserve_podgroup_feature_disabled() -> None:
    engine, store = cluster(case("postfilter-skip-unreserve-podgroup-feature-disabled"))
    before = claim_of(store)
    asyncio.run(post_filter(engine, store))
    assert claim_of(store) == before


def test_postfilter_deallocate_podgroup() -> None:
    """postfilter-deallocate-podgroup: reserved for nobody: deallocated as any pod claim."""
    engine, store = cluster(case("postfilter-deallocate-podgroup"))
    asyncio.run(post_filter(engine, store))
    after = status(claim_of(store))
    assert "allocation" not in after and not after.get("reservedFor")


def test_postfilter_skip_unreserve_podgroup_when_pods_active() -> None:
    engine, store = cluster(case("postfilter-skip-unreserve-podgroup-when-pods-active"))
    before = claim_of(store)
    asyncio.run(post_filter(engine, store))
    assert claim_of(store) == before


def test_postfilter_skip_unreserve_podgroup_other_claim_deallocated() -> None:
    """The pod's own unavailable claim is deallocated first; the group's is not touched."""
    engine, store = cluster(case("postfilter-skip-unreserve-podgroup-other-claim-deallocated"))
    group_claim = claim_of(store)
    asyncio.run(post_filter(engine, store))
    assert "allocation" not in status(claim_of(store, CLAIM2))
    assert claim_of(store) == group_claim


def test_1_37_deallocates_a_claim_reserved_only_for_the_idle_group() -> None:
    """1.37 PodGroupPostFilter (deallocatePodGroupClaims, kubernetes#139864): an unavailable
    claim reserved for nothing but the group is deallocated in one step."""
    engine, store = cluster(case("postfilter-unreserve-podgroup"), release=release_of(37))
    asyncio.run(post_filter(engine, store))
    after = status(claim_of(store))
    assert "allocation" not in after and not after.get("reservedFor")


def test_a_member_bound_behind_the_cache_keeps_the_group_reservation() -> None:
    """The cache shows every member unbound, but the API server has one bound (its watch event
    is late): the group still uses the claim, so nothing is written."""
    c = case("postfilter-unreserve-podgroup")
    member = json_copy(c.pod, name=f"{POD}-2", uid="uid-2")
    engine, store = cluster(c, following=False)
    engine.state.apply(member)  # the cache: unbound
    member["spec"]["nodeName"] = WORKER
    store.load([member])  # the API server: bound
    before = claim_of(store)
    asyncio.run(post_filter(engine, store))
    assert claim_of(store) == before


def test_a_member_that_is_gone_does_not_keep_the_group_reservation() -> None:
    """A member the cache still shows, deleted from the API server meantime, uses nothing."""
    c = case("postfilter-unreserve-podgroup")
    engine, store = cluster(c, following=False)
    engine.state.apply(json_copy(c.pod, name=f"{POD}-2", uid="uid-2"))  # never in the store
    asyncio.run(post_filter(engine, store))
    assert not status(claim_of(store)).get("reservedFor")


# --- members bound one after another, and at once ----------------------------------------------------


def test_the_second_member_uses_the_group_reservation_without_writing() -> None:
    c = case("podgroup-with-resources")
    engine, store = cluster(c)
    second = json_copy(c.pod, name=f"{POD}-2", uid="uid-2")
    store.load([second])
    assert asyncio.run(bind(engine, store)) == ""
    written = claim_of(store)
    assert asyncio.run(bind(engine, store, f"{POD}-2")) == ""
    assert claim_of(store) == written  # reserved for the group once, by the first member
    assert store.get("Pod", "default", f"{POD}-2")["spec"]["nodeName"] == WORKER


def test_members_bound_at_once_allocate_the_group_claim_once() -> None:
    """Two members' binds are started together on a pending group claim: the first takes the
    devices before it writes (assumed), so the second does not allocate again; it binds on the
    group's reservation once that is written. One allocation, one reservation, one write."""
    c = case("podgroup-with-resources")
    engine, store = cluster(c)
    second = json_copy(c.pod, name=f"{POD}-2", uid="uid-2")
    store.load([second])

    async def both() -> list[str]:
        return list(await asyncio.gather(bind(engine, store), bind(engine, store, f"{POD}-2")))

    answers = dict(zip((POD, f"{POD}-2"), asyncio.run(both()), strict=True))
    after = status(claim_of(store))
    assert after["reservedFor"] == [FOR_PODGROUP]
    assert len(after["allocation"]["devices"]["results"]) == 1
    for name, answer in answers.items():  # bound exactly when the answer says so
        assert (answer == "") == bool(store.get("Pod", "default", name)["spec"].get("nodeName")), answers
    assert answers[POD] == ""


def test_a_group_claim_write_with_a_lost_answer_counts_once() -> None:
    """The status write lands but its answer is lost: the read-back finds the group's entry and
    takes it as written; the claim is reserved for the group once."""

    class LosesFirstStatusAnswer(MemoryAPI):
        lost = False

        async def update_claim_status(self, claim: dict[str, Any]) -> dict[str, Any]:
            answer = await super().update_claim_status(claim)
            if not self.lost:
                self.lost = True
                raise ClusterAPIError("connection reset")
            return answer

    engine, store = cluster(case("podgroup-with-resources"), api=LosesFirstStatusAnswer)
    assert asyncio.run(bind(engine, store)) == ""
    assert status(claim_of(store))["reservedFor"] == [FOR_PODGROUP]


# --- PostFilter never releases what a scheduled member uses (found by review) ----------------------


def test_a_member_recreated_under_the_same_name_and_bound_keeps_the_reservation() -> None:
    """The cache has the old my-pod-2 (unbound); the API server has a new my-pod-2 (another UID),
    bound: the group is scheduled, in 1.36 and in 1.37 nothing is written."""
    for release in (RELEASE_136, release_of(37)):
        c = case("postfilter-unreserve-podgroup")
        engine, store = cluster(c, release=release, following=False)
        engine.state.apply(json_copy(c.pod, name=f"{POD}-2", uid="uid-old"))
        recreated = json_copy(c.pod, name=f"{POD}-2", uid="uid-new")
        recreated["spec"]["nodeName"] = WORKER
        store.load([recreated])
        before = claim_of(store)
        asyncio.run(post_filter(engine, store))
        assert claim_of(store) == before, release.name


def test_a_bound_member_the_cache_never_saw_keeps_the_reservation() -> None:
    c = case("postfilter-unreserve-podgroup")
    engine, store = cluster(c, following=False)
    stranger = json_copy(c.pod, name="stranger", uid="uid-stranger")
    stranger["spec"]["nodeName"] = WORKER
    store.load([stranger])
    before = claim_of(store)
    asyncio.run(post_filter(engine, store))
    assert claim_of(store) == before


def test_a_made_up_filter_request_cannot_release_a_group_s_claim() -> None:
    """A pod outside the group (as the API server has it) sent with the group's name and claim:
    nothing is written."""
    c = case("postfilter-unreserve-podgroup")
    engine, store = cluster(
        c, following=False
    )  # the cache has not seen the bystander: the request's pod is used
    store.load([json_copy(pod_builder("bystander"), name="bystander", uid="uid-bystander")])
    forged = json_copy(c.pod, name="bystander", uid="uid-bystander")
    before = claim_of(store)

    async def forge() -> None:
        engine.filter(parse_pod(forged), [WORKER])
        await engine.binder.background_done()

    asyncio.run(forge())
    assert claim_of(store) == before


def test_a_member_that_passed_a_filter_recently_keeps_the_reservation() -> None:
    """kube-scheduler may have assumed it (Reserve, Permit) before its bind arrives."""
    c = case("postfilter-unreserve-podgroup")
    engine, store = cluster(c)
    engine.tracker.groups.passed("default", PODGROUP, engine.clock())
    before = claim_of(store)
    asyncio.run(post_filter(engine, store))
    assert claim_of(store) == before


def test_a_member_being_bound_or_an_unsettled_group_write_keeps_the_reservation() -> None:
    c = case("postfilter-unreserve-podgroup")
    engine, store = cluster(c)
    member = json_copy(c.pod, name=f"{POD}-2", uid="uid-2")
    store.load([member])
    p, group = parse_pod(c.pod), engine.state.pod_groups[("default", PODGROUP)]
    assert not engine.tracker.group_busy(engine.state, p, group)
    loop = asyncio.new_event_loop()
    engine.tracker.binds["uid-2"] = BindInFlight(
        "uid-2", ("default", f"{POD}-2"), WORKER, 0.0, loop.create_future()
    )
    assert engine.tracker.group_busy(engine.state, p, group)
    del engine.tracker.binds["uid-2"]
    claim = engine.state.claims[("default", CLAIM)]
    engine.tracker.assumed.assume(
        claim, "uid-2", ("default", f"{POD}-2"), WORKER, None, 0.0, group.consumer()
    )
    assert engine.tracker.group_busy(engine.state, p, group)
    loop.close()


def test_a_claim_owned_by_another_instance_of_the_group_is_not_unreserved() -> None:
    """IsForPodGroup compares the controller's UID: a template claim of an earlier PodGroup of
    the same name is not this group's."""
    c = case("postfilter-unreserve-podgroup")
    engine, store = cluster(c)
    group = engine.state.pod_groups[("default", PODGROUP)]
    templated = json_copy(group.raw, name=PODGROUP, uid=group.uid)
    templated["spec"]["resourceClaims"] = [{"name": CLAIM, "resourceClaimTemplateName": "template"}]
    templated["status"] = {"resourceClaimStatuses": [{"name": CLAIM, "resourceClaimName": CLAIM}]}
    claim = claim_of(store)
    claim["metadata"]["ownerReferences"][0]["uid"] = "uid-of-an-earlier-group"
    store.load([templated, claim])
    before = claim_of(store)
    asyncio.run(post_filter(engine, store))
    assert claim_of(store) == before


def test_1_37_deallocates_only_a_claim_reserved_for_the_group_alone() -> None:
    """Reserved for the group and something else: 1.37 does not deallocate; it removes the
    group's entry as 1.36 does."""
    c = case("postfilter-unreserve-podgroup")
    engine, store = cluster(c, release=release_of(37))
    claim = claim_of(store)
    claim["status"]["reservedFor"].append({"resource": "pods", "name": "other", "uid": "uid-other"})
    store.load([claim])
    asyncio.run(post_filter(engine, store))
    after = status(claim_of(store))
    assert after["allocation"] and after["reservedFor"] == [
        {"resource": "pods", "name": "other", "uid": "uid-other"}
    ]


def test_a_bind_does_not_rely_on_a_group_reservation_this_extender_removed() -> None:
    """The extender's PostFilter removed the group's reservation (as unreserve_group does); its
    watch does not show that yet. A member's bind reads the claim fresh, finds it reserved for
    nobody and does not bind (kube-scheduler retries once the cache has caught up)."""
    c = case("reserved-okay-podgroup")
    engine, store = cluster(c, following=False)
    group = engine.state.pod_groups[("default", PODGROUP)]
    claim = engine.state.claims[("default", CLAIM)]
    asyncio.run(engine.binder.api.unreserve_claim("default", CLAIM, claim.uid, group.uid))
    assert not status(claim_of(store)).get("reservedFor")  # the store; the cache still has it
    error = asyncio.run(bind(engine, store))
    assert f"no longer reserved for pod group {PODGROUP}" in error, error
    assert not store.get("Pod", "default", POD)["spec"].get("nodeName")
    # Once the cache shows it, the bind reserves the claim for the group again and binds.
    follow(store, engine.state)
    engine.state.apply(claim_of(store))
    assert asyncio.run(bind(engine, store)) == ""
    assert status(claim_of(store))["reservedFor"] == [FOR_PODGROUP]


def test_a_pod_group_claim_written_by_another_member_counts_as_written() -> None:
    """reserve_claim for the group: the status write conflicts, and the fresh claim has the
    group's entry with the same devices (another member's write): done, nothing more is sent."""
    c = case("podgroup-with-resources")
    store = MemoryStore()
    store.load(objects_of(c))
    raw = claim_of(store)
    claim = parse_resource_claim(raw)
    allocation = {
        "devices": {
            "results": [{"request": "req-1", "driver": "some-driver", "pool": WORKER, "device": "instance-1"}]
        }
    }
    written = json.loads(json.dumps(raw))
    written["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    written = store.update(written)
    written["status"] = {"allocation": allocation, "reservedFor": [FOR_PODGROUP]}
    store.update(written, status=True)  # the other member's write, after our snapshot
    answer = asyncio.run(
        reserve_claim(MemoryAPI(store), claim, allocation, parse_pod(c.pod), consumer=FOR_PODGROUP)
    )
    assert answer["status"]["reservedFor"] == [FOR_PODGROUP]
    other = {
        **allocation,
        "devices": {"results": [{**allocation["devices"]["results"][0], "device": "instance-2"}]},
    }
    with pytest.raises(ClaimWriteError):
        asyncio.run(reserve_claim(MemoryAPI(store), claim, other, parse_pod(c.pod), consumer=FOR_PODGROUP))


def test_a_member_that_passes_a_filter_while_the_group_is_read_keeps_the_reservation() -> None:
    """The group looked idle, then a member passed a filter while the API server was being
    asked: asked again after the read, nothing is written."""
    engines: list[Engine] = []

    class MemberPassesMeanwhile(MemoryAPI):
        async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
            pods = await super().list_pods(namespace)
            engines[0].tracker.groups.passed(namespace, PODGROUP, engines[0].clock())
            return pods

    engine, store = cluster(case("postfilter-unreserve-podgroup"), api=MemberPassesMeanwhile)
    engines.append(engine)
    before = claim_of(store)
    asyncio.run(post_filter(engine, store))
    assert claim_of(store) == before
