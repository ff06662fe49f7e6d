"""``dra-extender serve``: the service built from its flags (the server stack is imported here,
not by the command line's parser)."""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from extender import __version__
from extender.allocator.features import FeatureGateError, Features, parse_feature_gates
from extender.allocator.releases import DEFAULT_MINOR, release_of
from extender.cluster.api import ClusterAPIError
from extender.commands.arguments import make_room_rules
from extender.defaults import DEFAULT_API_TIMEOUT, DEFAULT_CACHE_STALE_AFTER, DEFAULT_SCHEDULER_NAME
from extender.scheduling.config import EngineConfig, Mover
from extender.service.app import create_app, create_ops_app
from extender.service.bind_pressure import BindPressure
from extender.service.listeners import Limits, Listener, TlsSettings, run, serve
from extender.service.logs import configure_logging
from extender.service.runtime import LeaderElection, ServeConfig, build_embedded
from extender.statefile import StateFileError

CLUSTER_FLAGS = ("kubeconfig", "leader_elect", "api_timeout", "cache_stale_after")


def serve_problems(args: argparse.Namespace) -> list[str]:
    """What is wrong with a ``serve`` command line beyond each flag's own type (empty: nothing)."""
    problems = []
    if args.state:
        given = [f"--{f.replace('_', '-')}" for f in CLUSTER_FLAGS if getattr(args, f) not in (None, False)]
        if given:
            problems.append(
                f"--state (embedded mode) cannot be combined with cluster-mode flags: {', '.join(given)}"
            )
    if args.make_room and not args.make_room_hint_interval:
        problems.append(
            "--make-room needs --make-room-hint-interval > 0: the mover carries out the plans made "
            "at that interval for pods that fit no node"
        )
    if args.make_room_dry_run and not args.make_room:
        problems.append("--make-room-dry-run goes with --make-room (it says what the mover would do)")
    cert, key = args.tls_cert_file, args.tls_key_file
    if bool(cert) != bool(key):
        problems.append("--tls-cert-file and --tls-key-file go together: give both or neither")
    if (args.tls_client_ca_file or args.tls_client_name) and not (cert and key):
        problems.append(
            "--tls-client-ca-file/--tls-client-name need --tls-cert-file and --tls-key-file "
            "(without a server certificate the verbs would be served as plain HTTP to anyone)"
        )
    if args.tls_client_name and not args.tls_client_ca_file:
        problems.append(
            "--tls-client-name needs --tls-client-ca-file (client certificates are checked against it)"
        )
    for flag, path in (
        ("--tls-cert-file", cert),
        ("--tls-key-file", key),
        ("--tls-client-ca-file", args.tls_client_ca_file),
        ("--kubeconfig", args.kubeconfig),
    ):
        if path and not os.access(path, os.R_OK):
            problems.append(f"{flag} {path}: {'not readable' if os.path.exists(path) else 'no such file'}")
    if args.leader_elect and not (
        args.leader_elect_retry_period < args.leader_elect_renew_deadline < args.leader_elect_lease_duration
    ):
        problems.append(
            "leader election needs --leader-elect-retry-period < --leader-elect-renew-deadline < "
            "--leader-elect-lease-duration"
        )
    return problems


def ops_host(args: argparse.Namespace) -> str:
    """--ops-host, else 127.0.0.1 in embedded mode (nothing else needs the probes there) and
    0.0.0.0 in cluster mode (kubelet's probes and Prometheus come from outside the pod)."""
    return str(args.ops_host or ("127.0.0.1" if args.state else "0.0.0.0"))


