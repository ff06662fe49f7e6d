"""The bind path's API transport: CPU per claim PUT through each client, in one process.

Run: ``python -m bench.api_client_bench`` (``--requests``, ``--rounds``).

Against the project's fake API server (in this process, so its handling is in every number
alike), each round sends ``--requests`` PUTs of one ResourceClaim through:

* ``thread``: the official client's urllib3 in a thread pool, awaited from the loop (what the
  bind path did before ``extender/cluster/async_kube.py``);
* ``kubernetes.aio``: the official async client (``call_api`` with ``_preload_content=False``);
* ``aiohttp``: aiohttp's client session (the bind path's transport until issue 54; AsyncKube
  still uses it through a proxy);
* ``kept-alive``: :class:`extender.cluster.async_kube.AsyncKube`, the bind path's transport now
  (extender/cluster/keepalive.py).

Rounds are interleaved; the report is CPU and wall time per request, per round.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
from kubernetes import client as k8s
from kubernetes.aio import client as aio

from extender.cluster.async_kube import AsyncKube
from extender.cluster.kube import KubeAPI, Paths, RawKube, bounded_retries
from tests.fakeapi.server import FakeApiServer

CLAIM = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "default"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
}


async def measure(requests: int, rounds: int) -> None:
    with FakeApiServer() as fake:
        config = k8s.Configuration()
        config.host = fake.url
        threaded = KubeAPIInThreads(RawKube(k8s.ApiClient(bounded_retries(config))))
        created = await threaded.create_claim(CLAIM)
        path = Paths("v1").claim("default", "c")
        aio_config = aio.Configuration()
        aio_config.host = fake.url
        official = aio.ApiClient(aio_config)
        ours = AsyncKube(config)

        async def via_aio(claim: dict[str, Any]) -> dict[str, Any]:
            answer = await official.call_api(
                path,
                "PUT",
                header_params={"Content-Type": "application/json", "Accept": "application/json"},
                body=claim,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=30,
            )
            result: dict[str, Any] = orjson.loads(await answer.read())
            return result

        session = aiohttp.ClientSession(headers={"Accept": "application/json"}, trust_env=False)

        async def via_aiohttp(claim: dict[str, Any]) -> dict[str, Any]:
            async with session.put(
                fake.url + path, data=orjson.dumps(claim), headers={"Content-Type": "application/json"}
            ) as answer:
                result: dict[str, Any] = orjson.loads(await answer.read())
            return result

        async def kept_alive(claim: dict[str, Any]) -> dict[str, Any]:
            result: dict[str, Any] = await ours.request("PUT", path, body=claim)
            return result

        clients: dict[str, Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]] = {
            "thread (urllib3)": threaded.update_claim,
            "kubernetes.aio": via_aio,
            "aiohttp": via_aiohttp,
            "kept-alive (AsyncKube)": kept_alive,
        }
        try:
            for round_ in range(rounds):
                for label, put in clients.items():
                    claim = created
                    cpu, wall = time.process_time(), time.perf_counter()
                    for _ in range(requests):
                        claim = await put(claim)
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                    print(
                        f"round {round_ + 1}  {label:22s} cpu {cpu / requests * 1e3:6.3f} ms/request  "
                        f"wall {wall / requests * 1e3:6.3f} ms/request"
                    )
        finally:
            await official.close()
            await session.close()
            await ours.close()


class KubeAPIInThreads(KubeAPI):
    """The former bind path: the official client's urllib3 pool, blocking calls in threads."""

    def __init__(self, raw: RawKube) -> None:
        super().__init__(AsyncKube(raw.api_client.configuration), Paths("v1"))
        self.raw = raw

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        return await asyncio.to_thread(lambda: self.raw.request(method, path, **kw))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(measure(args.requests, args.rounds))


if __name__ == "__main__":
    main()
