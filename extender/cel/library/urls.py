"""The K8s ``url`` CEL library (Go ``url.ParseRequestURI`` acceptance, ``url.Parse`` accessors)."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry, parses
from extender.cel.values import CelObject, no_such_overload

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class URL(CelObject):
    __slots__ = ("parts", "text")
    cel_type_name = "kubernetes.URL"

    def __init__(self, text: str, parts: urllib.parse.SplitResult) -> None:
        self.text = text
        self.parts = parts

    def __repr__(self) -> str:
        return f"url({self.text!r})"

    def __hash__(self) -> int:
        return hash(self.text)

    def cel_equals(self, other: Any) -> bool:
        if not isinstance(other, URL):
            raise no_such_overload()
        return self.text == other.text


def parse_request_uri(text: str) -> URL:
    if not text:
        raise ValueError("empty url")
    if not (text.startswith("/") or _SCHEME.match(text)):
        raise ValueError(f"parse {text!r}: invalid URI for request")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError(f"parse {text!r}: net/url: invalid control character in URL")
    parts = urllib.parse.urlsplit(text)
    if parts.port is None and ":" in parts.netloc.rsplit("@", 1)[-1].rsplit("]", 1)[-1]:
        port_text = parts.netloc.rsplit(":", 1)[-1]
        if port_text and not port_text.isdigit():
            raise ValueError(f"parse {text!r}: invalid port {':' + port_text!r} after host")
    return URL(text, parts)


def _url(text: str) -> URL:
    try:
        return parse_request_uri(text)
    except ValueError as exc:
        raise CelEvalError(f"URL parse error during conversion from string: {exc}") from None


def _host(u: URL) -> str:
    netloc = u.parts.netloc
    return netloc.rsplit("@", 1)[-1]


def _hostname(u: URL) -> str:
    host = _host(u)
    if host.startswith("["):
        return host[1 : host.index("]")] if "]" in host else host[1:]
    return host.rsplit(":", 1)[0] if ":" in host else host


def _port(u: URL) -> str:
    host = _host(u)
    if host.startswith("["):
        rest = host[host.index("]") + 1 :] if "]" in host else ""
        return rest[1:] if rest.startswith(":") else ""
    return host.rsplit(":", 1)[1] if ":" in host else ""


def _query(u: URL) -> dict[str, list[str]]:
    return {k: list(v) for k, v in urllib.parse.parse_qs(u.parts.query, keep_blank_values=True).items()}


def register(reg: Registry) -> None:
    S, U = t.STRING, t.URL
    reg.register_object(URL, U)
    reg.add("url", "string_to_url", (S,), U, _url)
    reg.add("isURL", "is_url_string", (S,), t.BOOL, parses(parse_request_uri))
    reg.add("getScheme", "url_get_scheme", (U,), S, lambda u: u.parts.scheme, member=True)
    reg.add("getHost", "url_get_host", (U,), S, _host, member=True)
    reg.add("getHostname", "url_get_hostname", (U,), S, _hostname, member=True)
    reg.add("getPort", "url_get_port", (U,), S, _port, member=True)
    reg.add(
        "getEscapedPath",
        "url_get_escaped_path",
        (U,),
        S,
        lambda u: urllib.parse.quote(urllib.parse.unquote(u.parts.path), safe="/:@!$&'()*+,;=-._~"),
        member=True,
    )
    reg.add("getQuery", "url_get_query", (U,), t.map_of(S, t.list_of(S)), _query, member=True)
