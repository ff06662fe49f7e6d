"""The verbs served straight from ASGI: the same :class:`~extender.service.app.Verbs` handlers as
the FastAPI routes, without the framework's per-request layers.

Under a real kube-scheduler 1.36 (100 nodes x 8 GPUs, 800 pods) the extender spent about a
fifth of its CPU in FastAPI's and Starlette's middleware, routing and dependency solving for
three small POSTs per pod, on a machine whose two cores kube-apiserver, etcd and kube-scheduler
share. Everything else (probes, metrics, debug views, 404/405 answers, other methods on the
verbs' paths) still goes through FastAPI.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from extender.service import wire
from extender.service.app import BodyTooLarge, BodyTooSlow, Verbs, read_limited

log = logging.getLogger("dra_extender.http")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class ClientGone(Exception):
    pass


async def _chunks(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


class FastVerbs:
    """ASGI: POSTs to ``<prefix>/{filter,prioritize,bind,preempt}`` answered by ``verbs``,
    everything else by ``app``."""

    def __init__(self, app: App, verbs: Verbs, prefix: str) -> None:
        self.app = app
        self.verbs = verbs
        self.paths = {f"{prefix}/{name}": name for name in Verbs.NAMES}

    # The verbs' listener's own HTTP (extender/service/verbs_http.py) asks these directly.
    def verb_of(self, path: str) -> str | None:
        return self.paths.get(path)

    def body_limit(self, verb: str) -> int:
        return self.verbs.body_limit(verb)

    def body_refused(self, verb: str, exc: Exception, peer: str | None) -> tuple[int, bytes]:
        return self.verbs.body_refused(verb, exc, peer)

    def answer(self, verb: str, body: bytes, peer: str | None) -> Awaitable[tuple[int, bytes]]:
        return self.verbs.handle(verb, body, peer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        verb = self.paths.get(scope.get("path", "")) if scope["type"] == "http" else None
        if verb is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        peer = client[0] if client else None
        declared = next(
            (v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"content-length"), None
        )
        try:
            body = await read_limited(_chunks(receive), declared, self.verbs.body_limit(verb))
        except ClientGone:
            return
        except (BodyTooLarge, BodyTooSlow) as exc:
            status, payload = self.verbs.body_refused(verb, exc, peer)
        else:
            try:
                status, payload = await self.verbs.handle(verb, body, peer)
            except Exception:  # as FastAPI's ServerErrorMiddleware: a 500, the detail in the log
                log.exception("%s request failed", verb)
                status, payload = 500, wire.encode({"Error": "internal error (see the extender's log)"})
        await respond(send, status, payload)


async def respond(send: Send, status: int, payload: bytes) -> None:
    """A JSON answer of known length, in two ASGI messages."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))],
        }
    )
    await send({"type": "http.response.body", "body": payload})
