"""extender/service/logs.py: UTC times, structured fields, one JSON object per line."""

from __future__ import annotations

import datetime as dt
import json
import logging
import queue
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from extender.scheduling.assembly import assemble
from extender.scheduling.engine import LOGGED_REASONS
from extender.service.logs import (
    JsonFormatter,
    TextFormatter,
    _QueuedLines,
    decision_log,
    utc_time,
)
from tests.integration.servers import server_process
from tests.service.fixtures import args_names, binding, scheduler_pod


def record(msg: str = "hello %s", args: tuple[Any, ...] = ("there",), **fields: Any) -> logging.LogRecord:
    rec = logging.LogRecord("dra_extender.test", logging.INFO, __file__, 1, msg, args, None)
    rec.created = 1795996544.1239  # 2026-11-29T23:55:44.123Z
    if fields:
        rec.fields = fields
    return rec


def test_utc_time_is_iso_8601_with_milliseconds_and_z() -> None:
    assert utc_time(1795996544.1239) == "2026-11-29T23:55:44.123Z"
    assert utc_time(0.0) == "1970-01-01T00:00:00.000Z"
    # The second's part is kept for the next lines: each second is still its own.
    assert [utc_time(t) for t in (1795996544.5, 1795996545.0, 1795996544.9)] == [
        "2026-11-29T23:55:44.500Z",
        "2026-11-29T23:55:45.000Z",
        "2026-11-29T23:55:44.900Z",
    ]


JSON_CASES = {
    "no fields": (record(), {"msg": "hello there"}),
    "fields at the top level": (
        record(pod="default/p", node="n-1", reasons={"n-2": "no GPU"}, moreReasons=3),
        {
            "msg": "hello there",
            "pod": "default/p",
            "node": "n-1",
            "reasons": {"n-2": "no GPU"},
            "moreReasons": 3,
        },
    ),
    "a field named like a base key is renamed": (
        record(msg="x", args=(), level="mine", time=1),
        {"msg": "x", "field.level": "mine", "field.time": 1},
    ),
    "non-ascii kept": (record(msg="Gerät %s", args=("ü",)), {"msg": "Gerät ü"}),
}


@pytest.mark.parametrize(("rec", "expected"), JSON_CASES.values(), ids=JSON_CASES.keys())
def test_json_line_is_one_object_with_fields(rec: logging.LogRecord, expected: dict[str, Any]) -> None:
    line = JsonFormatter().format(rec)
    assert "\n" not in line
    assert json.loads(line) == {
        "time": "2026-11-29T23:55:44.123Z",
        "level": "INFO",
        "logger": "dra_extender.test",
        **expected,
    }


TEXT_CASES = {
    "no fields": (record(), "hello there"),
    "plain and quoted values": (
        record(pod="default/p", error="needs 2 devices", ok=True, n=3, gone=None),
        'hello there pod=default/p error="needs 2 devices" ok=true n=3 gone=null',
    ),
    "mappings as json": (record(reasons={"n-1": "a b"}), 'hello there reasons={"n-1":"a b"}'),
    "newlines quoted": (record(error="line one\nline two"), 'hello there error="line one\\nline two"'),
    "each character that needs quotes, and the empty value": (
        record(a="x=y", b='say "hi"', c="a\tb", d="back\\slash", e="", f="plain-value/ok"),
        'hello there a="x=y" b="say \\"hi\\"" c="a\\tb" d="back\\\\slash" e="" f=plain-value/ok',
    ),
}


@pytest.mark.parametrize(("rec", "expected_tail"), TEXT_CASES.values(), ids=TEXT_CASES.keys())
def test_text_line_is_utc_level_logger_message_then_key_values(
    rec: logging.LogRecord, expected_tail: str
) -> None:
    assert TextFormatter().format(rec) == f"2026-11-29T23:55:44.123Z INFO dra_extender.test: {expected_tail}"


def test_an_exception_stays_on_the_line_in_both_formats() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        rec = record()
        rec.exc_info = sys.exc_info()
    entry = json.loads(JsonFormatter().format(rec))
    assert "ValueError: boom" in entry["exception"]
    text = TextFormatter().format(rec)
    assert "\n" not in text and "ValueError: boom" in text


SINK_CASES = {
    "bind at info": ({"verb": "bind", "pod": "default/p", "node": "n"}, logging.INFO, logging.INFO),
    "failed bind at warning": (
        {"verb": "bind", "pod": "default/p", "error": "no"},
        logging.INFO,
        logging.WARNING,
    ),
    "filter hidden at info": ({"verb": "filter", "pod": "default/p"}, logging.INFO, None),
    "prioritize hidden at info": ({"verb": "prioritize", "pod": "default/p"}, logging.INFO, None),
    "filter shown at debug": (
        {"verb": "filter", "pod": "default/p", "passed": 2},
        logging.DEBUG,
        logging.DEBUG,
    ),
}


