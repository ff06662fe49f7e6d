"""The bind path's transport (AsyncKube) against a real HTTP(S) server: it sends what the
official client's configuration says (token, CA, client certificate, TLS server name), maps
answers to the ClusterAPIError hierarchy, and never sends a write twice behind our back."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
import trustme
from kubernetes import client as k8s
from yarl import URL

from extender.cluster.api import ApiAlreadyExists, ApiConflict, ApiNotFound, ClusterAPIError, FencedByStore
from extender.cluster.async_kube import AUTH_REFRESH_SECONDS, CONNECT_ATTEMPTS, AsyncKube


@dataclass
class Seen:
    """What the server received (headers by lower-case name), and how it answers."""

    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    answer: tuple[int, Any] = (200, {"metadata": {"name": "c"}})
    #: Apply (record) the request, then close the connection without answering.
    drop_answer: bool = False
    delay: float = 0.0


@contextlib.contextmanager
def server(seen: Seen, context: ssl.SSLContext | None = None) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def handle_any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            seen.requests.append(
                (self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            if seen.delay:
                threading.Event().wait(seen.delay)
            if seen.drop_answer:
                self.close_connection = True
                self.connection.close()
                return
            status, payload = seen.answer
            data = orjson.dumps(payload)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = handle_any

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    if context is not None:
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    scheme = "https" if context is not None else "http"
    try:
        yield f"{scheme}://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def configuration(host: str, **settings: Any) -> k8s.Configuration:
    config = k8s.Configuration()
    config.host = host
    for key, value in settings.items():
        setattr(config, key, value)
    return config


def call(kube: AsyncKube, *requests: Callable[[AsyncKube], Any]) -> list[Any]:
    """Run the requests in order on one loop; each result or the exception raised."""

    async def run() -> list[Any]:
        results: list[Any] = []
        try:
            for request in requests:
                try:
                    results.append(await request(kube))
                except ClusterAPIError as exc:
                    results.append(exc)
        finally:
            await kube.close()
        return results

    return asyncio.run(run())


#: kube-apiserver's words for a refusal by the shipped policy (manifests/leader-fence.yaml).
FENCE_REFUSAL = (
    'resourceclaims.resource.k8s.io "c" is forbidden: ValidatingAdmissionPolicy '
    "'dra-extender-leader-writes' with binding 'dra-extender-leader-writes' denied request: "
    "dra-extender: not the leader: Lease dra-extender/dra-extender-scheduler is held by b_1, "
    "this write comes from pod a"
)


def put(kube: AsyncKube) -> Any:
    return kube.request("PUT", "/apis/x/c", body={"metadata": {"name": "c", "resourceVersion": "7"}})


def get(kube: AsyncKube) -> Any:
    return kube.request("GET", "/apis/x/c", query={"a": "b c"})


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_sends_the_body_query_and_the_token_the_configuration_gives() -> None:
    seen = Seen()
    tokens = iter(["Bearer one", "Bearer two"])

    def refresh(config: k8s.Configuration) -> None:  # as in-cluster token rotation does
        config.api_key["BearerToken"] = next(tokens)

    clock = Clock()

    def later(kube: AsyncKube) -> Any:
        clock.now += AUTH_REFRESH_SECONDS  # the header is asked for again after this
        return get(kube)

    with server(seen) as url:
        config = configuration(url, refresh_api_key_hook=refresh)
        config.api_key["BearerToken"] = "Bearer zero"
        results = call(AsyncKube(config, clock=clock), put, later)
    assert results == [{"metadata": {"name": "c"}}] * 2
    (m1, p1, h1, b1), (m2, p2, h2, _) = seen.requests
    assert (m1, p1, orjson.loads(b1)) == (
        "PUT",
        "/apis/x/c?timeout=10000ms",  # every write carries the API server's deadline for it
        {"metadata": {"name": "c", "resourceVersion": "7"}},
    )
    assert (m2, p2) == ("GET", "/apis/x/c?a=b+c")
    assert (h1["authorization"], h2["authorization"]) == ("Bearer one", "Bearer two")
    assert h1["content-type"] == "application/json" and h1["accept"] == "application/json"


def test_the_token_is_asked_for_once_per_interval_and_again_after_a_401() -> None:
    """Asking the Configuration runs its refresh hook (costly with a kubeconfig): the header it
    gave is reused for AUTH_REFRESH_SECONDS, and a 401 (say, a token revoked early) drops it."""
    seen = Seen()
    asked: list[float] = []
    clock = Clock()

    def refresh(config: k8s.Configuration) -> None:
        asked.append(clock.now)
        config.api_key["BearerToken"] = f"Bearer t{len(asked)}"

    def at(moment: float, status: int = 200) -> Callable[[AsyncKube], Any]:
        def request(kube: AsyncKube) -> Any:
            clock.now, seen.answer = 100.0 + moment, (status, {"kind": "Status", "message": "m"})
            return put(kube)

        return request

    step = AUTH_REFRESH_SECONDS
    with server(seen) as url:
        config = configuration(url, refresh_api_key_hook=refresh)
        config.api_key["BearerToken"] = "Bearer t0"  # the hook runs only for a configured key
        results = call(
            AsyncKube(config, clock=clock),
            at(0),
            at(step * 0.5),
            at(step * 0.99, status=401),  # refused: the next request asks again, however soon
            at(step * 0.999),
            at(step * 1.5),
            at(step * 2.0),  # a whole interval after the last ask
        )
    assert [getattr(r, "code", 200) for r in results] == [200, 200, 401, 200, 200, 200]
    assert asked == [100.0, 100.0 + step * 0.999, 100.0 + step * 2.0]
    sent = [headers["authorization"] for _, _, headers, _ in seen.requests]
    assert sent == ["Bearer t1", "Bearer t1", "Bearer t1", "Bearer t2", "Bearer t2", "Bearer t3"]


def test_query_values_and_paths_are_percent_encoded_once() -> None:
    """The URL is encoded here (yarl takes it as it is): what the server decodes is what was
    given, whatever characters a value has."""
    from urllib.parse import parse_qsl, unquote, urlsplit

    selector = "app in (a, b),tier!=x y/z;w&v=1+2%"
    manager = "my manager=ü"
    seen = Seen()
    with server(seen) as url:
        call(
            AsyncKube(configuration(url + "/")),  # the base's trailing slash is not doubled
            lambda kube: kube.request("GET", "/api/v1/pods", query={"labelSelector": selector, "limit": 500}),
            lambda kube: kube.request("PUT", "/apis/x/a b", query={"fieldManager": manager}, body={}),
        )
    (_, get_path, _, _), (_, put_path, _, _) = seen.requests
    assert get_path == (
        "/api/v1/pods?labelSelector=app+in+%28a%2C+b%29%2Ctier%21%3Dx+y%2Fz%3Bw%26v%3D1%2B2%25&limit=500"
    )
    assert parse_qsl(urlsplit(get_path).query, strict_parsing=True) == [
        ("labelSelector", selector),
        ("limit", "500"),
    ]
    assert put_path == "/apis/x/a%20b?fieldManager=my+manager%3D%C3%BC&timeout=10000ms"
    assert unquote(urlsplit(put_path).path) == "/apis/x/a b"
    assert parse_qsl(urlsplit(put_path).query) == [("fieldManager", manager), ("timeout", "10000ms")]


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("http://127.0.0.1:8080", "http://127.0.0.1:8080/api/v1/pods/p?a=b"),
        ("https://h:443/", "https://h/api/v1/pods/p?a=b"),
        ("https://[::1]:6443", "https://[::1]:6443/api/v1/pods/p?a=b"),
        (
            "https://proxy.example/k8s/clusters/c-1/",
            "https://proxy.example/k8s/clusters/c-1/api/v1/pods/p?a=b",
        ),
    ],
)
def test_the_url_is_the_configured_host_then_the_path(host: str, url: str) -> None:
    kube = AsyncKube(configuration(host))
    assert str(kube._url("/api/v1/pods/p", {"a": "b"})) == url  # through a proxy
    assert kube._target("/api/v1/pods/p", {"a": "b"}) == URL(url).raw_path_qs.encode()  # the request line


def test_no_token_configured_sends_no_authorization_header() -> None:
    seen = Seen()
    with server(seen) as url:
        call(AsyncKube(configuration(url)), get)
    assert "authorization" not in seen.requests[0][2]


@pytest.mark.parametrize(
    ("status", "body", "expected", "code", "text"),
    [
        (
            409,
            {"kind": "Status", "reason": "AlreadyExists", "message": "exists"},
            ApiAlreadyExists,
            409,
            "409: exists",
        ),
        (
            409,
            {"kind": "Status", "reason": "Conflict", "message": "modified"},
            ApiConflict,
            409,
            "409: modified",
        ),
        (404, {"kind": "Status", "reason": "NotFound", "message": "gone"}, ApiNotFound, 404, "404: gone"),
        (500, {"kind": "Status", "message": "etcd down"}, ClusterAPIError, 500, "500: etcd down"),
        (403, "not a status", ClusterAPIError, 403, "403 Forbidden"),
        (
            403,
            {"kind": "Status", "reason": "Forbidden", "message": FENCE_REFUSAL},
            FencedByStore,
            403,
            f"403: {FENCE_REFUSAL}",
        ),
        (
            403,
            {"kind": "Status", "reason": "Forbidden", "message": "another policy denied request: no"},
            ClusterAPIError,
            403,
            "403: another policy denied request: no",
        ),
    ],
    ids=[
        "already-exists",
        "conflict",
        "not-found",
        "server-error",
        "non-status-body",
        "store-fence",
        "other-403",
    ],
)
def test_error_answers_map_to_the_api_error_hierarchy(
    status: int, body: Any, expected: type[ClusterAPIError], code: int, text: str
) -> None:
    seen = Seen(answer=(status, body))
    with server(seen) as url:
        (result,) = call(AsyncKube(configuration(url)), put)
    assert type(result) is expected and result.code == code and str(result) == text


def test_a_write_the_store_fence_refuses_tells_the_replica_to_stand_down_once() -> None:
    told: list[tuple[str, str]] = []
    seen = Seen(answer=(403, {"kind": "Status", "reason": "Forbidden", "message": FENCE_REFUSAL}))
    with server(seen) as url:
        kube = AsyncKube(configuration(url), fenced=lambda resource, why: told.append((resource, why)))

        def write_claim(kube: AsyncKube) -> Any:
            path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c"
            return kube.request("PUT", path, body={"metadata": {"name": "c", "resourceVersion": "7"}})

        (result,) = call(kube, write_claim)
    assert isinstance(result, FencedByStore)
    assert told == [("resourceclaims", f"403: {FENCE_REFUSAL}")]
    assert [m for m, *_ in seen.requests] == ["PUT"]  # refused at admission: not sent again


def test_a_write_whose_answer_is_lost_is_not_sent_again_behind_the_writers_back() -> None:
    # aiohttp re-sends an idempotent request (PUT, DELETE) when a kept-alive connection drops;
    # the server may have applied it, so the claim writer must see "no answer" (code 0) instead.
    seen = Seen()
    with server(seen) as url:
        kube = AsyncKube(configuration(url))

        async def lose_second(kube: AsyncKube) -> Any:
            seen.drop_answer = True  # the first request opened the connection that is reused
            return await put(kube)

        first, second = call(kube, put, lose_second)
    assert first == {"metadata": {"name": "c"}}
    assert isinstance(second, ClusterAPIError) and second.code == 0
    assert [m for m, *_ in seen.requests] == ["PUT", "PUT"]  # sent once each


def test_the_private_retry_switch_it_turns_off_still_exists_in_aiohttp() -> None:
    async def probe() -> bool:
        async with aiohttp.ClientSession() as session:
            return "_retry_connection" in aiohttp.ClientSession.ATTRS and session._retry_connection

    assert asyncio.run(probe()) is True


def test_a_slow_answer_fails_after_the_timeout_with_no_answer_code() -> None:
    seen = Seen(delay=1.0)
    with server(seen) as url:
        (result,) = call(AsyncKube(configuration(url), timeout=0.2), put)
    assert isinstance(result, ClusterAPIError) and result.code == 0


def test_a_refused_connection_is_tried_again_then_fails_as_not_sent() -> None:
    """No connection was made: nothing was sent, so the writer knows nothing was applied."""
    from extender.cluster.api import NotSent
    from extender.scheduling.write.claim_writes import outcome_unknown

    seen = Seen()
    with server(seen) as url:
        pass  # closed: nothing listens on its port now
    unknown: list[str] = []
    (result,) = call(AsyncKube(configuration(url), unknown=unknown.append), put)
    assert isinstance(result, NotSent) and result.code == 0 and not outcome_unknown(result)
    assert "PUT /apis/x/c: not sent" in str(result) and CONNECT_ATTEMPTS > 1
    assert unknown == []


def test_writes_that_may_have_been_applied_are_told_by_resource() -> None:
    """No answer, or a server error, to a write: its outcome is unknown (metrics); a read's, a
    refusal's (409) or an answered write's is not."""
    unknown: list[str] = []
    status = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"
    seen = Seen()
    with server(seen) as url:
        kube = AsyncKube(configuration(url), timeout=0.3, unknown=unknown.append)

        async def run() -> None:
            for answer, delay, method, path in [
                ((200, {}), 0.0, "PUT", status),
                ((409, {"reason": "Conflict"}), 0.0, "PUT", status),
                ((500, {}), 0.0, "POST", "/api/v1/namespaces/ns/pods/p/binding"),
                ((200, {}), 1.0, "PUT", status),  # no answer in time
                ((200, {}), 1.0, "GET", status),
            ]:
                seen.answer, seen.delay = answer, delay
                with contextlib.suppress(ClusterAPIError):
                    await kube.request(method, path, body={} if method != "GET" else None)
            await kube.close()

        asyncio.run(run())
    assert unknown == ["pods/binding", "resourceclaims/status"]


def test_a_body_that_cannot_be_encoded_is_not_sent() -> None:
    from extender.cluster.api import NotSent

    deep: dict[str, Any] = {}
    for _ in range(300):
        deep = {"a": deep}
    seen = Seen()
    with server(seen) as url:
        (result,) = call(
            AsyncKube(configuration(url)), lambda kube: kube.request("PUT", "/apis/x/c", body=deep)
        )
    assert isinstance(result, NotSent) and "the body cannot be encoded" in str(result)
    assert seen.requests == []


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("pki")
    server_ca, client_ca, other_ca = trustme.CA(), trustme.CA(), trustme.CA()
    files: dict[str, Any] = {"server_ca": server_ca, "client_ca": client_ca}
    for name, ca in (("server-ca.pem", server_ca), ("other-ca.pem", other_ca)):
        ca.cert_pem.write_to_path(str(directory / name))
        files[name] = str(directory / name)
    leaf = client_ca.issue_cert("dra-extender")
    leaf.cert_chain_pems[0].write_to_path(str(directory / "client.pem"))
    leaf.private_key_pem.write_to_path(str(directory / "client-key.pem"))
    files["client.pem"], files["client-key.pem"] = (
        str(directory / "client.pem"),
        str(directory / "client-key.pem"),
    )
    return files


def tls_server_context(pki: dict[str, Any], hostname: str, client_certs: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    pki["server_ca"].issue_cert(hostname).configure_cert(context)
    if client_certs:
        pki["client_ca"].configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def test_tls_trusts_the_configured_ca_and_presents_the_client_certificate(pki: dict[str, Any]) -> None:
    seen = Seen()
    with server(seen, tls_server_context(pki, "127.0.0.1", client_certs=True)) as url:
        config = configuration(
            url, ssl_ca_cert=pki["server-ca.pem"], cert_file=pki["client.pem"], key_file=pki["client-key.pem"]
        )
        assert call(AsyncKube(config), get) == [{"metadata": {"name": "c"}}]


@pytest.mark.parametrize(
    ("settings", "answered"),
    [
        ({"ssl_ca_cert": "other-ca.pem"}, False),
        ({"ssl_ca_cert": "other-ca.pem", "verify_ssl": False}, True),
        ({"ssl_ca_cert": "server-ca.pem", "tls_server_name": "kubernetes.default.svc"}, True),
        ({"ssl_ca_cert": "server-ca.pem"}, False),
    ],
    ids=["unknown-ca-refused", "verify-off", "tls-server-name-checked", "name-mismatch-refused"],
)
def test_tls_verification_follows_the_configuration(
    pki: dict[str, Any], settings: dict[str, Any], answered: bool
) -> None:
    seen = Seen()
    # The server's certificate names kubernetes.default.svc only (as an in-cluster API server's).
    with server(seen, tls_server_context(pki, "kubernetes.default.svc", client_certs=False)) as url:
        resolved = {k: (pki[v] if k == "ssl_ca_cert" else v) for k, v in settings.items()}
        (result,) = call(AsyncKube(configuration(url, **resolved)), get)
    if answered:
        assert result == {"metadata": {"name": "c"}}
    else:
        assert isinstance(result, ClusterAPIError) and result.code == 0 and seen.requests == []


def test_a_pool_made_on_a_closed_loop_is_replaced_on_the_next_loop(tmp_path: Path) -> None:
    seen = Seen()
    with server(seen) as url:
        kube = AsyncKube(configuration(url))
        assert asyncio.run(get(kube)) == {"metadata": {"name": "c"}}  # leaves its pool behind
        assert asyncio.run(get(kube)) == {"metadata": {"name": "c"}}
        asyncio.run(kube.close())
    assert len(seen.requests) == 2


def test_a_write_the_fence_refuses_is_not_sent_and_says_so() -> None:
    """The fence (leader election) is checked right before each write: a lapsed lease sends
    nothing, and the error says the outcome is known (not sent), unlike a lost answer."""
    from extender.cluster.api import NotLeading
    from extender.scheduling.write.claim_writes import outcome_unknown

    seen = Seen()
    why: list[str | None] = [None]
    with server(seen) as url:
        kube = AsyncKube(configuration(url), fence=lambda: why[0])

        async def run() -> list[Any]:
            out: list[Any] = [await put(kube)]
            why[0] = "this replica does not hold the Lease"
            for call_ in (put, get):
                try:
                    out.append(await call_(kube))
                except NotLeading as exc:
                    out.append(exc)
            await kube.close()
            return out

        first, fenced, read = asyncio.run(run())
    assert first == {"metadata": {"name": "c"}}
    assert isinstance(fenced, NotLeading) and "not sent: this replica does not hold the Lease" in str(fenced)
    assert not outcome_unknown(fenced)
    assert read == {"metadata": {"name": "c"}}  # reads are never fenced
    assert [m for m, *_ in seen.requests] == ["PUT", "GET"]


@pytest.mark.parametrize(
    ("api_timeout", "sent"), [(30.0, "10000ms"), (10.0, "10000ms"), (1.5, "1500ms"), (0.00001, "1ms")]
)
def test_the_write_deadline_is_a_duration_go_parses(api_timeout: float, sent: str) -> None:
    """kube-apiserver answers 400 to a ``timeout`` that time.ParseDuration cannot read ("1e-05s")."""
    from extender.cluster.async_kube import write_deadline

    assert write_deadline(api_timeout) == sent


def test_after_close_no_write_is_sent_but_reads_still_work() -> None:
    """Shutdown closes the client, then waits out its write window before releasing the Lease:
    a write after close (a bind still finishing) must not open a new pool and be sent."""
    from extender.cluster.api import NotSent

    seen = Seen()
    with server(seen) as url:
        kube = AsyncKube(configuration(url))

        async def run() -> tuple[Any, Any]:
            await kube.close()
            try:
                wrote: Any = await put(kube)
            except NotSent as exc:
                wrote = exc
            read = await get(kube)
            await kube.close()
            return wrote, read

        wrote, read = asyncio.run(run())
    assert isinstance(wrote, NotSent) and "closed" in str(wrote)
    assert read == {"metadata": {"name": "c"}}
    assert [m for m, *_ in seen.requests] == ["GET"]


def test_every_sent_request_is_observed_once_with_its_code_and_nothing_unsent_is() -> None:
    """The API request metrics: the answer's status, ``<error>`` for no answer, and a write the
    fence keeps back is not a request at all."""
    observed: list[tuple[str, str, str]] = []
    why: list[str | None] = [None]

    def observe(verb: str, resource: str, code: str, seconds: float) -> None:
        assert seconds >= 0
        observed.append((verb, resource, code))

    status = "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c/status"
    seen = Seen()
    with server(seen) as url:
        kube = AsyncKube(configuration(url), timeout=0.3, fence=lambda: why[0], observe=observe)

        async def run() -> None:
            await kube.request("PUT", status, body={})
            seen.answer = (409, {"kind": "Status", "reason": "Conflict", "message": "stale"})
            with contextlib.suppress(ClusterAPIError):
                await kube.request("PUT", status, body={})
            seen.answer, seen.delay = (200, {}), 1.0
            with contextlib.suppress(ClusterAPIError):
                await kube.request("GET", "/api/v1/namespaces/ns/pods/p")
            seen.delay, why[0] = 0.0, "not the leader"
            with contextlib.suppress(ClusterAPIError):
                await kube.request("POST", "/api/v1/namespaces/ns/pods/p/binding", body={})
            await kube.close()

        asyncio.run(run())
    assert observed == [
        ("update", "resourceclaims/status", "200"),
        ("update", "resourceclaims/status", "409"),
        ("get", "pods", "<error>"),
    ]


def test_the_thread_transport_observes_its_requests_the_same_way() -> None:
    from extender.cluster.kube import RawKube

    observed: list[tuple[str, str, str]] = []
    seen = Seen(answer=(200, {"kind": "List", "items": []}))
    with server(seen) as url:
        raw = RawKube(
            k8s.ApiClient(configuration(url)), observe=lambda v, r, c, s: observed.append((v, r, c))
        )
        raw.request("GET", "/apis/resource.k8s.io/v1/resourceslices", query={"limit": 500})
        seen.answer = (404, {"kind": "Status", "reason": "NotFound"})
        with contextlib.suppress(ClusterAPIError):
            raw.request("GET", "/apis/scheduling.k8s.io")
    raw.api_client = k8s.ApiClient(configuration(url))  # a new pool: nothing listens there now
    with contextlib.suppress(ClusterAPIError):
        raw.request("PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", body={}, timeout=0.5)
    assert observed == [
        ("list", "resourceslices", "200"),
        ("get", "discovery", "404"),
        ("update", "leases", "<error>"),
    ]


def test_a_configured_proxy_gets_the_requests_in_absolute_form() -> None:
    """With a proxy (a kubeconfig's proxy-url) requests go through it, by aiohttp; without one
    they go straight to the API server on the kept-alive connections."""
    seen = Seen()
    with server(seen) as proxy:
        kube = AsyncKube(configuration("http://apiserver.invalid:6443", proxy=proxy))
        (result,) = call(kube, put)
    assert result == {"metadata": {"name": "c"}}
    assert [(m, p) for m, p, *_ in seen.requests] == [
        ("PUT", "http://apiserver.invalid:6443/apis/x/c?timeout=10000ms")
    ]


def test_requests_carry_the_host_and_the_headers_aiohttp_sent() -> None:
    seen = Seen()
    with server(seen) as url:
        call(AsyncKube(configuration(url)), put, get)
    (_, _, put_headers, body), (_, _, get_headers, _) = seen.requests
    port = url.rsplit(":", 1)[1]
    for headers in (put_headers, get_headers):
        assert headers["host"] == f"127.0.0.1:{port}"
        assert headers["user-agent"] == "dra-extender" and headers["accept"] == "application/json"
    assert put_headers["content-type"] == "application/json"
    assert int(put_headers["content-length"]) == len(body) > 0
    assert "content-length" not in get_headers
