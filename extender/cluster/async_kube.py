"""Raw-JSON API requests on the event loop (the bind path's writes).

Requests go to the API server on kept-alive HTTP/1.1 connections
(:mod:`extender.cluster.keepalive`: one pre-built block of bytes per request, answers parsed by
httptools); through a configured proxy (a kubeconfig's ``proxy-url``), by aiohttp's client.

The official client stays in charge of configuration and credentials: this transport reads
the same :class:`kubernetes.client.Configuration` (server, CA, client certificate, TLS server
name, proxy) and asks it for the ``Authorization`` header, so a token that the client refreshes
(in-cluster token rotation, exec plugins) is used here too: it asks at most once every
:data:`AUTH_REFRESH_SECONDS` (asking runs the client's refresh hook, which a kubeconfig's makes
re-apply its whole configuration: a few per cent of the process's CPU if asked on every request),
and again at once after a 401 answer.

Why not the threads of :class:`~extender.cluster.kube.RawKube` or ``kubernetes.aio``: a claim
PUT against the project's fake API server costs about 0.55-0.7 ms of CPU through urllib3 in a
thread (plus a wait for a thread and a wait to get back on the loop, each 0.5 ms under load)
and 0.65-0.75 ms through ``kubernetes.aio`` (it copies and ``json.dumps`` every body), against
0.25-0.3 ms through aiohttp (``python -m bench.api_client_bench``). A bind makes three."""

from __future__ import annotations

import asyncio
import functools
import re
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

import aiohttp
import orjson
from kubernetes import client as k8s
from multidict import CIMultiDict, CIMultiDictProxy
from requests.utils import should_bypass_proxies
from yarl import URL

from extender.cluster.api import ClusterAPIError, FencedByStore, NotLeading, NotSent, api_error
from extender.cluster.api_calls import NO_ANSWER, RequestObserver, describe
from extender.cluster.keepalive import AnswerLost, ConnectFailed, KeepAlivePool
from extender.model import nesting

#: Attempts for a request that never reached the API server (the connection was refused or
#: could not be made): nothing was sent, so sending again cannot apply anything twice.
CONNECT_ATTEMPTS = 4
USER_AGENT = "dra-extender"
#: Longest a write waits for a pooled connection (or makes a new one) once its fence check
#: passed: the gap between "this replica may write" and the bytes leaving is bounded by it.
WRITE_CONNECT_SECONDS = 2.0
#: Server-side deadline of every write (the ``timeout`` parameter kube-apiserver honours for
#: any request): a write that reached the API server is applied within this, or not at all.
WRITE_DEADLINE_SECONDS = 10.0
#: How long the ``Authorization`` header the Configuration gave is sent before asking it again.
#: Safe: tokens rotate on the order of minutes to hours and the client refreshes them well ahead
#: of expiry (in-cluster it re-reads the token file every minute, which the kubelet rewrites at
#: 80% of the token's lifetime; a kubeconfig's exec or OIDC token is renewed 5 minutes before it
#: expires), so a header at most this old is still accepted. A 401 answer drops it anyway.
AUTH_REFRESH_SECONDS = 1.0
#: A path of only unreserved characters and ``/`` (what our own code builds from validated
#: names): sent as it is; anything else is percent-encoded first.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._~/-]*")


@functools.lru_cache(maxsize=64)  # one value per configured timeout: not formatted per request
def write_deadline(api_timeout: float) -> str:
    """The ``timeout`` parameter of a write: min(api timeout, WRITE_DEADLINE_SECONDS) in whole
    milliseconds (Go's time.ParseDuration reads "1500ms", never "1e-05s": the API server would
    answer 400)."""
    return f"{max(1, round(min(api_timeout, WRITE_DEADLINE_SECONDS) * 1000))}ms"


def write_window(api_timeout: float) -> float:
    """How long after its fence check a write of this replica can still be applied: the wait
    for a connection plus the API server's deadline (which the client timeout also bounds)."""
    return WRITE_CONNECT_SECONDS + min(api_timeout, WRITE_DEADLINE_SECONDS)


@functools.lru_cache(maxsize=256)
def _query_pair(key: str, value: str) -> str:
    return f"{quote_plus(key, safe='')}={quote_plus(value, safe='')}"


