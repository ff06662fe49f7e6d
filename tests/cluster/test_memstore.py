"""The in-memory store that plays the API server in the embedded default."""

from __future__ import annotations

from typing import Any

from extender.cluster.memstore import Event, MemoryStore


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"a": "1"}}}


def test_load_copies_what_it_is_given_unless_told_it_owns_it() -> None:
    given, owned = _node("copied"), _node("owned")
    store = MemoryStore()
    store.load([given])
    store.load([owned], owned=True)
    given["metadata"]["labels"]["a"] = "changed by the caller"
    assert store.get("Node", "", "copied")["metadata"]["labels"] == {"a": "1"}
    # Kept as it is: stamped in place, no copy made.
    assert owned["metadata"]["resourceVersion"] == "2"
    assert owned["metadata"]["uid"]


def test_watchers_get_their_own_copy_of_an_owned_object() -> None:
    seen: list[Event] = []
    store = MemoryStore()
    store.subscribe(seen.append)
    owned = _node("n")
    store.load([owned], owned=True)
    seen[0].object["metadata"]["labels"]["a"] = "changed by a watcher"
    assert store.get("Node", "", "n")["metadata"]["labels"] == {"a": "1"}
