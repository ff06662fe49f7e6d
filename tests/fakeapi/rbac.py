"""What kube-apiserver's authorizer sees of a request, and whether RBAC rules grant it.

:meth:`Request.of` reads a request as kube-apiserver's RequestInfo does (the API group, the
resource with its subresource, the verb, the namespace and the name; None for a non-resource
request such as discovery or ``/version``, which every authenticated client may make).
:func:`allows` matches it against Role and ClusterRole rules as RBAC does (``*`` for any,
``resourceNames`` only for requests that name an object). :func:`forbidden` says what the API
server's 403 says when nothing allows it. The fake API server authorizes the people it knows
this way (:meth:`tests.fakeapi.server.FakeApiServer.person`); tests/deploy/test_rbac.py checks
the extender's own calls with the same reading.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: HTTP method -> verb, for a request that names an object (a collection: list, watch,
#: deletecollection).
VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True, order=True)
class Request:
    group: str
    #: ``pods``, or with the subresource: ``pods/binding``, ``services/proxy``.
    resource: str
    verb: str
    namespace: str = ""
    name: str = ""

    @classmethod
    def of(cls, method: str, target: str) -> Request | None:
        """``method target`` (path and query) as the authorizer sees it; None: not a resource
        request (``/api``, ``/apis/GROUP[/VERSION]``, ``/version``)."""
        parsed = urllib.parse.urlsplit(target)
        parts = [p for p in parsed.path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) > 2:
            group, rest = "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) > 3:
            group, rest = parts[1], parts[3:]
        else:
            return None
        namespace = ""
        if rest[0] == "namespaces" and len(rest) > 2:
            namespace, rest = rest[1], rest[2:]
        name = rest[1] if len(rest) > 1 else ""
        resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
        if name:
            verb = VERBS[method]
        elif method == "GET":
            query = dict(urllib.parse.parse_qsl(parsed.query))
            verb = "watch" if query.get("watch", "").lower() in ("1", "true") else "list"
        else:
            verb = {"DELETE": "deletecollection"}.get(method, VERBS[method])
        return cls(group, resource, verb, namespace, name)


def _any(listed: Iterable[str] | None, value: str) -> bool:
    listed = list(listed or ())
    return "*" in listed or value in listed


def allows(rules: Iterable[tuple[dict[str, Any], str]], request: Request) -> bool:
    """Whether any of ``rules`` grants ``request``: (rule, namespace) pairs, the namespace a
    RoleBinding's ('' for a ClusterRoleBinding's rules, which hold everywhere)."""
    for rule, scope in rules:
        if scope and scope != request.namespace:
            continue
        names = rule.get("resourceNames")
        if (
            _any(rule.get("apiGroups"), request.group)
            and _any(rule.get("resources"), request.resource)
            and _any(rule.get("verbs"), request.verb)
            and (not names or request.name in names)
        ):
            return True
    return False


def bound(*roles: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The rules of ``roles`` (Role and ClusterRole objects, as in manifests/) bound to one
    person: a ClusterRole everywhere, a Role in its own namespace."""
    return [
        (rule, role["metadata"].get("namespace", "") if role["kind"] == "Role" else "")
        for role in roles
        for rule in role.get("rules") or []
    ]


def forbidden(user: str, request: Request) -> tuple[str, dict[str, str]]:
    """The message and details of kube-apiserver's 403 (responsewriters.Forbidden, reason
    Forbidden): the group-qualified resource, the name asked for (``SERVICE:PORT`` for the
    service proxy), and what the user may not do."""
    resource, _, _ = request.resource.partition("/")
    qualified = f"{resource}.{request.group}" if request.group else resource
    named = f'{qualified} "{request.name}"' if request.name else qualified
    where = f'in the namespace "{request.namespace}"' if request.namespace else "at the cluster scope"
    message = (
        f'{named} is forbidden: User "{user}" cannot {request.verb} resource "{request.resource}" '
        f'in API group "{request.group}" {where}'
    )
    details = {"name": request.name, "group": request.group, "kind": resource}
    return message, {k: v for k, v in details.items() if v}  # Go's omitempty
