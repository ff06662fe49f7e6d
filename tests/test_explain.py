"""``dra-extender explain``: offline from state files and online from a running extender give
the same per-node answer, with the claims whose release would free room."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from extender.cli import main
from tests.integration.servers import cli_server
from tests.shared import REPO

EXAMPLES = str(REPO / "examples")


def explain(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stderr", err)
        code = main(["explain", *argv], out)
    return code, out.getvalue(), err.getvalue()


def test_offline_a_pod_that_fits_nowhere_names_the_claims_holding_its_devices() -> None:
    code, text, _ = explain("default/oversized", "--state", EXAMPLES, "-o", "json")
    assert code == 1
    nodes: dict[str, Any] = json.loads(text)["nodes"]
    assert not any(n["fits"] for n in nodes.values())
    assert nodes["gpu-node-1"]["heldBy"] == [
        {
            "claim": "default/batch-job-gpus",
            "devices": ["gpu.example.com/gpu-node-1/gpu-0", "gpu.example.com/gpu-node-1/gpu-1"],
            "reservedFor": ["pods/batch-job"],
        }
    ]
    assert nodes["gpu-node-2"]["heldBy"] == [] and nodes["cpu-node-1"]["heldBy"] == []


def test_offline_text_has_the_table_and_what_would_free_room() -> None:
    code, text, _ = explain("default/oversized", "--state", EXAMPLES)
    assert code == 1
    assert "needs 9 devices; 8 match, 2 of them in use" in text
    assert "what would free room" in text and "default/batch-job-gpus  pods/batch-job  2" in text


def test_a_pod_that_fits_exits_0_and_a_missing_one_2() -> None:
    assert explain("default/trainer", "--state", EXAMPLES)[0] == 0
    code, _, err = explain("default/nope", "--state", EXAMPLES)
    assert code == 2 and "pod default/nope not found" in err


def test_online_asks_the_running_extender_and_agrees_with_offline() -> None:
    offline = json.loads(explain("default/oversized", "--state", EXAMPLES, "-o", "json")[1])
    with cli_server("--state", EXAMPLES) as url:
        code, text, _ = explain("default/oversized", "--server", url, "-o", "json")
        assert code == 1 and json.loads(text) == offline
        code, _, err = explain("default/nope", "--server", url)
        assert code == 2 and "HTTP 404: pod default/nope not found" in err


def test_an_unreachable_extender_is_a_clean_error() -> None:
    code, _, err = explain("default/oversized", "--server", "http://127.0.0.1:9")
    assert code == 2
    assert err == (
        "error: http://127.0.0.1:9: no dra-extender answers there (is it running? --server names its "
        "verbs listener, by default http://127.0.0.1:8888)\n"
    )


def test_the_pod_may_follow_the_state_flag() -> None:
    """``explain --state DIR POD``, as the usage line orders them: --state would take the pod too."""
    assert explain("--state", EXAMPLES, "default/trainer")[0] == 0
    for forgotten in ([EXAMPLES], [EXAMPLES, f"{EXAMPLES}/cluster.yaml"]):  # the last path is no pod
        with pytest.raises(SystemExit) as caught:
            explain("--state", *forgotten)
        assert caught.value.code == 2


def test_a_bound_pod_is_explained_by_where_it_runs_and_its_devices() -> None:
    """As simulate says it (not per-node "not available" reasons for the nodes it is not on)."""
    code, text, _ = explain("default/batch-job", "--state", EXAMPLES)
    assert code == 0
    assert text.splitlines() == [
        "pod default/batch-job is bound to gpu-node-1",
        "  batch-job-gpus: gpu.example.com/gpu-node-1/gpu-0, gpu.example.com/gpu-node-1/gpu-1",
    ]
    code, text, _ = explain("default/batch-job", "--state", EXAMPLES, "-o", "json")
    assert json.loads(text)["boundTo"] == "gpu-node-1" and json.loads(text)["nodes"] == {}
