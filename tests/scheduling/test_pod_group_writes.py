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

from extender.allocator import Features
from extender.allocator.releases import Release, release_of
from extender.cel import CelEnvironment
from extender.cluster.api import ClusterAPIError, api_error
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from extender.cluster.state import ClusterState
from extender.model.core import parse_pod
from extender.scheduling.config import EngineConfig
from extender.scheduling.engine import Engine
from extender.service.runtime import follow
from tests.scheduling.test_plugin_table_136 import (
    CASES,
    CLAIM,
    CLAIM2,
    FOR_POD,
    FOR_PODGROUP,
    POD,
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
    """The case in a store, and an engine whose cache follows it (``following``: with every
    change; else it keeps what the store held at the start, as a lagging watch)."""
    store = MemoryStore()
    store.load(objects_of(c))
    state = ClusterState()
    for obj in store.all():
        state.apply(obj)
    if following:
        follow(store, state)
    text = ",".join([gates_of(c), *(f"{k}={str(v).lower()}" for k, v in gates.items())])
    features = Features.parse(text, allow_locked=True, release=release)
    return Engine(
        state, api(store), CelEnvironment(), EngineConfig(features=features, release=release)
    ), store


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
    """Two members' binds run concurrently on a pending group claim: one allocates and reserves
    it for the group; the other finds the group's reservation with the same devices and binds.
    The store ends with one allocation and one reservation, never two."""
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
