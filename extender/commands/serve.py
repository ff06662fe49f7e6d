"""``dra-extender serve``: its flags (what it runs is :mod:`extender.serve_command`, imported
only when it runs: the server stack is heavy)."""

from __future__ import annotations

import argparse
import os

from extender.allocator.releases import DEFAULT_MINOR
from extender.commands.arguments import (
    VERSION_HELP,
    kubernetes_version,
    make_room_flags,
    max_state_bytes,
    non_negative_seconds,
    port_number,
    positive_int,
    positive_rate,
    positive_seconds,
    url_prefix,
)
from extender.defaults import (
    DEFAULT_BINDING_TIMEOUT,
    DEFAULT_BINDING_WAIT,
    DEFAULT_CATCH_UP_WAIT,
    DEFAULT_MAKE_ROOM_AFTER,
    DEFAULT_MAKE_ROOM_COOLDOWN,
    DEFAULT_MAKE_ROOM_RATE,
    DEFAULT_MAKE_ROOM_TIMEOUT,
    DEFAULT_MAX_BINDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUESTS,
    DEFAULT_RELEASE_WAIT,
    DEFAULT_SCHEDULER_HTTP_TIMEOUT,
    DEFAULT_SCHEDULER_NAME,
    SCORE_POLICIES,
    SCORE_TIE_BREAKS,
)


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="run the extender service (filter, prioritize, bind) for kube-scheduler",
        description="Serve kube-scheduler's extender verbs under --prefix, plus /healthz, /readyz, "
        "/metrics and /debug/*. With --state the cluster lives in memory, read from state files "
        "(the embedded default).",
    )
    serve.add_argument(
        "--state", nargs="+", metavar="PATH", help="state files or directories (embedded mode)"
    )
    max_state_bytes(serve)
    serve.add_argument(
        "--kubeconfig", help="run against this cluster (default when running in a pod: the in-cluster config)"
    )
    serve.add_argument(
        "--api-timeout",
        type=positive_seconds,
        help="seconds to wait for one API server request (cluster mode, default 30)",
    )
    serve.add_argument(
        "--cache-stale-after",
        type=positive_seconds,
        help="cluster mode: seconds an informer may be unable to list or watch before the cache "
        "counts as stale: not ready, binds refused (default 30)",
    )
    serve.add_argument(
        "--leader-elect",
        action="store_true",
        help="cluster mode with several replicas: hold a coordination.k8s.io Lease; "
        "only the holder is ready and binds",
    )
    serve.add_argument(
        "--leader-elect-namespace",
        default=os.environ.get("POD_NAMESPACE", "kube-system"),
        help="namespace of the Lease (default $POD_NAMESPACE, else kube-system)",
    )
    serve.add_argument(
        "--leader-elect-name", default="dra-extender", help="name of the Lease (default dra-extender)"
    )
    serve.add_argument(
        "--leader-elect-lease-duration", type=positive_seconds, default=15.0, help="seconds (default 15)"
    )
    serve.add_argument(
        "--leader-elect-renew-deadline", type=positive_seconds, default=10.0, help="seconds (default 10)"
    )
    serve.add_argument(
        "--leader-elect-retry-period", type=positive_seconds, default=2.0, help="seconds (default 2)"
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address of the verbs and debug views (default 127.0.0.1: only the scheduler in the "
        "same pod can reach them; anything else needs --tls-client-ca-file)",
    )
    serve.add_argument(
        "--port", type=port_number, default=8888, help="their port (default 8888; 0: any free port)"
    )
    serve.add_argument(
        "--ops-host",
        help="address of /healthz, /readyz and /metrics for kubelet and Prometheus (default 0.0.0.0 in "
        "cluster mode; 127.0.0.1 in embedded mode, a laptop or a CI job)",
    )
    serve.add_argument(
        "--ops-port", type=port_number, default=8889, help="their port (default 8889; 0: any free port)"
    )
    serve.add_argument(
        "--ops-debug",
        action="store_true",
        help="also serve the read-only debug views, /debug/snapshot and the capacity page "
        "(/debug/ui) on the ops listener, for `kubectl dra` and browsers through the API server's "
        "service proxy: whoever reaches that port reads every pod's claims and devices, so the "
        "NetworkPolicy should admit only the API server and Prometheus (docs/security.md)",
    )
    serve.add_argument(
        "--max-concurrency",
        type=positive_int,
        default=DEFAULT_MAX_REQUESTS,
        help="requests other than binds (filter, prioritize, preempt, debug views) served at once; "
        f"more get 503 (default {DEFAULT_MAX_REQUESTS})",
    )
    serve.add_argument(
        "--max-binds",
        type=positive_int,
        default=DEFAULT_MAX_BINDS,
        help="binds in flight at once, counted apart so that binds never crowd out filter and "
        f"prioritize; more get 503 (default {DEFAULT_MAX_BINDS})",
    )
    serve.add_argument(
        "--scheduler-http-timeout",
        type=non_negative_seconds,
        default=DEFAULT_SCHEDULER_HTTP_TIMEOUT,
        help="kube-scheduler's httpTimeout for this extender (scheduler-config/): while binds queue "
        "because the API server is slow, filter answers are held back (at most a fifth of it each) "
        "so that no bind outlasts it, and pods wait in kube-scheduler's queue instead of failing "
        f"their bind; seconds (default {DEFAULT_SCHEDULER_HTTP_TIMEOUT:g}, as shipped; 0: never hold)",
    )
    serve.add_argument(
        "--max-connections",
        type=positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        help="open connections per listener; while this many are open, requests get 503 "
        f"(default {DEFAULT_MAX_CONNECTIONS})",
    )
    serve.add_argument(
        "--prefix",
        type=url_prefix,
        default="/scheduler",
        help="URL path prefix of the verbs: 'scheduler' and '/scheduler/' mean /scheduler, '/' the "
        "root (default /scheduler)",
    )
    serve.add_argument(
        "--feature-gates", default="", help="comma-separated NAME=true|false (Kubernetes names)"
    )
    serve.add_argument(
        "--score-policy",
        choices=SCORE_POLICIES,
        default="binpack",
        help="prioritize: binpack (fewest free devices left) or spread (default binpack)",
    )
    serve.add_argument(
        "--score-tie-break",
        choices=SCORE_TIE_BREAKS,
        default="none",
        help="prioritize, among the nodes with the best score: fragmentation prefers those where "
        "the pod strands the fewest free devices for pods of 1, 2, 4 or 8 devices (default none)",
    )
    serve.add_argument(
        "--node-timeout",
        type=positive_seconds,
        default=1.0,
        help="allocation budget per node, seconds (default 1)",
    )
    serve.add_argument(
        "--filter-budget",
        type=positive_seconds,
        default=3.0,
        help="allocation budget of one filter call over all nodes, seconds; keep it below the "
        "scheduler's httpTimeout (default 3)",
    )
    serve.add_argument(
        "--binding-timeout",
        type=positive_seconds,
        default=DEFAULT_BINDING_TIMEOUT,
        help="DynamicResourcesArgs.bindingTimeout: how long an allocated claim may wait for its "
        "devices' binding conditions before it is released for other devices, seconds "
        f"(default {DEFAULT_BINDING_TIMEOUT:g})",
    )
    serve.add_argument(
        "--binding-conditions-wait",
        type=positive_seconds,
        default=DEFAULT_BINDING_WAIT,
        help="how long one bind waits for binding conditions before answering 'not yet' (the "
        "claims stay allocated; kube-scheduler's retry waits again); keep it below the "
        f"scheduler's httpTimeout (default {DEFAULT_BINDING_WAIT:g})",
    )
    serve.add_argument(
        "--catch-up-wait",
        type=positive_seconds,
        default=DEFAULT_CATCH_UP_WAIT,
        help="how long filter, preempt and bind wait for the cache to show claims that the pod "
        "kube-scheduler sent names (its watch can be ahead of the extender's), seconds "
        f"(default {DEFAULT_CATCH_UP_WAIT:g})",
    )
    serve.add_argument(
        "--release-wait",
        type=positive_seconds,
        default=DEFAULT_RELEASE_WAIT,
        help="how long a preemptor's bind holds the devices of its victims' claims, waiting for "
        "kube-controller-manager to release them, before it fails; keep it below the scheduler's "
        f"httpTimeout (default {DEFAULT_RELEASE_WAIT:g})",
    )
    serve.add_argument(
        "--hold-after-prioritize",
        type=non_negative_seconds,
        default=0.0,
        help="after prioritize, keep the devices a pod would get on its single best-scored node "
        "for it this many seconds, until its bind or next filter (0, the default: off; "
        "see docs/performance.md)",
    )
    serve.add_argument(
        "--kubernetes-version",
        type=kubernetes_version,
        metavar="VERSION",
        help=f"{VERSION_HELP}; default: the API server's version (cluster mode), "
        f"1.{DEFAULT_MINOR} (embedded)",
    )
    serve.add_argument(
        "--device-preemption",
        action="store_true",
        help="for kube-scheduler 1.38 or newer (which hands the preempt verb nodes only extenders "
        "rejected): report nodes where evicting lower-priority pods would free enough devices as "
        "Unschedulable instead of Unresolvable, and keep the devices a preemption freed for the "
        "nominated pod. Off (the default): every device rejection is Unresolvable, as the in-tree "
        "plugin reports it; older schedulers fail the preemption otherwise",
    )
    make_room = serve.add_argument_group(
        "make room",
        "who the read-only make-room planner (/debug/make-room, kubectl dra make-room, filter's "
        "hint line) may move so that a pending pod's devices fit on one node (docs/make-room.md)",
    )
    make_room_flags(make_room)
    make_room.add_argument(
        "--make-room-hint-interval",
        type=non_negative_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how often a pod that fits no node has its plan computed again, off filter's path, "
        "for the reason line kube-scheduler's FailedScheduling event shows (0: never; default 30)",
    )
    mover = serve.add_argument_group(
        "make room, carried out",
        "the mover (off by default; docs/make-room-mover.md): evicts a plan's pods through the "
        "Eviction API for a pod that waited long enough, keeping the freed devices for it; only "
        "while this replica leads (--leader-elect, or the store fence in the sidecar)",
    )
    mover.add_argument(
        "--make-room",
        action="store_true",
        help="carry out make-room plans (needs --make-room-hint-interval > 0: its plans are "
        "the mover's); the ServiceAccount needs create on pods/eviction "
        "(manifests/components/make-room)",
    )
    mover.add_argument(
        "--make-room-dry-run",
        action="store_true",
        help="with --make-room: log and count the plans it would start; evict and hold nothing",
    )
    mover.add_argument(
        "--make-room-after",
        type=non_negative_seconds,
        default=DEFAULT_MAKE_ROOM_AFTER,
        metavar="SECONDS",
        help="how long a pod has waited for devices (its PodScheduled condition False) before "
        f"pods are moved for it (default {DEFAULT_MAKE_ROOM_AFTER:g})",
    )
    mover.add_argument(
        "--make-room-rate",
        type=positive_rate,
        default=DEFAULT_MAKE_ROOM_RATE,
        metavar="PER_MINUTE",
        help=f"evictions a minute, cluster-wide, at most (default {DEFAULT_MAKE_ROOM_RATE:g})",
    )
    mover.add_argument(
        "--make-room-cooldown",
        type=non_negative_seconds,
        default=DEFAULT_MAKE_ROOM_COOLDOWN,
        metavar="SECONDS",
        help="a workload (a moved pod's controller) is moved at most once in this long, and a pod "
        "whose plan was abandoned is not planned for again meanwhile "
        f"(default {DEFAULT_MAKE_ROOM_COOLDOWN:g})",
    )
    mover.add_argument(
        "--make-room-timeout",
        type=positive_seconds,
        default=DEFAULT_MAKE_ROOM_TIMEOUT,
        metavar="SECONDS",
        help="a plan is abandoned (its hold released) when the moved pods' claims are not "
        f"released this long after it started (default {DEFAULT_MAKE_ROOM_TIMEOUT:g})",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=positive_int,
        default=DEFAULT_MAX_BODY_BYTES,
        help=f"largest accepted request body (default {DEFAULT_MAX_BODY_BYTES})",
    )
    serve.add_argument(
        "--scheduler-name",
        action="append",
        metavar="NAME",
        help="bind only pods whose spec.schedulerName is NAME (repeatable; default "
        f"{DEFAULT_SCHEDULER_NAME}, the manifests' scheduler)",
    )
    serve.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM)")
    serve.add_argument("--tls-key-file", help="the certificate's private key (PEM)")
    serve.add_argument("--tls-client-ca-file", help="require client certificates signed by this CA (mTLS)")
    serve.add_argument(
        "--tls-client-name",
        action="append",
        metavar="NAME",
        help="with --tls-client-ca-file: accept only client certificates with this common name or "
        "DNS name (repeatable)",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="debug adds a line per filter and prioritize call (default info)",
    )
    serve.add_argument(
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="text: 'TIME LEVEL logger: message key=value...'; json: one object per line (default text)",
    )


def run(args: argparse.Namespace) -> int:
    from extender.serve_command import run_serve

    return run_serve(args)
