"""``dra-extender explain NAMESPACE/POD``: why a pod fits on no node, and what would free room.

Asks a running extender (``GET /debug/pods/NAMESPACE/NAME`` on its verbs listener, with TLS
client settings when it requires them), or answers offline from state files with the same
code the endpoint runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import requests

from extender.allocator.features import Features
from extender.allocator.releases import Release
from extender.defaults import DEFAULT_MAX_STATE_BYTES
from extender.defaults import DEFAULT_SERVER as DEFAULT_SERVER
from extender.scheduling.engine import Engine
from extender.service import debug
from extender.service.runtime import ServeConfig, build_embedded
from extender.statefile import StateFileError


class ExplainError(Exception):
    """The pod is unknown, the extender cannot be reached, or the state cannot be read."""


@dataclass(frozen=True, slots=True)
class TlsClient:
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None


def split_pod(text: str) -> tuple[str, str]:
    namespace, _, name = text.rpartition("/")
    if not name:
        raise ExplainError(f"expected NAMESPACE/NAME or NAME, got {text!r}")
    return namespace or "default", name


def from_server(server: str, pod: str, tls: TlsClient, timeout: float = 30.0) -> dict[str, Any]:
    namespace, name = split_pod(pod)
    url = f"{server.rstrip('/')}/debug/pods/{namespace}/{name}"
    cert = (tls.cert_file, tls.key_file) if tls.cert_file and tls.key_file else tls.cert_file
    try:
        answer = requests.get(url, timeout=timeout, verify=tls.ca_file or True, cert=cert)
    except requests.exceptions.SSLError as exc:
        raise ExplainError(f"{server}: TLS failed (--ca-file, --cert-file, --key-file): {exc}") from None
    except requests.ConnectionError:
        raise ExplainError(
            f"{server}: no dra-extender answers there (is it running? --server names its verbs listener, "
            "by default http://127.0.0.1:8888)"
        ) from None
    except requests.Timeout:
        raise ExplainError(f"{url}: no answer within {timeout:g} s") from None
    except requests.RequestException as exc:
        raise ExplainError(f"{url}: {exc}") from None
    try:
        body = orjson.loads(answer.content)
    except orjson.JSONDecodeError:
        raise ExplainError(f"{url}: HTTP {answer.status_code}, not a JSON answer") from None
    if answer.status_code != 200:
        message = body.get("Error") if isinstance(body, dict) else None
        raise ExplainError(f"{url}: HTTP {answer.status_code}: {message or body}")
    if not isinstance(body, dict) or not isinstance(body.get("nodes"), dict):
        raise ExplainError(f"{url}: not a pod explanation")
    return body


def engine_from_state(
    paths: Sequence[str],
    max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
    release: Release | None = None,
    features: Features | None = None,
) -> Engine:
    """An engine deciding on the state files as the extender would, as ``release`` (default:
    the extender's default release) with ``features`` (default: that release's gate defaults)."""
    config = ServeConfig(max_state_bytes=max_state_bytes)
    if release is not None or features is not None:
        release = release or config.engine.release
        deciding = dataclasses.replace(
            config.engine, release=release, features=features or Features.from_gates({}, release)
        )
        config = dataclasses.replace(config, engine=deciding)
    try:
        service, _store = build_embedded(list(paths), config)
    except StateFileError as exc:
        raise ExplainError(str(exc)) from None
    return service.engine


def from_state(
    paths: Sequence[str],
    pod: str,
    max_state_bytes: int = DEFAULT_MAX_STATE_BYTES,
    release: Release | None = None,
) -> dict[str, Any]:
    """Offline: the state files' pod explained as the extender would answer now
    (:func:`engine_from_state`)."""
    namespace, name = split_pod(pod)
    engine = engine_from_state(paths, max_state_bytes, release)
    found = engine.state.pods.get((namespace, name))
    if found is None:
        raise ExplainError(f"pod {namespace}/{name} not found in the state")
    return debug.pod(engine, found)


def fits_somewhere(explained: dict[str, Any]) -> bool:
    return "boundTo" in explained or any(node.get("fits") for node in explained["nodes"].values())


def render(explained: dict[str, Any], output: str) -> str:
    if output == "json":
        return orjson.dumps(explained, option=orjson.OPT_INDENT_2).decode() + "\n"
    return debug.render_text("pod", explained)
