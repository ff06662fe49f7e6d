"""Loading state files: YAML streams, JSON, Lists, directories, and what cannot be read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from extender.cluster.state import KINDS, ClusterState
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


#: What a bad file's one line says: our words, or (a tuple) any one of several of ours.
Says = str | tuple[str, ...]

BAD_INPUT: list[tuple[str, str, bytes, Says]] = [
    # name, file name, content, what the one line says
    ("not UTF-8", "s.yaml", b"\xff\xfe\x00k\x00i\x00n\x00d", "not UTF-8 text (byte 0xff at offset 0)"),
    (
        "text that is no object",
        "passwd.yaml",
        b"root:x:0:0:root:/root:/bin/bash\n",
        "found no Kubernetes object at all",
    ),
    (
        "unrelated kinds only",
        "cm.yaml",
        b"kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\n",
        "found only ConfigMap",
    ),
    ("a kind that is not a string", "k.yaml", b"kind: {a: 1}\n", "found only (a dict as kind)"),
    (
        "JSON nested deeper than any object",
        "deep.json",
        b"[" * 100_000 + b"]" * 100_000,
        "nested deeper than 512 levels: not a Kubernetes object",
    ),
    ("empty", "empty.yaml", b"", "found no Kubernetes object at all"),
]


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("kind: Node\n" + "#" * 1000)
    with pytest.raises(StateFileError, match=r"larger than 100 bytes \(--max-state-bytes raises the limit\)"):
        load_objects([path], max_bytes=100)
    assert load_objects([path], max_bytes=2000)[0] == [{"kind": "Node"}]


def test_a_directory_without_state_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "sub.yaml").mkdir()  # a directory named like a file is not read
    with pytest.raises(StateFileError, match=r"no \*\.yaml, \*\.yml, \*\.json files in this directory"):
        load_objects([tmp_path])


#: Nine levels of nine aliases each: 387 MB of nodes in 400 bytes.
BOMB = b"a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + b"".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n".encode() for i in range(1, 9)
)

MORE_BAD: list[tuple[str, str, bytes, Says]] = [
    ("an alias bomb", "bomb.yaml", BOMB, "YAML aliases (*name) expand to more than 10000000 nodes"),
    (
        "a timestamp no calendar has",
        "ts.yaml",
        b"kind: Node\nmetadata: {creationTimestamp: 2024-13-45}\n",
        "not valid YAML/JSON: ",  # then the loader's reason, in its words
    ),
    ("a tag that cannot be built", "tag.yaml", b"kind: Node\nspec: !!int abc\n", "not valid YAML/JSON"),
    (
        "flow nesting deeper than libyaml's stack",
        "deep.yaml",
        b"[" * 60_000 + b"]" * 60_000,
        "nested deeper than 512 levels",
    ),
    (
        "block nesting deeper than the extender carries (a claim's opaque parameters, say)",
        "deep-block.yaml",
        b"kind: ResourceClaim\nmetadata: {name: c}\nspec:\n"
        + b"".join(b" " * (i + 1) + b"k:\n" for i in range(300))
        + b" " * 301
        + b"v\n",
        "ResourceClaim c (document 1) is nested deeper than 254 levels: the extender cannot carry it",
    ),
    (
        "JSON that orjson decodes but could not encode again",
        "deep.json",
        b'{"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": ' + b'{"a":' * 300 + b"1" + b"}" * 301,
        "ResourceClaim c (document 1) is nested deeper than 254 levels",
    ),
    (
        "a name nested deeper than Python's repr recurses, as a label",
        "deep-name.json",
        b'{"kind": "Node", "metadata": {"name": ' + b'{"a":' * 1010 + b"1" + b"}" * 1012,
        "Node (a dict as name) (document 1) is nested deeper than 254 levels",
    ),
    (
        "block nesting deeper than YAML loaders go (PyYAML 6.0.4 stops at 1,000 levels itself)",
        "deep-name.yaml",
        b"kind: Node\nmetadata:\n name:\n"
        + b"".join(b" " * (i + 2) + b"a:\n" for i in range(1200))
        + b" " * 1202
        + b"x\n",
        # Which of our two answers depends on how deep the installed loader goes: either is one line.
        ("Node (a dict as name) (document 1) is nested deeper than 254 levels", "not valid YAML/JSON: "),
    ),
    (
        "a name that is not a string",
        "dict-name.yaml",
        b"kind: ResourceClaim\nmetadata: {name: {a: 1}}\nstatus: {x: !!binary aGVsbG8=}\n",
        "ResourceClaim (a dict as name) (document 1) is not representable as JSON: status.x is binary data",
    ),
    (
        "bytes (!!binary), which JSON cannot hold",
        "bin.yaml",
        b"kind: ResourceClaim\nmetadata: {name: c}\nstatus: {x: !!binary aGVsbG8=}\n",
        "ResourceClaim c (document 1) is not representable as JSON: status.x is binary data (!!binary)",
    ),
    (
        "a set (!!set)",
        "set.yaml",
        b"kind: Node\nmetadata: {name: n, labels: !!set {a, b}}\n",
        "Node n (document 1) is not representable as JSON: metadata.labels is a set (!!set)",
    ),
    (
        "a key that is not a string",
        "key.yaml",
        b"kind: Node\nmetadata: {name: n, labels: {1: x}}\n",
        "Node n (document 1) is not representable as JSON: metadata.labels has a key that is not a string (1)",
    ),
    (
        "an integer JSON's 64 bits cannot hold, in a list",
        "int.yaml",
        b"kind: Node\nmetadata: {name: n}\nspec: {taints: [{value: 1}, {value: 123456789012345678901234567890}]}\n",
        "Node n (document 1) is not representable as JSON: spec.taints[1].value is an integer beyond 64 bits",
    ),
    (
        "a key that is not a string, at the top",
        "topkey.yaml",
        b"kind: Node\nmetadata: {name: n}\n2: x\n",
        "Node n (document 1) is not representable as JSON: the object has a key that is not a string (2)",
    ),
]


@pytest.mark.parametrize(
    ("name", "file_name", "content", "says"), BAD_INPUT + MORE_BAD, ids=[c[0] for c in BAD_INPUT + MORE_BAD]
)
def test_bad_state_files_are_one_clear_error(
    name: str, file_name: str, content: bytes, says: Says, tmp_path: Path
) -> None:
    """Each case asserts the extender's own words (what a loader adds after them is its own)."""
    path = tmp_path / file_name
    path.write_bytes(content)
    with pytest.raises(StateFileError) as caught:
        load_objects([path], kinds=KINDS)
    message = str(caught.value)
    assert message.startswith(f"{path}: "), message
    assert any(one in message for one in ((says,) if isinstance(says, str) else says)), message
    assert "\n" not in message and message.count(str(path)) == 1  # one line, the file named once


