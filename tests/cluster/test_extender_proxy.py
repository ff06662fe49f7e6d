"""extender/cluster/extender_proxy.py: naming the extender's Service, and what each answer through
the API server's service proxy means (each case seen from the real kube-apiserver in
tests/realcluster/test_kubectl_dra.py; here the answers are replayed to name every branch)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from extender.cluster.api import ClusterAPIError, api_error
from extender.cluster.extender_proxy import (
    ACTIVE_ATTEMPTS,
    ExtenderService,
    NotReachable,
    Replica,
    ViewRefused,
    ask,
)
from extender.defaults import LAST_DECISION_HEADER, REPLICA_HEADER

SERVICES = {
    "a port by name": (
        "dra-extender/dra-extender-scheduler:metrics",
        ("dra-extender", "dra-extender-scheduler", "metrics"),
    ),
    "a port by number": ("ns/svc:8889", ("ns", "svc", "8889")),
}


@pytest.mark.parametrize(("text", "parts"), SERVICES.values(), ids=SERVICES.keys())
def test_a_service_is_named_namespace_slash_name_colon_port(text: str, parts: tuple[str, str, str]) -> None:
    service = ExtenderService.parse(text)
    assert (service.namespace, service.name, service.port) == parts
    assert str(service) == text
    assert (
        service.path("ui") == f"/api/v1/namespaces/{parts[0]}/services/{parts[1]}:{parts[2]}/proxy/debug/ui"
    )


NOT_SERVICES = {
    "no port": "ns/svc",
    "no namespace": "svc:metrics",
    "a path in the name": "ns/svc/x:metrics",
    "capitals": "NS/svc:metrics",
    "a query smuggled in": "ns/svc:metrics?x=1",
    "empty": "",
}


@pytest.mark.parametrize("text", NOT_SERVICES.values(), ids=NOT_SERVICES.keys())
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="NAMESPACE/SERVICE:PORT"):
        ExtenderService.parse(text)


class Opened:
    """What ``RawKube.open_get`` gives: headers now, the body when read (or never, if closed)."""

    def __init__(self, body: Any, headers: dict[str, str], log: list[str]) -> None:
        self.body, self.headers, self.log = body, headers, log

    def json(self) -> Any:
        self.log.append("read")
        if isinstance(self.body, Exception):
            raise self.body
        return self.body

    def close(self) -> None:
        self.log.append("closed")


class Answers:
    """A RawKube stand-in that answers each GET with the next of ``answers``: an error to raise,
    a :class:`Replied`, or a body from an active replica; recording the paths asked and which
    bodies were read."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any] | None]] = []
        self.bodies: list[str] = []

    def open_get(self, path: str, *, query: dict[str, Any] | None = None) -> Opened:
        self.asked.append((path, query))
        answer = self.answers.pop(0)
        if isinstance(answer, ClusterAPIError):
            raise answer
        if isinstance(answer, Replied):
            return Opened(answer.body, answer.headers, self.bodies)
        return Opened(
            answer, {REPLICA_HEADER.lower(): "active", LAST_DECISION_HEADER.lower(): "0.5"}, self.bodies
        )


class Replied:
    def __init__(self, body: Any, replica: str | None, last_decision: str = "never") -> None:
        self.body = body
        self.headers = (
            {}
            if replica is None
            else {REPLICA_HEADER.lower(): replica, LAST_DECISION_HEADER.lower(): last_decision}
        )


def status(code: int, message: str) -> ClusterAPIError:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    return api_error(code, "", orjson.dumps(body))


def extender_error(code: int, message: str) -> ClusterAPIError:
    return api_error(code, "", orjson.dumps({"Error": message}))


SERVICE = ExtenderService("dra-extender", "dra-extender-scheduler", "metrics")

FAILURES = {
    "no right to proxy": (
        status(403, 'services "dra-extender-scheduler:metrics" is forbidden'),
        NotReachable,
        "dra-extender-debug Role",
    ),
    "no such Service": (
        status(404, 'services "dra-extender-scheduler" not found'),
        NotReachable,
        "no Service",
    ),
    "no ready endpoint": (
        status(503, 'no endpoints available for service "dra-extender-scheduler:metrics"'),
        NotReachable,
        "no ready endpoint",
    ),
    "an extender without --ops-debug": (
        extender_error(404, "no such endpoint: GET /debug/snapshot"),
        NotReachable,
        "without --ops-debug",
    ),
    "a pod the extender does not know": (
        extender_error(404, "pod default/p not found"),
        ViewRefused,
        "not found",
    ),
    "a query the extender refuses": (
        extender_error(400, "count must be a positive integer"),
        ViewRefused,
        "count",
    ),
}


