"""The capacity page in a real browser: Debian's Chromium, driven by Playwright, against
``dra-extender serve --ops-debug`` on the ops listener (where the API server's service proxy
reaches it). The page renders, loads nothing from elsewhere and runs no script, its figures are
the debug API's, its class form works, and the suite keeps a screenshot
(``.ci/artifacts/capacity-page.png``).

.ci/run installs Chromium (Debian's ``chromium``); without it this test is skipped, saying so.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.servers import cli_server_and_ops
from tests.service.fixtures import args_names, binding, scheduler_pod
from tests.shared import REPO

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT = REPO / ".ci" / "artifacts" / "capacity-page.png"
#: As root, with no network beyond loopback: no sandbox, no GPU, none of Chromium's own calls home.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it)")

#: Read in the browser: each table's rows as {row attributes, cells' data-* attributes and text}.
READ_TABLE = """
(table) => Array.from(document.querySelectorAll(`#${table} tr`)).map((tr) => ({
  row: Object.fromEntries(Array.from(tr.attributes).map((a) => [a.name, a.value])),
  cells: Array.from(tr.querySelectorAll("td")).map((td) => Object.fromEntries([
    ...Array.from(td.attributes).filter((a) => a.name.startsWith("data-")).map((a) => [a.name, a.value]),
    ["text", td.innerText.trim()],
  ])),
}))
"""


def by_class(rows: list[dict[str, Any]], attribute: str) -> dict[str, dict[str, int]]:
    return {
        row["row"]["data-class"]: {c[attribute]: int(c["text"]) for c in row["cells"] if attribute in c}
        for row in rows
        if "data-class" in row["row"]
    }


def test_the_capacity_page_renders_in_chromium_with_the_debug_apis_figures(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None
    with cli_server_and_ops("--state", str(REPO / "examples"), "--ops-debug") as (url, ops):
        bound = httpx.post(
            f"{url}/scheduler/bind", content=binding("trainer", "uid-pod-trainer", "gpu-node-3")
        )
        assert bound.json() == {"Error": ""}
        oversized = scheduler_pod(
            "oversized", "uid-pod-oversized", [{"name": "gpus", "resourceClaimName": "too-big"}]
        )
        filtered = httpx.post(
            f"{url}/scheduler/filter", content=args_names(oversized, ["gpu-node-1", "gpu-node-2"])
        )
        assert filtered.json()["FailedAndUnresolvableNodes"], filtered.json()
        with sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                requested: list[str] = []
                problems: list[str] = []
                page.on("request", lambda request: requested.append(request.url))
                page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda error: problems.append(str(error)))
                response = page.goto(f"{ops}/debug/ui")
                assert response is not None and response.status == 200
                assert page.title() == "dra-extender: device capacity"
                for table in ("class-table", "fit-table", "node-table", "pending-table", "decision-table"):
                    assert page.locator(f"#{table}").is_visible(), table
                # The bars are drawn: a class's stacked bar has the width its figures give it.
                bar = page.locator("#class-table svg").first.bounding_box()
                assert bar is not None and bar["width"] > 100 and bar["height"] > 5
                figures = httpx.get(f"{ops}/debug/capacity").json()
                classes = page.evaluate(READ_TABLE, "class-table")
                assert by_class(classes, "data-state") == figures["devicesByClass"]
                assert by_class(page.evaluate(READ_TABLE, "fit-table"), "data-fit") == figures["podsThatFit"]
                nodes = [r["row"]["data-node"] for r in page.evaluate(READ_TABLE, "node-table") if r["row"]]
                assert nodes == sorted(httpx.get(f"{ops}/debug/inventory").json()["nodes"])  # every node
                pending = [r["row"].get("data-pod") for r in page.evaluate(READ_TABLE, "pending-table")]
                assert "default/rdma-worker" in pending and "default/trainer" not in pending
                why = page.locator('#pending-table tr[data-pod="default/oversized"]').inner_text()
                assert "gpu-node-1: " in why and "needs 9 devices" in why  # the last filter's reasons
                SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(SCREENSHOT), full_page=True)
                # The class form narrows the page to one class, through the browser's own GET.
                page.select_option("select[name=class]", "gpu.example.com")
                page.click("button[type=submit]")
                page.wait_for_url("**/debug/ui?class=gpu.example.com")
                header = page.locator("#node-table tr").first.inner_text()
                assert "gpu.example.com" in header and "nic.example.com" not in header
                assert all(u.startswith(ops) for u in requested), requested  # nothing from elsewhere
                assert problems == []  # no script ran, none was blocked, nothing failed to load
            finally:
                browser.close()
    assert SCREENSHOT.stat().st_size > 10_000
