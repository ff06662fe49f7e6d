"""Filter's make-room hint line over HTTP, as serve wires it (issue 51): the real app on
127.0.0.1 over the embedded store, the plan made on the service's own planning thread. The
first filter for a pod no node fits answers as before; a later one (once the background plan
is in) carries the line in the plan's node's reason, with the same nodes failing the same way."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from extender.service.app import create_app
from extender.service.runtime import ServeConfig, build_embedded
from tests.integration.servers import thread_server
from tests.scheduling.test_make_room_hints import LINE, NODES, objects
from tests.service.fixtures import args_names, scheduler_pod


def test_a_second_filter_shows_the_line_once_the_background_plan_is_in(tmp_path: Path) -> None:
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump_all(objects()))
    service, _store = build_embedded([str(path)], ServeConfig())
    trainer = scheduler_pod("trainer", "uid-trainer", [{"name": "wanted", "resourceClaimName": "wanted"}])
    body = args_names(trainer, NODES)
    with thread_server(create_app(service)) as url, httpx.Client(base_url=url, timeout=10) as http:
        first: dict[str, Any] = http.post("/scheduler/filter", content=body).json()
        assert first["NodeNames"] == [] and first["Error"] == ""
        assert sorted(first["FailedAndUnresolvableNodes"]) == NODES and first["FailedNodes"] == {}
        assert not any(LINE in r for r in first["FailedAndUnresolvableNodes"].values())
        deadline = time.monotonic() + 30
        while True:  # the planning thread's time is real time: ask again until it is in
            second: dict[str, Any] = http.post("/scheduler/filter", content=body).json()
            if LINE in second["FailedAndUnresolvableNodes"]["node-1"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        unresolvable = second["FailedAndUnresolvableNodes"]
        assert unresolvable["node-1"] == f"{first['FailedAndUnresolvableNodes']['node-1']}; {LINE}"
        assert {n: unresolvable[n] for n in ("node-2", "node-3")} == {
            n: first["FailedAndUnresolvableNodes"][n] for n in ("node-2", "node-3")
        }
        assert (second["NodeNames"], second["FailedNodes"], second["Error"]) == ([], {}, "")
        assert 'dra_extender_make_room_hints_total{outcome="plan"} 1.0' in http.get("/metrics").text
