"""Loading state files: YAML streams, JSON, Lists, directories, and what cannot be read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from extender.cluster.state import ClusterState
from extender.statefile import StateFileError, load_objects
from tests.builders import claim, node


def test_yaml_stream_json_and_lists(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "kind: Node\napiVersion: v1\nmetadata: {name: n1}\n---\n---\nkind: Node\napiVersion: v1\nmetadata: {name: n2}\n"
    )
    (tmp_path / "b.json").write_text(json.dumps({"kind": "List", "items": [node("n3"), claim()]}))
    (tmp_path / "ignored.txt").write_text("not read")
    objects, problems = load_objects([tmp_path])
    assert [o["metadata"]["name"] for o in objects] == ["n1", "n2", "n3", "claim-0"]
    assert problems == []


def test_unreadable_files_are_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("a: [unclosed")
    with pytest.raises(StateFileError, match="not valid YAML"):
        load_objects([tmp_path / "bad.yaml"])
    with pytest.raises(StateFileError, match=r"missing\.yaml"):
        load_objects([tmp_path / "missing.yaml"])


def test_objects_that_cannot_be_read_become_problems() -> None:
    broken = claim("broken")
    broken["spec"]["devices"]["requests"] = "not a list"
    state = ClusterState.from_objects(
        [
            broken,
            {"kind": "ConfigMap", "metadata": {"name": "x"}},
            {"kind": "Node", "metadata": {}},
            {"apiVersion": "resource.k8s.io/v9", "kind": "DeviceClass", "metadata": {"name": "c"}},
        ]
    )
    assert ("default", "broken") in state.broken_claims
    assert any("ConfigMap x: kind not used" in p for p in state.problems)
    assert any("without metadata.name" in p for p in state.problems)
    assert any("unsupported apiVersion" in p for p in state.problems)


def test_non_objects_in_files_are_problems(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("- 1\n- 2\n")
    objects, problems = load_objects([tmp_path / "x.yaml"])
    assert objects == [] and "expected an object" in problems[0]