@pytest.mark.parametrize(("entry", "level", "logged_at"), SINK_CASES.values(), ids=SINK_CASES.keys())
def test_decision_lines_by_verb_outcome_and_level(
    entry: dict[str, Any], level: int, logged_at: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(level, logger="dra_extender.decisions")
    decision_log()({"time": 1.0, **entry, "durationMs": 1.5})
    records = [r for r in caplog.records if r.name == "dra_extender.decisions"]
    if logged_at is None:
        assert records == []
        return
    (rec,) = records
    assert rec.levelno == logged_at
    assert rec.getMessage() == f"{entry['verb']} default/p"
    assert rec.fields == {**entry, "durationMs": 1.5}  # type: ignore[attr-defined]  # time is the line's own


#: What run_serve does with its logs, in a process of its own: logging's state is the process's,
#: and another test's in the same worker (a server's logging set-up) must not decide this one.
ONE_LINE = """
import logging, sys
from extender.service.logs import configure_logging
writer = configure_logging("info", sys.argv[1])
logging.getLogger("dra_extender.test").info("hello %s", "there", extra={"fields": {"k": "v"}})
writer.stop()  # at exit: every queued line is written
"""


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_each_log_line_is_formatted_once_and_written_by_exit(log_format: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", ONE_LINE, log_format], capture_output=True, text=True, timeout=60, check=False
    )
    lines = [line for line in done.stderr.splitlines() if "hello" in line]
    assert done.returncode == 0 and len(lines) == 1, done.stderr[-2000:]
    if log_format == "json":
        entry = json.loads(lines[0])
        assert (entry["msg"], entry["logger"], entry["level"], entry["k"]) == (
            "hello there",
            "dra_extender.test",
            "INFO",
            "v",
        )
    else:
        assert lines[0].endswith("INFO dra_extender.test: hello there k=v") and lines[0].count("INFO") == 1


def test_a_record_is_queued_as_its_formatted_line_without_a_copy() -> None:
    lines: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    handler = _QueuedLines(lines)
    handler.setFormatter(TextFormatter())
    rec = record(pod="default/p")
    handler.emit(rec)
    queued = lines.get_nowait()
    assert queued is rec and queued.args is None
    assert queued.getMessage() == "2026-11-29T23:55:44.123Z INFO dra_extender.test: hello there pod=default/p"


def utc(text: str) -> dt.datetime:
    assert text.endswith("Z"), text
    return dt.datetime.fromisoformat(text[:-1] + "+00:00")


def test_served_json_log_is_one_object_per_line_with_decisions_as_fields() -> None:
    """End to end: `serve --log-format json --log-level debug`, a filter, a failed bind and a
    malformed bind; every line the process writes is one JSON object."""
    command = [
        sys.executable, "-m", "extender.cli", "serve", "--port", "0", "--ops-port", "0",
        "--state", "examples/", "--log-format", "json", "--log-level", "debug",
    ]  # fmt: skip
    pod = scheduler_pod("trainer", "uid-pod-trainer", [{"name": "gpus", "resourceClaimName": "trainer-gpus"}])
    nodes = ["gpu-node-1", "gpu-node-2", "gpu-node-3", "cpu-node-1"]
    with server_process(command) as (url, proc), httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/scheduler/filter", content=args_names(pod, nodes)).status_code == 200
        failed = http.post("/scheduler/bind", content=binding("nobody", "uid-nobody", "gpu-node-1"))
        assert failed.json()["Error"]
        # No proxy stands in front of the extender: a forwarding header names nobody, even
        # from loopback (uvicorn trusts it from 127.0.0.1 unless told not to).
        forged = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"}
        assert http.post("/scheduler/bind", content=b'{"PodName": 3}', headers=forged).status_code == 400
        lines: list[str] = proc.output_lines  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any("bad bind request" in line for line in lines):
            time.sleep(0.05)
        output = list(lines)
    entries = [json.loads(line) for line in output]  # every line, not only ours
    assert all(isinstance(e, dict) and {"time", "level", "logger", "msg"} <= e.keys() for e in entries)
    now = dt.datetime.now(dt.UTC)
    assert all(abs((now - utc(e["time"])).total_seconds()) < 120 for e in entries)
    by_verb = {e.get("verb"): e for e in entries if e["logger"] == "dra_extender.decisions"}
    filtered = by_verb["filter"]
    assert filtered["level"] == "DEBUG" and filtered["pod"] == "default/trainer"
    assert filtered["reasons"] and set(filtered["reasons"]) <= set(nodes)
    assert all(isinstance(reason, str) and reason for reason in filtered["reasons"].values())
    bind = by_verb["bind"]
    assert bind["level"] == "WARNING" and bind["pod"] == "default/nobody" and bind["node"] == "gpu-node-1"
    assert bind["error"] == failed.json()["Error"]
    (bad,) = [e for e in entries if e["msg"] == "bad bind request"]
    assert bad["level"] == "WARNING" and bad["status"] == 400 and "PodName" in bad["error"]
    assert bad["peer"] == "127.0.0.1"


def test_a_filter_keeps_at_most_the_logged_reasons_and_counts_the_rest() -> None:
    from extender.cel import CelEnvironment
    from extender.cluster.memory_api import MemoryAPI
    from extender.cluster.memstore import MemoryStore
    from extender.cluster.state import ClusterState
    from tests.builders import claim, device_class, node, pod

    names = [f"n-{i}" for i in range(LOGGED_REASONS + 5)]
    state = ClusterState.from_objects(
        [device_class(), claim("c"), pod("p", ["c"]), *(node(n) for n in names)]
    )
    engine = assemble(state, MemoryAPI(MemoryStore()), CelEnvironment())
    engine.filter(state.pods[("default", "p")], names)
    entry = engine.log.entries[-1]
    assert len(entry["reasons"]) == LOGGED_REASONS and entry["moreReasons"] == 5
    assert set(entry["reasons"]) <= set(names)
