"""manifests/monitoring/: the alerts pass promtool's checks and unit tests (each fires, and stays
quiet where it should), the dashboard's queries are PromQL, both read only metrics a live scrape
shows, every alert links a runbook section, and docs/monitoring.md lists every alert and, as its
metrics table, the scrape's list.
kube-scheduler's metric names are checked against the real binary in
tests/realcluster/test_monitoring_scrape.py."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.monitoring_files import (
    ALERT_TESTS,
    MONITORING,
    RUNBOOK,
    alerts,
    dashboard,
    dashboard_queries,
    rule_groups,
    scraped_sample_names,
    used_metric_names,
)
from tests.deploy.test_rendered import one, rendered
from tests.docs_pages import doc_section, headings, page_text, slug
from tests.service.harness import Running, run_with_service

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian package prometheus; .ci/run installs it)"
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120)


def write_rules(path: Path, groups: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


@needs_promtool
def test_the_rules_pass_promtool_check(tmp_path: Path) -> None:
    result = promtool("check", "rules", str(write_rules(tmp_path / "rules.yaml", rule_groups())))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {sum(len(g['rules']) for g in rule_groups())} rules found" in result.stdout


def unit_tests(
    directory: Path, changed: dict[str, tuple[str, str]] | None = None
) -> subprocess.CompletedProcess[str]:
    """``promtool test rules`` on the alert cases, against the rules without their annotations
    (templates, checked on their own below) and with ``changed``: alert -> (old, new) in its expr."""
    groups = rule_groups()
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
            if rule.get("alert") in (changed or {}):
                old, new = (changed or {})[rule["alert"]]
                rule["expr"] = rule["expr"].replace(old, new)
    write_rules(directory / "rules.yaml", groups)
    shutil.copy(ALERT_TESTS, directory / ALERT_TESTS.name)
    return promtool("test", "rules", str(directory / ALERT_TESTS.name))


@needs_promtool
def test_promtool_unit_tests_of_every_alert_pass(tmp_path: Path) -> None:
    result = unit_tests(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_a_broken_alert_fails_its_unit_test(tmp_path: Path) -> None:
    """The unit tests can fail: with one threshold changed, promtool says which alert differs."""
    result = unit_tests(tmp_path, {"DRAExtenderClaimsHeldForUnboundPods": ("> 900", "> 90000")})
    assert result.returncode != 0
    assert "DRAExtenderClaimsHeldForUnboundPods" in result.stdout + result.stderr


def test_every_alert_has_a_firing_case_and_a_quiet_one() -> None:
    """A case where the alert fires, and one where it must not: an evaluation expecting no
    alert, or series in namespace "good" beside the firing ones."""
    cases = yaml.safe_load(ALERT_TESTS.read_text())["tests"]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in cases:
        good_series = any('namespace="good"' in s["series"] for s in case["input_series"])
        for check in case["alert_rule_test"]:
            if check["exp_alerts"]:
                fires.add(check["alertname"])
                if good_series and all(
                    a["exp_labels"].get("namespace") != "good" for a in check["exp_alerts"]
                ):
                    quiet.add(check["alertname"])
            else:
                quiet.add(check["alertname"])
    assert fires == set(alerts()), set(alerts()) ^ fires
    assert quiet >= set(alerts()), set(alerts()) - quiet


def test_every_alert_links_its_runbook_section_and_every_section_is_an_alert() -> None:
    sections = {slug(title) for _, level, title in headings(RUNBOOK.read_text()) if level == 2}
    for name, rule in alerts().items():
        annotations = rule["annotations"]
        assert annotations.get("summary") and annotations.get("description"), name
        url = annotations["runbook_url"]
        assert url.endswith(f"manifests/monitoring/runbook.md#{name.lower()}"), (name, url)
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), name
    assert sections == {name.lower() for name in alerts()}


def test_every_alert_is_in_the_monitoring_page() -> None:
    listed = set(re.findall(r"^\| `(DRA\w+)`", page_text("docs/monitoring.md"), re.M))
    assert listed == set(alerts())


@needs_promtool
def test_the_dashboard_queries_are_promql(tmp_path: Path) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 20
    rules = [{"record": f"dashboard:query_{i}", "expr": q} for i, q in enumerate(queries)]
    result = promtool(
        "check", "rules", str(write_rules(tmp_path / "q.yaml", [{"name": "q", "rules": rules}]))
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dashboard_reads_the_chosen_datasource_namespace_and_pods() -> None:
    board = dashboard()
    assert board["uid"] == "dra-extender"
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "namespace", "pod"} <= variables
    panels = [p for p in board["panels"] if p.get("type") != "row"]
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel.get("description"), panel["title"]
        for target in panel["targets"]:
            assert 'namespace="$namespace"' in target["expr"] and 'pod=~"$pod"' in target["expr"], panel[
                "title"
            ]


def live_extender_scrape() -> str:
    """/metrics of the service on the examples, once the device gauges were computed (on the
    engine's loop, after a first scrape asked for them)."""

    async def body(r: Running) -> str:
        r.service.worker.attach(asyncio.get_running_loop())  # as the app's lifespan does
        text = ""
        for _ in range(200):
            text = (await r.client.get("/metrics")).text
            if "dra_extender_capacity_computed_timestamp_seconds" in text:
                break
            await asyncio.sleep(0.01)
        return text

    return run_with_service(body)


def test_every_extender_metric_the_rules_and_dashboard_use_is_in_a_live_scrape() -> None:
    scraped = scraped_sample_names(live_extender_scrape())
    ours = {name for name in used_metric_names() if not name.startswith("scheduler_")}
    assert ours, "no metric names found"
    assert ours - scraped == set()


def test_the_documented_metrics_table_is_what_a_scrape_shows() -> None:
    text = live_extender_scrape()
    scraped = {name for name in scraped_sample_names(text) if name.startswith("dra_extender_")}
    rows = re.findall(
        r"^\| `(dra_extender_\w+)` \| (\w+) \|", doc_section("docs/monitoring.md", "Metrics"), re.M
    )
    documented = {
        name + suffix
        for name, kind in rows
        for suffix in ({"histogram": ("_bucket", "_count", "_sum")}.get(kind) or ("",))
    }
    assert {name for name, kind in rows if kind == "counter"} == {
        n for n in documented if n.endswith("_total")
    }
    assert documented - scraped == set()
    assert scraped - documented == set()


def test_the_monitoring_objects_select_services_and_ports_that_exist() -> None:
    monitors = [d for d in yaml.safe_load_all((MONITORING / "servicemonitor.yaml").read_text()) if d]
    services = [one("Service"), one("Service", directory="manifests/standalone")]
    names = {s["metadata"]["name"] for s in services}
    assert names == {"dra-extender-scheduler", "dra-extender"}  # two deployments, two names
    for monitor in monitors:
        selected = [s for s in services if selects(monitor["spec"]["selector"], s["metadata"]["labels"])]
        assert selected, monitor["metadata"]["name"]
        ports = {p["port"] for p in monitor["spec"]["endpoints"]}
        for service in selected:
            assert ports <= {p["name"] for p in service["spec"]["ports"]}, (
                monitor["metadata"]["name"],
                service,
            )
    # The sidecar pods let both metrics ports in, and kube-scheduler's port is named.
    policy = one("NetworkPolicy")
    allowed = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert allowed == {8889, 10259}
    pod = one("Deployment")["spec"]["template"]["spec"]
    scheduler = next(c for c in pod["containers"] if c["name"] == "kube-scheduler")
    assert {"name": "scheduler", "containerPort": 10259} in scheduler["ports"]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In"
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def test_kustomize_renders_the_monitoring_directory() -> None:
    kinds = {(d["kind"], d["metadata"]["name"]) for d in rendered("manifests/monitoring")}
    assert kinds == {
        ("ServiceMonitor", "dra-extender"),
        ("ServiceMonitor", "dra-extender-kube-scheduler"),
        ("PrometheusRule", "dra-extender"),
        ("ConfigMap", "dra-extender-dashboard"),
    }
    board = one("ConfigMap", "dra-extender-dashboard", "manifests/monitoring")
    assert board["metadata"]["labels"] == {"grafana_dashboard": "1"}
    assert board["data"]["dra-extender.json"] == (MONITORING / "dashboard.json").read_text()
