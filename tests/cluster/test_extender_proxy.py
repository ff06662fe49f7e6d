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


class Answers:
    """A RawKube stand-in that answers each GET with the next of ``answers``: an error to raise,
    or a body (with the replica headers of ``replica``, else of an active replica), recording
    the paths asked."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any] | None]] = []

    def get_with_headers(
        self, path: str, *, query: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, str]]:
        self.asked.append((path, query))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, Replied):
            return answer.body, answer.headers
        return answer, {REPLICA_HEADER.lower(): "active", LAST_DECISION_HEADER.lower(): "0.5"}


class Replied:
    def __init__(self, body: Any, replica: str, last_decision: str) -> None:
        self.body = body
        self.headers = {REPLICA_HEADER.lower(): replica, LAST_DECISION_HEADER.lower(): last_decision}


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


REPLICAS = {
    "the first decided a moment ago: asked once": (
        [Replied("a", "one", "2.0")],
        ("a", Replica("one", 2.0)),
        1,
    ),
    "a standby first, then the active one: asked twice, the active one's answer": (
        [Replied("standby", "two", "never"), Replied("active", "one", "1.5")],
        ("active", Replica("one", 1.5)),
        2,
    ),
    "a quiet cluster: every try, and the one that decided last": (
        [Replied("old", "one", "900"), Replied("never", "two", "never"), Replied("older", "one", "901")],
        ("old", Replica("one", 900.0)),
        ACTIVE_ATTEMPTS,
    ),
    "no replica ever decided: the first answer, after every try": (
        [Replied("a", "one", "never"), Replied("b", "two", "never"), Replied("c", "one", "never")],
        ("a", Replica("one", None)),
        ACTIVE_ATTEMPTS,
    ),
}


@pytest.mark.parametrize(("answers", "kept", "asked"), REPLICAS.values(), ids=REPLICAS.keys())
def test_the_replica_that_decided_last_answers(
    answers: list[Replied], kept: tuple[Any, Replica], asked: int
) -> None:
    """Behind the proxy any ready replica answers; a standby's views lack binds in flight."""
    stand_in = Answers(*answers)
    assert ask(stand_in, SERVICE, "capacity") == kept  # type: ignore[arg-type]
    assert len(stand_in.asked) == asked


def test_headers_that_name_no_replica_read_as_unknown_and_never() -> None:
    assert Replica.from_headers({}) == Replica("unknown", None)
    assert Replica.from_headers({LAST_DECISION_HEADER.lower(): "soon"}) == Replica("unknown", None)
