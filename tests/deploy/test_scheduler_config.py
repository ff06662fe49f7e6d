"""The KubeSchedulerConfiguration files: a strict schema of our own, and the rules DRA needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.shared import REPO

_TLS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        k: {"type": "string"}
        for k in ("serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData")
    }
    | {"insecure": {"type": "boolean"}},
}
_EXTENDER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["urlPrefix"],
    "properties": {
        "urlPrefix": {"type": "string"},
        "filterVerb": {"type": "string"},
        "prioritizeVerb": {"type": "string"},
        "preemptVerb": {"type": "string"},
        "bindVerb": {"type": "string"},
        "weight": {"type": "integer"},
        "enableHTTPS": {"type": "boolean"},
        "tlsConfig": _TLS,
        "httpTimeout": {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(ms|s|m)$"},
        "nodeCacheCapable": {"type": "boolean"},
        "managedResources": {"type": "array"},
        "ignorable": {"type": "boolean"},
    },
}
_PLUGIN_SET = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "enabled": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "weight": {"type": "integer"}},
            },
        },
        "disabled": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
            },
        },
    },
}
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["apiVersion", "kind", "profiles", "extenders"],
    "properties": {
        "apiVersion": {"const": "kubescheduler.config.k8s.io/v1"},
        "kind": {"const": "KubeSchedulerConfiguration"},
        "parallelism": {"type": "integer"},
        "percentageOfNodesToScore": {"type": "integer", "minimum": 0, "maximum": 100},
        "podInitialBackoffSeconds": {"type": "integer"},
        "podMaxBackoffSeconds": {"type": "integer"},
        "clientConnection": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "kubeconfig": {"type": "string"},
                "qps": {"type": "number"},
                "burst": {"type": "integer"},
                "contentType": {"type": "string"},
                "acceptContentTypes": {"type": "string"},
            },
        },
        "leaderElection": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "leaderElect": {"type": "boolean"},
                "resourceNamespace": {"type": "string"},
                "resourceName": {"type": "string"},
                "resourceLock": {"type": "string"},
                "leaseDuration": {"type": "string"},
                "renewDeadline": {"type": "string"},
                "retryPeriod": {"type": "string"},
            },
        },
        "profiles": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["schedulerName"],
                "properties": {
                    "schedulerName": {"type": "string"},
                    "percentageOfNodesToScore": {"type": "integer"},
                    "plugins": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            k: _PLUGIN_SET
                            for k in (
                                "multiPoint",
                                "preEnqueue",
                                "queueSort",
                                "preFilter",
                                "filter",
                                "postFilter",
                                "preScore",
                                "score",
                                "reserve",
                                "permit",
                                "preBind",
                                "bind",
                                "postBind",
                            )
                        },
                    },
                    "pluginConfig": {"type": "array"},
                },
            },
        },
        "extenders": {"type": "array", "minItems": 1, "items": _EXTENDER},
    },
}

#: The KubeSchedulerConfigurations (kustomization.yaml makes the sidecar's ConfigMap of one).
FILES = sorted(p for p in (REPO / "scheduler-config").glob("*.yaml") if p.name != "kustomization.yaml")


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_schema(path: Path) -> None:
    jsonschema.validate(load(path), SCHEMA)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_rules_for_dra(path: Path) -> None:
    config = load(path)
    assert config["percentageOfNodesToScore"] == 100
    for profile in config["profiles"]:
        disabled = [p["name"] for p in profile["plugins"]["multiPoint"]["disabled"]]
        assert "DynamicResources" in disabled, profile["schedulerName"]
    (extender,) = config["extenders"]
    verbs = ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb")
    assert tuple(extender[v] for v in verbs) == ("filter", "prioritize", "bind", "preempt")
    assert extender["nodeCacheCapable"] is True and extender["ignorable"] is False
    assert extender["weight"] > 0 and extender["httpTimeout"]
    assert "managedResources" not in extender
    if extender.get("enableHTTPS"):
        tls = extender["tlsConfig"]
        assert tls.get("caFile") or tls.get("caData"), "enableHTTPS without a CA means no verification"
        assert extender["urlPrefix"].startswith("https://")


def test_unknown_fields_fail_the_schema() -> None:
    config = load(REPO / "scheduler-config" / "second-scheduler.yaml")
    config["extenders"][0]["nodeCacheCapabel"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, SCHEMA)


def test_the_rendered_configmap_carries_the_second_scheduler_file_verbatim_and_the_pods_mount_it() -> None:
    """One source: kustomize generates the ConfigMap from scheduler-config/second-scheduler.yaml
    (a hash of the content in its name, which the Deployment's volume follows)."""
    from tests.deploy.test_rendered import one

    configmap = one("ConfigMap")
    assert configmap["data"] == {
        "config.yaml": (REPO / "scheduler-config" / "second-scheduler.yaml").read_text()
    }
    assert configmap["metadata"]["namespace"] == "dra-extender"
    volumes = one("Deployment")["spec"]["template"]["spec"]["volumes"]
    assert [v["configMap"]["name"] for v in volumes] == [configmap["metadata"]["name"]]
    assert configmap["metadata"]["name"].startswith("dra-extender-scheduler-config-")


def test_filter_budget_stays_below_the_http_timeout() -> None:
    deployment = yaml.safe_load((REPO / "manifests" / "deployment.yaml").read_text())
    extender = next(
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "dra-extender"
    )
    budget = float(next(a for a in extender["args"] if a.startswith("--filter-budget=")).split("=")[1])
    timeout = load(REPO / "scheduler-config" / "second-scheduler.yaml")["extenders"][0]["httpTimeout"]
    assert budget < float(timeout.rstrip("s"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_back_pressure_knows_the_shipped_http_timeout(path: Path) -> None:
    """The extender holds filters so that no bind outlasts kube-scheduler's httpTimeout
    (--scheduler-http-timeout): its default is the timeout the configurations ship."""
    from extender.defaults import DEFAULT_SCHEDULER_HTTP_TIMEOUT

    timeout = load(path)["extenders"][0]["httpTimeout"]
    assert timeout.endswith("s") and not timeout.endswith("ms"), timeout
    assert float(timeout[:-1]) == DEFAULT_SCHEDULER_HTTP_TIMEOUT