def listener_problems(args: argparse.Namespace) -> list[str]:
    """Listeners that could not start, said with the flag to change (uvicorn's own error names
    neither the address nor the flag). Checked by binding once; a port taken between this check
    and the start still fails, with uvicorn's message."""
    problems = []
    if args.port and args.port == args.ops_port:
        problems.append(f"--port and --ops-port are both {args.port}: give them different ports")
    for host_flag, host, port_flag, port in (
        ("--host", args.host, "--port", args.port),
        ("--ops-host", ops_host(args), "--ops-port", args.ops_port),
    ):
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
        except (socket.gaierror, UnicodeError) as exc:
            problems.append(f"{host_flag} {host}: not an address to listen on ({exc})")
            continue
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            try:
                probe.bind(address)
            except OSError as exc:
                if exc.errno == errno.EACCES:
                    problems.append(f"{port_flag} {port}: not allowed to listen on it (a privileged port?)")
                elif exc.errno == errno.EADDRINUSE:
                    problems.append(
                        f"{port_flag} {port}: {host}:{port} is already in use (another dra-extender?); "
                        f"choose another {port_flag}"
                    )
                else:
                    problems.append(f"{host_flag} {host}: cannot listen there: {exc.strerror or exc}")
    return problems


def serve_config(args: argparse.Namespace) -> ServeConfig:
    release = args.kubernetes_version or release_of(DEFAULT_MINOR)
    from_server = args.kubernetes_version is None and not args.state
    # Following the API server: its release's gates are checked once it is known (versions.py).
    gates = parse_feature_gates(
        args.feature_gates,
        release=release if args.kubernetes_version else None,
        any_release=from_server,  # checked against the API server's release once it is known
    )
    engine = EngineConfig(
        features=Features.from_gates(gates, release),
        release=release,
        score_policy=args.score_policy,
        score_tie_break=args.score_tie_break,
        node_timeout=args.node_timeout,
        filter_budget=args.filter_budget,
        scheduler_names=frozenset(args.scheduler_name or [DEFAULT_SCHEDULER_NAME]),
        device_preemption=args.device_preemption,
        binding_timeout=args.binding_timeout,
        binding_wait=args.binding_conditions_wait,
        catch_up_wait=args.catch_up_wait,
        release_wait=args.release_wait,
        make_room=make_room_rules(args),
        make_room_hint_seconds=args.make_room_hint_interval,
        mover=Mover(
            on=args.make_room,
            dry_run=args.make_room_dry_run,
            after=args.make_room_after,
            rate=args.make_room_rate,
            cooldown=args.make_room_cooldown,
            timeout=args.make_room_timeout,
        ),
        hold_seconds=args.hold_after_prioritize,
    )
    leader = None
    if args.leader_elect:
        leader = LeaderElection(
            namespace=args.leader_elect_namespace,
            name=args.leader_elect_name,
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        )
    return ServeConfig(
        engine=engine,
        prefix=args.prefix,
        max_body_bytes=args.max_body_bytes,
        leader_election=leader,
        api_timeout=args.api_timeout or DEFAULT_API_TIMEOUT,
        cache_stale_after=args.cache_stale_after or DEFAULT_CACHE_STALE_AFTER,
        gates=gates,
        release_from_server=from_server,
        max_state_bytes=args.max_state_bytes,
    )


def run_serve(args: argparse.Namespace) -> int:

    problems = serve_problems(args) or listener_problems(args)
    if problems:
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    writer = configure_logging(args.log_level, args.log_format)
    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again: with this handler
    # that ends the process through the ``finally`` below (the queued log lines are written),
    # with the exit status a SIGTERM gives (143).
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        return _serve(args)
    finally:
        writer.stop()  # the lines still queued are written


