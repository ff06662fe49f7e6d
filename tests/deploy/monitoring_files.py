"""The shipped monitoring files read for tests: the alerts, the dashboard's queries, and the
metric names both use (checked against live scrapes here and in tests/realcluster)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.shared import REPO

MONITORING = REPO / "manifests" / "monitoring"
RULES = MONITORING / "prometheusrule.yaml"
DASHBOARD = MONITORING / "dashboard.json"
RUNBOOK = MONITORING / "runbook.md"
ALERT_TESTS = REPO / "tests" / "deploy" / "monitoring" / "alerts_test.yaml"
#: Grafana's variables as a query gets them when the dashboard runs.
DASHBOARD_VARIABLES = {"$__rate_interval": "5m", "$namespace": "dra-extender", "$pod": ".*"}
_METRIC = re.compile(r"\b(?:dra_extender|scheduler|process|python)_[a-z0-9_]+\b")


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(RULES.read_text())["spec"]["groups"]
    return groups


def alerts() -> dict[str, dict[str, Any]]:
    return {rule["alert"]: rule for group in rule_groups() for rule in group["rules"] if "alert" in rule}


def _exprs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "expr" and isinstance(value, str):
                yield value
            else:
                yield from _exprs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _exprs(item)


def dashboard() -> dict[str, Any]:
    board: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return board


def dashboard_queries() -> list[str]:
    """Every panel query, with Grafana's variables replaced."""
    out = []
    for expr in _exprs(dashboard()["panels"]):
        for variable, value in DASHBOARD_VARIABLES.items():
            expr = expr.replace(variable, value)
        out.append(expr)
    return out


def template_queries() -> list[str]:
    return [str(v["query"]) for v in dashboard()["templating"]["list"] if v.get("type") == "query"]


def used_metric_names() -> set[str]:
    """Sample names the alerts and the dashboard (panels and variables) read."""
    texts = [rule["expr"] for group in rule_groups() for rule in group["rules"]]
    texts += dashboard_queries() + template_queries()
    return {name for text in texts for name in _METRIC.findall(text)}


def scraped_sample_names(text: str) -> set[str]:
    """Sample names a /metrics text has, with or without samples yet (a labelled family with no
    child yet still announces its name and type)."""
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_count", "_sum"),
        "summary": ("_count", "_sum", ""),
        "info": ("_info",),
    }
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in suffixes.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names