def query_string(query: Mapping[str, str | int]) -> str:
    """``query`` as an encoded query string (as :func:`urllib.parse.urlencode` encodes it: the
    API server decodes it as it decoded aiohttp's encoding). Values are str or int."""
    pairs = []
    for key, value in query.items():
        if not isinstance(value, str):
            if type(value) is not int:  # bool too: it has no one spelling in a query
                raise TypeError(f"query parameter {key}: {value!r} is not a str or an int")
            value = str(value)
        pairs.append(_query_pair(key, value))
    return "&".join(pairs)


@functools.lru_cache(maxsize=64)
def client_timeout(total: float, connect: float | None = None) -> aiohttp.ClientTimeout:
    """One (immutable) ClientTimeout per (total, connect): not one made per request."""
    return aiohttp.ClientTimeout(total=total, connect=connect)


def ssl_context(configuration: k8s.Configuration) -> ssl.SSLContext | None:
    """The TLS settings the official client's urllib3 pool would use (None for http://)."""
    if not configuration.host.startswith("https:"):
        return None
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.assert_hostname is False:
        context.check_hostname = False
    return context


class AsyncKube:
    """``request`` as :meth:`RawKube.request` does it, awaited on the caller's loop.

    One connection pool per event loop: a pool is made on first use and replaced when the
    loop that made it is gone (tests run one service under several ``asyncio.run`` calls).
    """

    def __init__(
        self,
        configuration: k8s.Configuration,
        timeout: float = 30.0,
        connections: int = 32,
        fence: Callable[[], str | None] | None = None,
        observe: RequestObserver | None = None,
        unknown: Callable[[str], None] | None = None,
        fenced: Callable[[str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.configuration = configuration
        #: Told of every request that was sent (metrics), once it is answered or given up.
        self.observe = observe
        #: Told of every write that was sent and may or may not have been applied (no answer, or
        #: a server error), with its resource (metrics).
        self.unknown = unknown
        #: Told (resource, message) when the API server refuses a write because another replica
        #: holds the Lease (:class:`FencedByStore`): the replica stands down at once.
        self.fenced = fenced
        self.timeout = timeout
        #: Why this replica may not write now (None: it may). Checked before every attempt of
        #: every request but GET, right before it is handed to the connection pool.
        self.fence = fence
        #: Monotonic time the last write was handed to the pool (0: none yet).
        self.last_write = 0.0
        #: Closed for writes (shutdown): a write is never sent again, not even on a new pool.
        self._closed = False
        self.connections = connections
        self.base = configuration.host.rstrip("/")
        # The base as yarl encodes it, once: each request's URL is built from its parts and an
        # already encoded path and query, which yarl and aiohttp then take as they are (parsing
        # and encoding a URL string costs more than the rest of the request's preparation).
        base = URL(self.base)
        self._scheme, self._authority = base.scheme, base.raw_authority
        self._path_prefix = base.raw_path.rstrip("/")
        self._ssl = ssl_context(configuration)
        self._server_hostname: str | None = configuration.tls_server_name or None
        bypass = should_bypass_proxies(self.base, no_proxy=configuration.no_proxy or "")
        self._proxy: str | None = None if bypass else (configuration.proxy or None)
        self._extra: dict[str, Any] = {}
        if self._proxy:
            self._extra["proxy"] = self._proxy
        if self._server_hostname:
            self._extra["server_hostname"] = self._server_hostname
        self._clock = clock
        #: The Authorization (name, value) the Configuration gave last (None: none), asked again
        #: once the clock reaches ``_auth_until``.
        self._auth: tuple[str, str] | None = None
        self._auth_until = float("-inf")
        #: Each content type's request headers with ``_auth`` (read-only: shared by requests).
        self._header_sets: dict[str, CIMultiDictProxy[str]] = {}
        #: Each content type's request head (request line aside) with ``_auth``, as sent.
        self._heads: dict[str, bytes] = {}
        self._host_header = base.host_port_subcomponent or ""
        self._address = (base.raw_host or "", base.port or (443 if base.scheme == "https" else 80))
        self._keepalive: KeepAlivePool | None = None
        self._keepalive_loop: asyncio.AbstractEventLoop | None = None
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def _pool(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session_loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.connections, ssl=self._ssl or False)
            self._session = aiohttp.ClientSession(
                connector=connector,
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
                # A claim or pod answer can be large (etcd allows 1.5 MiB objects).
                read_bufsize=2**21,
                trust_env=False,
            )
            # aiohttp sends a PUT or DELETE again when a kept-alive connection drops before the
            # answer, but the server may have applied it: the claim writer reads back and
            # decides instead (claim-writes.md; test_bind_faults' lost answers). The switch is
            # private (aiohttp's own test client flips it); a test checks it still exists.
            self._session._retry_connection = False
            self._session_loop = loop
        return self._session

    def _refresh_auth(self) -> None:
        now = self._clock()
        if now >= self._auth_until:
            auth = self.configuration.auth_settings().get("BearerToken")  # refreshes the token if due
            pair = (auth["key"], auth["value"]) if auth and auth.get("value") else None
            if pair != self._auth:
                self._auth = pair
                self._header_sets.clear()
                self._heads.clear()
            self._auth_until = now + AUTH_REFRESH_SECONDS

    def _headers(self, content_type: str) -> CIMultiDictProxy[str]:
        """The request's headers for aiohttp (through a proxy), beside the session's own."""
        self._refresh_auth()
        headers = self._header_sets.get(content_type)
        if headers is None:
            made = CIMultiDict({"Content-Type": content_type})
            if self._auth is not None:
                made[self._auth[0]] = self._auth[1]
            headers = self._header_sets[content_type] = CIMultiDictProxy(made)
        return headers

    def _head(self, content_type: str) -> bytes:
        """Every header line of a request of ``content_type`` but its length, encoded once."""
        self._refresh_auth()
        head = self._heads.get(content_type)
        if head is None:
            lines = [
                ("Host", self._host_header),
                ("User-Agent", USER_AGENT),
                ("Accept", "application/json"),
                ("Content-Type", content_type),
            ]
            if self._auth is not None:
                lines.append(self._auth)
            for name, value in lines:
                if "\r" in value or "\n" in value:  # a header cannot carry a line break
                    raise NotSent(f"not sent: the {name} header holds a line break")
            head = self._heads[content_type] = "".join(f"{n}: {v}\r\n" for n, v in lines).encode("latin-1")
        return head

    def _target(self, path: str, query: Mapping[str, str | int] | None) -> bytes:
        """The request line's target, encoded: the server's path prefix, the path, the query."""
        if not _PLAIN_PATH.fullmatch(path):
            path = quote(path, safe="/")
        target = self._path_prefix + path
        if query:
            target += "?" + query_string(query)
        return target.encode("ascii")

    def _url(self, path: str, query: Mapping[str, str | int] | None) -> URL:
        """The whole URL, for aiohttp (through a proxy): the same target."""
        target = self._target(path, query).decode("ascii")
        return URL(f"{self._scheme}://{self._authority}{target}", encoded=True)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> Any:
        """The decoded JSON answer; :class:`ClusterAPIError` (by status) on failure.

        An answer that did not arrive (timeout, connection lost after sending) raises with
        ``code`` 0: the caller cannot know whether the server applied the request.
        """
        try:
            data = None if body is None else orjson.dumps(body)
        except TypeError as exc:  # nested too deeply, say: nothing leaves
            raise NotSent(f"{method} {path}: not sent: the body cannot be encoded: {exc}") from None
        total = timeout if timeout is not None else self.timeout
        writing = method != "GET"
        if writing:
            query = {**(query or {}), "timeout": write_deadline(total)}
            limit = client_timeout(total, min(total, WRITE_CONNECT_SECONDS))
        else:
            limit = client_timeout(total)
        started = time.perf_counter()
        try:
            raw, status, reason = await self._send(method, path, query, data, content_type, limit)
        except NotLeading:
            raise  # never sent: nothing to count
        except ClusterAPIError as exc:
            self._observed(method, path, query, NO_ANSWER, started)
            if writing and not isinstance(exc, NotSent):
                self._unknown(method, path, query)
            raise
        self._observed(method, path, query, str(status), started)
        if status == 401:
            self._auth_until = float("-inf")  # the token was refused: ask for it again next time
        if writing and status >= 500:
            self._unknown(method, path, query)
        if not 200 <= status <= 299:
            error = api_error(status, reason, raw)
            if isinstance(error, FencedByStore) and self.fenced is not None:
                self.fenced(describe(method, path, query)[1], str(error))
            raise error
        try:
            return nesting.loads(raw or b"null")
        except orjson.JSONDecodeError as exc:
            raise ClusterAPIError(f"{method} {path}: malformed answer from the API server: {exc}") from None

    def _observed(
        self, method: str, path: str, query: dict[str, Any] | None, code: str, started: float
    ) -> None:
        if self.observe is not None:
            self.observe(*describe(method, path, query), code, time.perf_counter() - started)

    def _unknown(self, method: str, path: str, query: dict[str, Any] | None) -> None:
        if self.unknown is not None:
            self.unknown(describe(method, path, query)[1])

    async def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str | int] | None,
        data: bytes | None,
        content_type: str,
        limit: aiohttp.ClientTimeout,
    ) -> tuple[bytes, int, str]:
        """(body, status, reason) of the answer, sending again only what never left."""
        writing = method != "GET"
        for attempt in range(CONNECT_ATTEMPTS):
            if writing:
                why = "the API client is closed (shutting down)" if self._closed else None
                if why is None and self.fence is not None:
                    why = self.fence()
                if why is not None:
                    raise NotLeading(f"{method} {path}: not sent: {why}")
                self.last_write = time.monotonic()
            try:
                if self._proxy:
                    url = self._url(path, query)
                    return await self._send_via_proxy(method, url, data, content_type, limit)
                answer = await self._kept_alive().exchange(
                    self._request_bytes(method, self._target(path, query), data, content_type),
                    connect_timeout=limit.connect if limit.connect is not None else limit.total or 0.0,
                    timeout=limit.total or 0.0,
                )
                return answer.body, answer.status, answer.reason
            except (ConnectFailed, aiohttp.ClientConnectorError) as exc:
                if attempt + 1 < CONNECT_ATTEMPTS:
                    await asyncio.sleep(0.05 * (attempt + 1))
                    continue
                # No connection was made: nothing was sent, so nothing can have been applied.
                raise NotSent(f"{method} {path}: not sent: {exc}") from None
            except AnswerLost as exc:
                raise ClusterAPIError(f"{method} {path}: no answer: {exc}") from None
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                raise ClusterAPIError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _kept_alive(self) -> KeepAlivePool:
        loop = asyncio.get_running_loop()
        if self._keepalive is None or self._keepalive_loop is not loop or self._keepalive.closed:
            self._keepalive = KeepAlivePool(
                *self._address, self._ssl, self._server_hostname, limit=self.connections
            )
            self._keepalive_loop = loop
        return self._keepalive

    def _request_bytes(self, method: str, target: bytes, data: bytes | None, content_type: str) -> bytes:
        """The whole request as it goes on the wire: request line, head, length and body."""
        start = b"%s %s HTTP/1.1\r\n%s" % (method.encode("ascii"), target, self._head(content_type))
        if data is None:
            return start + b"\r\n"
        return b"%sContent-Length: %d\r\n\r\n%s" % (start, len(data), data)

    async def _send_via_proxy(
        self, method: str, url: URL, data: bytes | None, content_type: str, limit: aiohttp.ClientTimeout
    ) -> tuple[bytes, int, str]:
        """Through the configured proxy: aiohttp's client (kept for this case only; the kept-alive
        connections of :mod:`extender.cluster.keepalive` go to the API server directly)."""
        async with self._pool().request(
            method,
            url,
            data=data,
            headers=self._headers(content_type),
            timeout=limit,
            allow_redirects=False,
            **self._extra,
        ) as response:
            return await response.read(), response.status, response.reason or ""

    async def close(self) -> None:
        """Close the pool; no write is sent after this (reads may still open a new pool)."""
        self._closed = True
        if self._keepalive is not None:
            self._keepalive.close()
        self._keepalive = None
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