def settings(args: argparse.Namespace, config: ServeConfig) -> dict[str, object]:
    """The effective settings, for the start-up log line (what an operator checks first)."""
    engine = config.engine
    leader = config.leader_election
    return {
        "listen": f"{args.host}:{args.port}",
        "ops": f"{ops_host(args)}:{args.ops_port}" + (" (with the debug views)" if args.ops_debug else ""),
        "prefix": config.prefix,
        "kubernetesVersion": "the API server's" if config.release_from_server else engine.release.name,
        "featureGates": args.feature_gates or "(defaults)",
        "schedulerNames": sorted(engine.scheduler_names),
        "scorePolicy": engine.score_policy,
        "scoreTieBreak": engine.score_tie_break,
        "nodeTimeout": engine.node_timeout,
        "filterBudget": engine.filter_budget,
        "bindingTimeout": engine.binding_timeout,
        "bindingConditionsWait": engine.binding_wait,
        "catchUpWait": engine.catch_up_wait,
        "releaseWait": engine.release_wait,
        "devicePreemption": engine.device_preemption,
        "leaderElection": (
            f"{leader.namespace}/{leader.name} lease {leader.lease_duration:g}s renew "
            f"{leader.renew_deadline:g}s retry {leader.retry_period:g}s"
            if leader is not None
            else "off"
        ),
        "maxBodyBytes": config.max_body_bytes,
        "maxConnections": args.max_connections,
        "maxConcurrency": args.max_concurrency,
        "maxBinds": args.max_binds,
        "schedulerHttpTimeout": args.scheduler_http_timeout or "off",
    }


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def paused_collector() -> Iterator[None]:
    """No garbage collection while the state loads, and what it loaded frozen (kept out of
    every later collection). Loading creates millions of long-lived objects and no cycles; the
    collector's passes as the heap grew took 2.6 of 4.6 s of the embedded 5,000 x 8 load, and
    the full pass before a freeze another 0.54 s. What start-up left before (the CEL parser's
    construction leaves some 7,400 objects in cycles) is collected first, on a small heap."""
    gc.collect()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        gc.enable()


def _serve(args: argparse.Namespace) -> int:
    try:
        config = serve_config(args)
        if args.state:
            service, _store = build_embedded(args.state, config, loading=paused_collector)
        else:
            # The Kubernetes client (half a second of imports) only where a cluster is used.
            from extender.cluster.kube import KubeConfigError, load_configuration, running_in_cluster
            from extender.service.cluster_mode import build_cluster

            if not (args.kubeconfig or running_in_cluster()):
                print(
                    "error: give --state FILE... (embedded mode) or --kubeconfig (cluster mode)",
                    file=sys.stderr,
                )
                return 2
            try:
                service = build_cluster(load_configuration(args.kubeconfig), config)
            except KubeConfigError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
    except (FeatureGateError, StateFileError, ClusterAPIError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pressure = (
        BindPressure(args.scheduler_http_timeout, parked=service.engine.tracker.parked_binds)
        if args.scheduler_http_timeout
        else None
    )
    app = create_app(
        service, prefix=config.prefix, max_body_bytes=config.max_body_bytes, bind_pressure=pressure
    )
    gc.collect()
    gc.freeze()  # the loaded state is long-lived: keep it out of the collector's way (GC tails)
    # The young generation collected every 50,000 allocations instead of 700: a filter over
    # 5,000 nodes allocates tens of thousands of objects, and the full collections that the
    # young ones trigger took 0.77 of 10.8 CPU s (6 passes of ~130 ms) in the embedded
    # 5,000 x 8 benchmark, 0.12 s in all at 10,000 (bench/profile.py counts them). Under the
    # real control plane at 500 x 8 (issue 54) the collections at 10,000 took 4.7% of the
    # extender's CPU (44 young passes of 15 ms), at 50,000 2.9-3.0% (8 of 63 ms, and a pass
    # of the middle generation): the garbage is freed by reference counting, what the
    # collector looks for (cycles) is rare, and each pass costs a look at every young object.
    gc.set_threshold(50_000, 10, 10)
    logging.getLogger("dra_extender").info(
        "dra-extender %s starting in %s mode",
        __version__,
        service.mode,
        extra={"fields": settings(args, config)},
    )
    tls = None
    if args.tls_cert_file:
        tls = TlsSettings(
            args.tls_cert_file,
            args.tls_key_file,
            args.tls_client_ca_file,
            frozenset(args.tls_client_name or ()),
        )
    verbs = Listener(args.host, args.port, tls)
    ops = Listener(ops_host(args), args.ops_port)
    limits = Limits(
        max_connections=args.max_connections, max_requests=args.max_concurrency, max_binds=args.max_binds
    )
    run(serve(app, create_ops_app(service, debug_views=args.ops_debug), verbs, ops, limits, config.prefix))
    return 0
