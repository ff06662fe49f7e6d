"""extender/cluster/owner_gc.py: the embedded default's garbage collector for owned claims."""

from __future__ import annotations

from typing import Any

import pytest

from extender.cluster.memstore import MemoryStore, NotFound
from extender.cluster.owner_gc import collect_owned_claims
from extender.model.dra import DELETE_PROTECTION_FINALIZER
from tests.builders import claim, pod


def owned_claim(name: str, owner: dict[str, Any], **status: Any) -> dict[str, Any]:
    c = claim(name)
    c["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }
    ]
    if status:
        c["status"] = status
        c["metadata"]["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    return c


def names(store: MemoryStore) -> list[str]:
    return sorted(o["metadata"]["name"] for o in store.objects("ResourceClaim"))


@pytest.mark.parametrize("loaded", [True, False], ids=["claims loaded before", "claims created after"])
def test_a_deleted_pod_takes_its_own_claims_only(loaded: bool) -> None:
    store = MemoryStore()
    a, b = pod("a", []), pod("b", [])
    a["metadata"]["uid"], b["metadata"]["uid"] = "uid-a", "uid-b"
    reserved = {"reservedFor": [{"resource": "pods", "name": "a", "uid": "uid-a"}], "allocation": {}}
    claims = [owned_claim("of-a", a, **reserved), owned_claim("of-b", b), claim("nobody's")]
    if loaded:
        store.load([a, b, *claims])
        collect_owned_claims(store)
    else:
        collect_owned_claims(store)
        store.load([a, b])
        for c in claims:
            store.create(c)
    store.delete("Pod", "default", "a")
    assert names(store) == ["nobody's", "of-b"]  # reservation dropped, finalizer removed, deleted
    store.delete("Pod", "default", "b")
    assert names(store) == ["nobody's"]


def test_a_replaced_pod_takes_the_old_ones_claims() -> None:
    store = MemoryStore()
    collect_owned_claims(store)
    old = pod("a", [])
    old["metadata"]["uid"] = "uid-old"
    store.create(old)
    store.create(owned_claim("of-old", old))
    store.delete("Pod", "default", "a")
    new = pod("a", [])
    new["metadata"]["uid"] = "uid-new"
    store.create(owned_claim("of-new", new))
    store.create(new)
    assert names(store) == ["of-new"]


def test_a_claim_whose_owner_reference_is_removed_is_not_collected() -> None:
    store = MemoryStore()
    collect_owned_claims(store)
    a = pod("a", [])
    a["metadata"]["uid"] = "uid-a"
    store.create(a)
    store.create(owned_claim("c", a))
    c = store.get("ResourceClaim", "default", "c")
    del c["metadata"]["ownerReferences"]
    store.update(c)
    store.delete("Pod", "default", "a")
    assert names(store) == ["c"]
    with pytest.raises(NotFound):
        store.get("Pod", "default", "a")


def test_a_deleted_pod_group_takes_its_claims_and_its_reservations() -> None:
    """The garbage collector deletes the claim the PodGroup owns; the resourceclaim controller
    drops the group's reservation of a claim it does not own (the last consumer: deallocated),
    and leaves other consumers' reservations."""
    store = MemoryStore()
    collect_owned_claims(store)
    group = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "training", "namespace": "default", "uid": "uid-pg"},
        "spec": {},
    }
    entry = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "training", "uid": "uid-pg"}
    other = {"resource": "pods", "name": "p", "uid": "uid-p"}
    reserved = {"reservedFor": [entry], "allocation": {"devices": {"results": []}}}
    made = owned_claim("made-for-group", group, **reserved)
    by_name = claim("named")
    by_name["status"] = dict(reserved)
    by_name["metadata"]["finalizers"] = [DELETE_PROTECTION_FINALIZER]
    shared = claim("shared")
    shared["status"] = {"reservedFor": [entry, other], "allocation": {"devices": {"results": []}}}
    store.load([group, made, by_name, shared])
    store.delete("PodGroup", "default", "training")
    assert names(store) == ["named", "shared"]
    named = store.get("ResourceClaim", "default", "named")
    assert "allocation" not in named["status"] and not named["metadata"].get("finalizers")
    assert store.get("ResourceClaim", "default", "shared")["status"]["reservedFor"] == [other]