@pytest.mark.parametrize(("error", "kind", "said"), FAILURES.values(), ids=FAILURES.keys())
def test_each_failure_says_which_it_was(error: ClusterAPIError, kind: type[Exception], said: str) -> None:
    with pytest.raises(kind, match=said):
        ask(Answers(error), SERVICE, "snapshot")  # type: ignore[arg-type]


def test_no_answer_at_all_is_the_api_servers_problem() -> None:
    with pytest.raises(ClusterAPIError, match="the API server did not answer"):
        ask(Answers(ClusterAPIError("GET /api/v1/...: connection refused")), SERVICE, "snapshot")  # type: ignore[arg-type]


def test_a_busy_extender_is_asked_again_then_given_up_on() -> None:
    busy = extender_error(429, "another debug view is being computed; try again shortly")
    again = Answers(busy, {"kind": "List", "items": []})
    answer, _ = ask(again, SERVICE, "snapshot", pause=0)  # type: ignore[arg-type]
    assert answer == {"kind": "List", "items": []}
    assert len(again.asked) == 2
    always = Answers(*[busy] * 5)
    with pytest.raises(NotReachable, match="busy"):
        ask(always, SERVICE, "snapshot", pause=0)  # type: ignore[arg-type]


def test_views_are_asked_for_as_json_with_the_query() -> None:
    answers = Answers({"nodes": []})
    ask(answers, SERVICE, "capacity", {"class": "gpu"})  # type: ignore[arg-type]
    assert answers.asked == [(SERVICE.path("capacity"), {"format": "json", "class": "gpu"})]


BUSY = extender_error(429, "another debug view is being computed; try again shortly")

REPLICAS = {
    "the first decided a moment ago: asked once": (
        [Replied("a", "one", "2.0")],
        ("a", Replica("one", 2.0)),
        ["read"],
    ),
    "a standby first, then the active one: the active one's answer": (
        [Replied("standby", "two", "never"), Replied("active", "one", "1.5")],
        ("active", Replica("one", 1.5)),
        ["read", "read"],
    ),
    "a quiet cluster: every try, bodies read only when better": (
        [Replied("old", "one", "900"), Replied("never", "two", "never"), Replied("older", "one", "901")],
        ("old", Replica("one", 900.0)),
        ["read", "closed", "closed"],
    ),
    "no replica ever decided: the first answer, the others closed unread": (
        [Replied("a", "one"), Replied("b", "two"), Replied("c", "one")],
        ("a", Replica("one", None)),
        ["read", "closed", "closed"],
    ),
    "an extender that names no replica: its answer as is": (
        [Replied("old-extender", None)],
        ("old-extender", Replica("unknown", None, named=False)),
        ["read"],
    ),
    "a later attempt that fails keeps the answer in hand": (
        [Replied("standby", "two"), extender_error(404, "no such endpoint: GET /debug/capacity")],
        ("standby", Replica("two", None)),
        ["read"],
    ),
    "a later body that breaks off keeps the answer in hand": (
        [Replied("standby", "two"), Replied(ClusterAPIError("the answer broke off"), "one", "1.0")],
        ("standby", Replica("two", None)),
        ["read", "read"],
    ),
}


@pytest.mark.parametrize(("answers", "kept", "bodies"), REPLICAS.values(), ids=REPLICAS.keys())
def test_the_replica_that_decided_last_answers(
    answers: list[Any], kept: tuple[Any, Replica], bodies: list[str]
) -> None:
    """Behind the proxy any ready replica answers; a standby's views lack binds in flight."""
    assert len(answers) <= ACTIVE_ATTEMPTS
    stand_in = Answers(*answers)
    assert ask(stand_in, SERVICE, "capacity", pause=0) == kept  # type: ignore[arg-type]
    assert stand_in.answers == []  # asked exactly as often as the case expects
    assert stand_in.bodies == bodies


def test_a_first_body_that_cannot_be_read_is_named() -> None:
    broken = Answers(Replied(ClusterAPIError("GET ...: malformed answer: unexpected end"), "one", "1.0"))
    with pytest.raises(NotReachable, match="could not be read"):
        ask(broken, SERVICE, "snapshot")  # type: ignore[arg-type]


def test_headers_read_as_a_replica() -> None:
    assert Replica.from_headers({}) == Replica("unknown", None, named=False)
    assert Replica.from_headers(
        {REPLICA_HEADER.lower(): "r", LAST_DECISION_HEADER.lower(): "soon"}
    ) == Replica("r", None)
    assert Replica.from_headers({REPLICA_HEADER.lower(): "r", LAST_DECISION_HEADER.lower(): "3.5"}).active
