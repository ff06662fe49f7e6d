"""Serving: the verbs (and the debug views) on one listener, probes and metrics on another.

kube-scheduler is the only client of the verbs, so they listen where only it can reach them:
on 127.0.0.1 in the sidecar deployment, or behind mutual TLS with a dedicated client CA (and,
optionally, an allowed client name) when the extender runs behind a Service. Kubelet's probes
and Prometheus reach the second listener, which serves nothing else.

uvicorn runs both listeners; on the verbs' one, kube-scheduler's POSTs are answered by the
verbs' own HTTP protocol (:mod:`extender.service.verbs_http`), which hands every other request
(debug views, other methods) with its connection to uvicorn's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

import uvicorn
import uvloop
from uvicorn.protocols.http.h11_impl import H11Protocol

from extender.defaults import DEFAULT_MAX_BINDS, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_REQUESTS
from extender.service.admission import Admission
from extender.service.app import Verbs, verb_prefix
from extender.service.fast_verbs import FastVerbs
from extender.service.verbs_http import VerbRoutes, certificate_names, verbs_protocol

T = TypeVar("T")
log = logging.getLogger("dra_extender")


@dataclass(frozen=True)
class TlsSettings:
    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    #: Accepted client certificate names (common name or DNS name); empty: any the CA signed.
    client_names: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Listener:
    host: str
    port: int
    tls: TlsSettings | None = None


@dataclass(frozen=True)
class Limits:
    """Bounds against clients that send too much or too slowly."""

    #: Open connections per listener; once this many are open, every request is answered 503
    #: (uvicorn's limit). Keep the process's open-file limit above it.
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    #: Requests other than binds (filter, prioritize, preempt, debug views) served at once.
    max_requests: int = DEFAULT_MAX_REQUESTS
    #: Binds in flight at once; a bind holds its request open while it writes to the API server.
    max_binds: int = DEFAULT_MAX_BINDS
    #: Idle keep-alive connections are closed after this many seconds: longer than Go's
    #: transport keeps an idle connection (90 s, kube-scheduler's extender client), so the client
    #: always closes first and never sends a request on a connection the server is closing
    #: (a POST it would not retry: "failed filter with extender ... EOF").
    keep_alive_seconds: int = 120
    #: Largest request head (request line and headers), bytes.
    max_header_bytes: int = 16 * 1024


def name_checking_protocol(allowed: frozenset[str]) -> type[H11Protocol]:
    """An HTTP protocol that hangs up on clients whose certificate carries none of ``allowed``."""

    class ClientNameChecked(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            names = certificate_names(transport.get_extra_info("peercert"))
            if not names & allowed:
                log.warning(
                    "refused a client certificate named %s (allowed: %s)",
                    ", ".join(sorted(names)) or "nothing",
                    ", ".join(sorted(allowed)),
                )
                transport.close()

    return ClientNameChecked


class _QuietSignals(uvicorn.Server):
    """The second server: the first one handles SIGTERM/SIGINT for the process."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _config(
    app: Any,
    listener: Listener,
    limits: Limits,
    *,
    lifespan: Literal["on", "off"],
    routes: VerbRoutes | None = None,
    admission: Admission | None = None,
) -> uvicorn.Config:
    """uvicorn's settings for one listener; with ``routes``, its verbs are answered by
    :mod:`extender.service.verbs_http` (which checks client names itself)."""
    options: dict[str, Any] = {}
    http: Any = "auto"
    names = listener.tls.client_names if listener.tls is not None else frozenset()
    if listener.tls is not None:
        options = {"ssl_certfile": listener.tls.cert_file, "ssl_keyfile": listener.tls.key_file}
        if listener.tls.client_ca_file:
            options.update(ssl_ca_certs=listener.tls.client_ca_file, ssl_cert_reqs=ssl.CERT_REQUIRED)
        if names and routes is None:
            http = name_checking_protocol(names)
    if routes is not None:
        http = verbs_protocol(routes, admission, max_header_bytes=limits.max_header_bytes, client_names=names)
    return uvicorn.Config(
        app,
        host=listener.host,
        port=listener.port,
        http=http,
        lifespan=lifespan,
        log_config=None,
        access_log=False,
        # No proxy stands in front of the extender (kube-scheduler calls it directly), so no
        # X-Forwarded-* header is believed, not even from loopback, uvicorn's default trust;
        # and no middleware parses them on every request.
        proxy_headers=False,
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=limits.keep_alive_seconds,
        h11_max_incomplete_event_size=limits.max_header_bytes,
        **options,
    )


def _url(server: uvicorn.Server, listener: Listener) -> str:
    port = server.servers[0].sockets[0].getsockname()[1] if server.servers else listener.port
    scheme = "https" if listener.tls is not None else "http"
    return f"{scheme}://{listener.host}:{port}"


async def serve(
    app: Any, ops_app: Any, verbs: Listener, ops: Listener | None, limits: Limits, prefix: str
) -> None:
    """Run both listeners until the process is told to stop (the verbs' server owns the signals).

    The verbs' server runs on this loop, which is also the engine's; the ops listener (probes
    and metrics) runs on a thread and loop of its own, so a long allocation never delays a
    probe.
    """
    # One prefix for the fast path and the admission counters: the app's own, when it has verbs.
    handlers = getattr(getattr(app, "state", None), "verbs", None)
    routes = app.state.verb_prefix if handlers is not None else verb_prefix(prefix)
    served = FastVerbs(app, handlers, routes) if handlers is not None else app
    admitted = Admission(
        served,
        bind_path=f"{routes}/bind",
        max_binds=limits.max_binds,
        max_requests=limits.max_requests,
        verbs=frozenset(f"{routes}/{verb}" for verb in Verbs.NAMES),
        fence=getattr(getattr(app, "state", None), "fence", None),
    )
    routes = cast(VerbRoutes, served) if hasattr(served, "verb_of") else None
    main = uvicorn.Server(_config(admitted, verbs, limits, lifespan="on", routes=routes, admission=admitted))
    ops_server: uvicorn.Server | None = None
    ops_thread: threading.Thread | None = None
    if ops is not None:
        ops_server = _QuietSignals(_config(ops_app, ops, limits, lifespan="off"))
        ops_thread = threading.Thread(target=run, args=(ops_server.serve(),), name="ops", daemon=True)
        ops_thread.start()
    task = asyncio.create_task(main.serve())
    servers = [main] if ops_server is None else [main, ops_server]
    while not all(s.started for s in servers) and not task.done():
        if ops_thread is not None and not ops_thread.is_alive():
            break  # the ops listener could not start (its error is logged)
        await asyncio.sleep(0.01)
    if all(s.started for s in servers):
        log.info(
            "verbs and debug views on %s%s/{filter,prioritize,bind,preempt}; probes and metrics on %s",
            _url(main, verbs),
            prefix,
            _url(ops_server, ops) if ops_server is not None and ops is not None else "the same listener",
        )
    else:
        main.should_exit = True
    await task
    if ops_server is not None and ops_thread is not None:
        ops_server.should_exit = True
        await asyncio.to_thread(ops_thread.join, 10)
        if not ops_server.started:
            raise SystemExit(1)  # as uvicorn exits when the verbs' listener cannot start


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on uvloop's event loop (uvicorn's own choice when it starts the loop
    itself: its socket writes and loop turns cost about half of asyncio's)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