def test_aliases_as_yaml_dump_writes_them_are_read(tmp_path: Path) -> None:
    """PyYAML's dump writes an alias for a value used twice: such files are read as written."""
    shared = [{"counterSet": "cs", "counters": {"mem": {"value": "1"}}}]
    doc = {
        "kind": "ResourceSlice",
        "spec": {"devices": [{"name": "a", "c": shared}, {"name": "b", "c": shared}]},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert "*id" in path.read_text()
    assert load_objects([path], kinds=KINDS)[0] == [doc]


def test_cel_and_operators_are_no_anchors(tmp_path: Path) -> None:
    """``&&`` in an expression does not send the file down the alias check's path wrongly."""
    path = tmp_path / "class.yaml"
    path.write_text('kind: DeviceClass\nspec: {selectors: [{cel: {expression: "a && b && c"}}]}\n')
    assert (
        load_objects([path], kinds=KINDS)[0][0]["spec"]["selectors"][0]["cel"]["expression"] == "a && b && c"
    )


def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "state.yaml"
    os.mkfifo(fifo)
    with pytest.raises(StateFileError, match="not a regular file"):
        load_objects([fifo])
    (tmp_path / "real.yaml").write_text("kind: Node\n")
    assert load_objects([tmp_path])[0] == [{"kind": "Node"}]  # a directory's FIFO is skipped
