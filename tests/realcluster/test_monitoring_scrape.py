"""The shipped alerts and dashboard against the real binaries: every kube-scheduler metric they
read is in the real kube-scheduler's /metrics once it has scheduled a pod, every extender metric
in the extender's (cluster mode: informers and API requests included), and the API request
metrics count the bind path's real writes with the codes kube-apiserver answered."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.monitoring_files import scraped_sample_names, used_metric_names
from tests.realcluster.components import extender, scheduler, scheduler_config
from tests.realcluster.controlplane import ControlPlane
from tests.realcluster.workload import gpu_class, gpu_slice, one_gpu_claim, pod_with_claims, wait_bound


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_the_rules_and_dashboard_read_metrics_the_real_components_expose(cluster: ControlPlane) -> None:
    api = cluster.api
    audit_from = len(cluster.audit_events())
    cluster.add_node("node-a")
    api.create(gpu_class())
    api.create(gpu_slice("node-a", gpus=2))
    with (
        extender(cluster) as ext,
        scheduler(cluster, scheduler_config(cluster.extender_kubeconfig(), extender_url=ext.url)) as sched,
    ):
        api.create(one_gpu_claim("worker"))
        api.create(pod_with_claims("worker", ["worker"]))
        assert wait_bound(api, 1) == {"worker": "node-a"}
        scheduler_text = sched.metrics()

        # The device gauges are computed on the engine's loop once a scrape asks for them.
        def computed() -> str | None:
            text = ext.metrics()
            return text if "dra_extender_capacity_computed" in text else None

        extender_text = api.wait_for(computed, timeout=30, what="the device gauges")
    used = used_metric_names()
    from_scheduler = {name for name in used if name.startswith("scheduler_")}
    assert from_scheduler, "the rules and the dashboard read kube-scheduler's metrics"
    assert from_scheduler - scraped_sample_names(scheduler_text) == set()
    assert (used - from_scheduler) - scraped_sample_names(extender_text) == set()
    # The bind's writes, as kube-apiserver answered them.
    requests = samples(extender_text, "dra_extender_api_requests_total")
    by_call = {(dict(k)["verb"], dict(k)["resource"], dict(k)["code"]): v for k, v in requests.items()}
    assert by_call[("update", "resourceclaims/status", "200")] >= 1
    assert by_call[("create", "pods/binding", "201")] == 1
    assert by_call[("watch", "resourceclaims", "200")] >= 1
    assert by_call[("list", "nodes", "200")] >= 1
    ready = samples(extender_text, "dra_extender_ready")
    assert list(ready.values()) == [1.0]
    synced = samples(extender_text, "dra_extender_informer_synced")
    assert synced and set(synced.values()) == {1.0}
    assert cluster.refused_writes(audit_from) == []


def test_kube_scheduler_metrics_need_a_token_allowed_to_get_them(cluster: ControlPlane) -> None:
    """What the kube-scheduler ServiceMonitor relies on: on its secure port /metrics answers a
    bearer token whose ServiceAccount may GET the /metrics non-resource URL (checked by
    kube-scheduler's delegated authentication and authorization through the API server), and
    refuses anonymous callers and tokens without that permission."""
    api = cluster.api
    for account in ("prometheus", "nobody"):
        api.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": "default"},
            }
        )
    api.create(
        {
            "kind": "ClusterRole",
            "metadata": {"name": "test-metrics-reader"},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
    )
    api.create(
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "test-metrics-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "test-metrics-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "default"}],
        }
    )
    config = scheduler_config(cluster.extender_kubeconfig(), extender_url=None)
    try:
        with scheduler(cluster, config, open_metrics=False) as sched:
            assert sched.get_metrics().status_code in (401, 403)
            assert sched.get_metrics(cluster.token("default", "nobody")).status_code == 403
            allowed = sched.get_metrics(cluster.token("default", "prometheus"))
            # (A metric every process has: this scheduler need not lead, an earlier one's lease
            # may not have expired yet.)
            assert allowed.status_code == 200 and "process_start_time_seconds" in allowed.text
    finally:
        api.delete("ClusterRoleBinding", "test-metrics-reader")
        api.delete("ClusterRole", "test-metrics-reader")
        for account in ("prometheus", "nobody"):
            api.delete("ServiceAccount", account, "default")
