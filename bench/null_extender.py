"""The floor of ``bench.realcluster_bench``: an extender that decides nothing.

filter passes every node it is sent, prioritize scores every node 0, bind writes only the
pod's Binding. It is served by the same stack as ``dra-extender serve`` (uvicorn on uvloop with
the verbs' own HTTP, extender/service/verbs_http.py; the same listener settings and admission
limits) and writes through the same API client
(:class:`~extender.cluster.async_kube.AsyncKube`), so what it costs kube-scheduler, the API
server and itself is what the extender protocol costs before any decision: the bench's third
mode, beside the in-tree plugin and the extender.

Run: ``python -m bench.null_extender --kubeconfig FILE --port 0 --ops-port 0``; it prints the
same start-up line as the extender.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import msgspec
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from extender.cluster.api import ClusterAPIError
from extender.cluster.async_kube import AsyncKube
from extender.service import wire
from extender.service.app import BodyTooLarge
from extender.service.fast_verbs import respond
from extender.service.listeners import Limits, Listener, run, serve

PREFIX = "/scheduler"
VERBS = frozenset(("filter", "prioritize", "bind"))


class _Names(msgspec.Struct):
    NodeNames: list[str] | None = None


_names = msgspec.json.Decoder(_Names)
_binding = msgspec.json.Decoder(wire.ExtenderBindingArgs)
_encode = msgspec.json.Encoder().encode


class NullVerbs:
    """ASGI: the verbs answered without deciding; ``/readyz`` and ``/healthz`` answer ok."""

    def __init__(self, api: AsyncKube) -> None:
        self.api = api

    # The verbs' listener's own HTTP (extender/service/verbs_http.py) serves the verbs through
    # these, as it serves the extender's.
    def verb_of(self, path: str) -> str | None:
        verb = path.removeprefix(f"{PREFIX}/")
        return verb if verb in VERBS and path.startswith(PREFIX) else None

    def body_limit(self, verb: str) -> int:
        return 64 * 1024 * 1024

    def body_refused(self, verb: str, exc: Exception, peer: str | None) -> tuple[int, bytes]:
        if isinstance(exc, BodyTooLarge):
            return 413, _encode({"Error": "request body too large"})
        return 408, _encode({"Error": "request body not received in time"})

    async def answer(self, verb: str, body: bytes, peer: str | None) -> tuple[int, bytes]:
        return await self.answer_path(f"{PREFIX}/{verb}", body)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await self.api.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        status, payload = await self.answer_path(scope.get("path", ""), body)
        await respond(send, status, payload)

    async def answer_path(self, path: str, body: bytes) -> tuple[int, bytes]:
        if path == f"{PREFIX}/filter":
            names = _names.decode(body).NodeNames or []
            return 200, _encode(
                {"NodeNames": names, "FailedNodes": {}, "FailedAndUnresolvableNodes": {}, "Error": ""}
            )
        if path == f"{PREFIX}/prioritize":
            names = _names.decode(body).NodeNames or []
            return 200, _encode([{"Host": name, "Score": 0} for name in names])
        if path == f"{PREFIX}/bind":
            args = _binding.decode(body)
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": args.PodName, "namespace": args.PodNamespace, "uid": args.PodUID},
                "target": {"apiVersion": "v1", "kind": "Node", "name": args.Node},
            }
            try:
                await self.api.request(
                    "POST",
                    f"/api/v1/namespaces/{args.PodNamespace}/pods/{args.PodName}/binding",
                    body=binding,
                )
            except ClusterAPIError as exc:
                return 200, _encode({"Error": str(exc)})
            return 200, _encode({"Error": ""})
        if path in ("/readyz", "/healthz"):
            return 200, b"ok\n"
        return 404, _encode({"Error": f"no such endpoint: {path}"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ops-port", type=int, default=0)
    parser.add_argument("--ops-host", default="127.0.0.1")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(config_file=args.kubeconfig, client_configuration=configuration)
    app = NullVerbs(AsyncKube(configuration))
    run(
        serve(
            app,
            app,
            Listener("127.0.0.1", args.port),
            Listener(args.ops_host, args.ops_port),
            Limits(),
            PREFIX,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
