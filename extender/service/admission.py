"""How many requests of each kind the verbs' listener serves at once.

kube-scheduler binds asynchronously, one goroutine per pod, while its scheduling loop goes on
calling filter and prioritize. Each bind holds a request open for the length of its API writes,
and Go's transport keeps only two idle connections per host, so a burst of binds opens dozens
of connections. One shared limit then answered *filter* with 503 because binds were in flight
(measured with a real kube-scheduler 1.36: 34 of 800 pods failed a scheduling attempt so).
Binds and everything else therefore have separate limits here; uvicorn's own limit counts
connections only, against floods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class Counter:
    name: str
    limit: int
    in_flight: int = 0


class Admission:
    """ASGI middleware: at most ``max_binds`` binds and ``max_requests`` other HTTP requests at
    once; one more of a kind is answered 503 with the verbs' ``{"Error"}`` body, and nothing of
    the other kind is affected."""

    def __init__(
        self,
        app: App,
        *,
        bind_path: str,
        max_binds: int,
        max_requests: int,
        verbs: frozenset[str] = frozenset(),
        fence: Callable[[], str | None] | None = None,
    ) -> None:
        self.app = app
        self.bind_path = bind_path
        self.binds = Counter("binds", max_binds)
        self.requests = Counter("requests", max_requests)
        #: The verbs' paths, and why this replica may not decide now (leader election): then a
        #: verb is answered 503 and its connection closed, so kube-scheduler's next request
        #: opens a new one (through the Service, to the leader) instead of reusing this one.
        self.verbs = verbs
        self.fence = fence

    def counter(self, path: str) -> Counter:
        return self.binds if path == self.bind_path else self.requests

    def refusal(self, path: str) -> Refusal | None:
        """Why a request on ``path`` is answered 503 now (None: it is served; count it in
        :meth:`counter` while it is)."""
        if self.fence is not None and path in self.verbs:
            why = self.fence()
            if why is not None:
                body = orjson.dumps({"Error": f"this dra-extender replica does not decide now: {why}"})
                return Refusal(body, ((b"connection", b"close"),), close=True)
        counter = self.counter(path)
        if counter.in_flight >= counter.limit:
            body = b'{"Error":"too many %s in flight (limit %d); retry later"}' % (
                counter.name.encode(),
                counter.limit,
            )
            return Refusal(body, ((b"retry-after", b"1"),), close=False)
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path") or ""
        refusal = self.refusal(path)
        if refusal is not None:
            headers = [(b"content-type", b"application/json"), *refusal.headers]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": refusal.body})
            return
        counter = self.counter(path)
        counter.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            counter.in_flight -= 1


@dataclass(frozen=True)
class Refusal:
    """A 503: its JSON body, its headers beside the content type, and whether the connection
    is closed after it (a replica that does not decide sends kube-scheduler elsewhere)."""

    body: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    close: bool
