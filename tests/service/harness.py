"""A service on the example state, in process, reachable through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from extender.cluster.memstore import MemoryStore
from extender.service.app import Service, create_app
from extender.service.runtime import ServeConfig, build_embedded
from tests.shared import REPO

T = TypeVar("T")


@dataclass
class Running:
    service: Service
    store: MemoryStore
    client: httpx.AsyncClient


def run_with_service(
    body: Callable[[Running], Awaitable[T]], config: ServeConfig | None = None, paths: list[str] | None = None
) -> T:
    async def main() -> T:
        service, store = build_embedded(paths or [str(REPO / "examples")], config or ServeConfig())
        app = create_app(
            service,
            prefix=(config or ServeConfig()).prefix,
            max_body_bytes=(config or ServeConfig()).max_body_bytes,
        )
        try:
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://extender"
            ) as client:
                return await body(Running(service, store, client))
        finally:
            service.worker.stop()  # ASGITransport runs no lifespan: shut the engine down here

    return asyncio.run(main())


def claim_status(store: MemoryStore, name: str, namespace: str = "default") -> dict[str, Any]:
    status: dict[str, Any] = store.get("ResourceClaim", namespace, name).get("status") or {}
    return status
