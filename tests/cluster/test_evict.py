"""Evicting a pod (``ClusterAPI.evict_pod``): the errors a 429 maps to, and the same evictions
answered alike by the embedded default's MemoryAPI and by KubeAPI against the fake API server
(kube-apiserver's eviction subresource, pkg/registry/core/pod/storage/eviction.go)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from kubernetes import client as k8s

from extender.cluster.api import (
    ApiConflict,
    ApiNotFound,
    ApiTooManyRequests,
    ClusterAPIError,
    api_error,
)
from extender.cluster.async_kube import AsyncKube
from extender.cluster.kube import KubeAPI
from extender.cluster.memory_api import MemoryAPI
from extender.cluster.memstore import MemoryStore
from tests.builders import pod
from tests.fakeapi.server import FakeApiServer

NOT_NOW = "Cannot evict pod as it would violate the pod's disruption budget."
#: kube-apiserver's 429 when a budget allows no disruption (checkAndDecrement).
BUDGET_429 = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": NOT_NOW,
    "reason": "TooManyRequests",
    "details": {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently",
            }
        ]
    },
    "code": 429,
}
#: API Priority and Fairness throttling: no cause.
THROTTLED_429 = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Too many requests, please try again later.",
    "reason": "TooManyRequests",
    "details": {"retryAfterSeconds": 1},
    "code": 429,
}


@pytest.mark.parametrize(
    ("body", "budget", "text"),
    [
        (orjson.dumps(BUDGET_429), True, f"429: {NOT_NOW}"),
        (orjson.dumps(THROTTLED_429), False, "429: Too many requests, please try again later."),
        (
            orjson.dumps({**BUDGET_429, "details": {"causes": [{"reason": "FieldValueInvalid"}]}}),
            False,
            f"429: {NOT_NOW}",
        ),
        (orjson.dumps({**BUDGET_429, "details": None}), False, f"429: {NOT_NOW}"),
        (b"<html>slow down</html>", False, "429 Too Many Requests"),
        (None, False, "429 Too Many Requests"),
    ],
    ids=["budget", "throttled", "another cause", "null details", "not json", "no body"],
)
def test_a_429_is_too_many_requests_and_says_whether_a_budget_refused(
    body: bytes | None, budget: bool, text: str
) -> None:
    error = api_error(429, "Too Many Requests", body)
    assert type(error) is ApiTooManyRequests and error.code == 429 and str(error) == text
    assert error.budget is budget


def test_a_bare_too_many_requests_is_no_budget_refusal() -> None:
    assert ApiTooManyRequests("429").budget is False


# --- the same evictions against both backends ------------------------------------------------------


def running(name: str = "p", uid: str = "uid-p", ready: bool = True, **status: Any) -> dict[str, Any]:
    made = pod(name, uid=uid, labels={"app": "web"})
    made["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        **status,
    }
    return made


def budget(name: str = "web", allowed: int = 1, observed: int = 1, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        "status": {
            "observedGeneration": observed,
            "disruptionsAllowed": allowed,
            "desiredHealthy": 2,
            "currentHealthy": 2 + allowed,
            **status,
        },
    }


def terminating() -> dict[str, Any]:
    made = running()
    made["metadata"].update(finalizers=["example.com/hold"], deletionTimestamp="2026-11-22T00:00:01Z")
    return made


@dataclass(frozen=True)
class Case:
    objects: tuple[dict[str, Any], ...]
    #: The error raised (None: evicted) and its code.
    error: type[ClusterAPIError] | None = None
    code: int = 0
    #: Whether the pod is still there, and the budget's disruptionsAllowed then (by backend).
    pod_stays: bool = False
    allowed_after: dict[str, int] | int | None = None
    budget_refusal: bool = False
    uid: str = "uid-p"


CASES: dict[str, Case] = {
    "allowed": Case((running(), budget()), allowed_after=0),
    "no budget": Case((running(),)),
    "budget 0": Case((running(), budget(allowed=0)), ApiTooManyRequests, 429, True, 0, budget_refusal=True),
    "stale status": Case(
        (running(), budget(observed=0)), ApiTooManyRequests, 429, True, 1, budget_refusal=True
    ),
    "two budgets": Case((running(), budget(), budget("also")), ClusterAPIError, 500, True, 1),
    "negative budget": Case((running(), budget(allowed=-1)), ClusterAPIError, 403, True, -1),
    # kube-apiserver checks the UID at the delete, after spending the budget; the embedded
    # default first (nothing would give its budget back).
    "uid mismatch": Case(
        (running(), budget()), ApiConflict, 409, True, {"memory": 1, "apiserver": 0}, uid="uid-old"
    ),
    "gone": Case((budget(),), ApiNotFound, 404, False, 1),
    "pending pod": Case((running(phase="Pending"), budget(allowed=0)), allowed_after=0),
    "failed pod": Case((running(phase="Failed"), budget(allowed=0)), allowed_after=0),
    "terminating pod": Case((terminating(), budget(allowed=0)), pod_stays=True, allowed_after=0),
    "unready pod, healthy budget": Case(
        (running(ready=False), budget(allowed=0, currentHealthy=2)), allowed_after=0
    ),
    "unready pod, unhealthy budget": Case(
        (running(ready=False), budget(allowed=0, currentHealthy=1)),
        ApiTooManyRequests,
        429,
        True,
        0,
        budget_refusal=True,
    ),
    "a budget of another namespace": Case(
        (running(), {**budget(allowed=0), "metadata": {"name": "web", "namespace": "other", "generation": 1}})
    ),
    "an empty selector selects nothing": Case(
        (running(), {**budget(allowed=0), "spec": {"minAvailable": 2, "selector": {}}}), allowed_after=0
    ),
}


class Backend:
    """One ClusterAPI and a look at what it holds afterwards."""

    name: str

    def api(self) -> Any:
        raise NotImplementedError

    def exists(self, kind: str, name: str, namespace: str = "default") -> bool:
        raise NotImplementedError

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
        raise NotImplementedError


class Memory(Backend):
    name = "memory"

    def __init__(self, objects: tuple[dict[str, Any], ...]) -> None:
        self.store = MemoryStore()
        self.store.load(objects)

    def api(self) -> MemoryAPI:
        return MemoryAPI(self.store)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
        return self.store.get(kind, namespace, name)

    def exists(self, kind: str, name: str, namespace: str = "default") -> bool:
        return any(o["metadata"]["name"] == name for o in self.store.objects(kind))


class ApiServer(Backend):
    name = "apiserver"

    def __init__(self, fake: FakeApiServer, objects: tuple[dict[str, Any], ...]) -> None:
        self.fake = fake
        for obj in objects:
            fake.create(obj)

    def api(self) -> KubeAPI:
        configuration = k8s.Configuration()
        configuration.host = self.fake.url
        return KubeAPI(AsyncKube(configuration), None)

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any]:
        return self.fake.get(kind, name, namespace)

    def exists(self, kind: str, name: str, namespace: str = "default") -> bool:
        try:
            self.fake.get(kind, name, namespace)
        except KeyError:
            return False
        return True


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


def backend_for(kind: str, fake: FakeApiServer, objects: tuple[dict[str, Any], ...]) -> Backend:
    return Memory(objects) if kind == "memory" else ApiServer(fake, objects)


def evict(backend: Backend, uid: str = "uid-p") -> ClusterAPIError | None:
    async def run() -> ClusterAPIError | None:
        api = backend.api()
        try:
            await api.evict_pod("default", "p", uid)
        except ClusterAPIError as exc:
            return exc
        finally:
            if isinstance(api, KubeAPI):
                await api.close()
        return None

    return asyncio.run(run())


@pytest.mark.parametrize("kind", ["memory", "apiserver"])
@pytest.mark.parametrize("case", CASES)
def test_evictions_are_answered_alike_by_the_embedded_default_and_the_api_server(
    fake: FakeApiServer, kind: str, case: str
) -> None:
    c = CASES[case]
    backend = backend_for(kind, fake, c.objects)
    error = evict(backend, c.uid)
    if c.error is None:
        assert error is None
    else:
        assert type(error) is c.error and error.code == c.code
        if kind == "apiserver" or c.code not in (404, 409):  # the store's own refusals: no Status
            assert isinstance(error.answer, dict) and error.answer["kind"] == "Status"
        assert isinstance(error, ApiTooManyRequests) is (c.code == 429)
        assert getattr(error, "budget", False) is c.budget_refusal
    assert backend.exists("Pod", "p") is c.pod_stays
    if c.allowed_after is not None:
        allowed = c.allowed_after[kind] if isinstance(c.allowed_after, dict) else c.allowed_after
        assert backend.get("PodDisruptionBudget", "web")["status"]["disruptionsAllowed"] == allowed


@pytest.mark.parametrize("kind", ["memory", "apiserver"])
def test_an_eviction_spends_one_disruption_and_names_the_pod(fake: FakeApiServer, kind: str) -> None:
    backend = backend_for(kind, fake, (running(), running("q", "uid-q"), budget(allowed=1)))
    assert evict(backend) is None
    status = backend.get("PodDisruptionBudget", "web")["status"]
    assert status["disruptionsAllowed"] == 0 and set(status["disruptedPods"]) == {"p"}
    assert not backend.exists("Pod", "p") and backend.exists("Pod", "q")


@pytest.mark.parametrize("kind", ["memory", "apiserver"])
def test_a_budget_refusal_names_the_budget_and_its_counts(fake: FakeApiServer, kind: str) -> None:
    error = evict(backend_for(kind, fake, (running(), budget(allowed=0))))
    assert isinstance(error, ApiTooManyRequests) and error.budget and str(error) == f"429: {NOT_NOW}"
    assert error.answer is not None
    assert error.answer["details"]["causes"] == BUDGET_429["details"]["causes"]  # type: ignore[index]


@pytest.mark.parametrize("kind", ["memory", "apiserver"])
def test_more_than_one_budget_is_a_500_that_says_so(fake: FakeApiServer, kind: str) -> None:
    error = evict(backend_for(kind, fake, (running(), budget(), budget("also"))))
    assert (
        error is not None
        and error.code == 500
        and str(error)
        == (
            "500: This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )
    )


def test_kube_api_sends_the_policy_v1_eviction_with_the_uid_precondition(fake: FakeApiServer) -> None:
    backend = ApiServer(fake, (running(),))
    assert evict(backend) is None
    (sent,) = [(m, path, body) for m, path, body in fake.bodies if "eviction" in path]
    # (the query holds only the write deadline every write carries)
    assert (sent[0], sent[1].partition("?")[0]) == ("POST", "/api/v1/namespaces/default/pods/p/eviction")
    assert json.loads(sent[2]) == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default"},
        "deleteOptions": {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": "uid-p"}},
    }


def test_kube_api_tells_throttling_from_a_budget_refusal(fake: FakeApiServer) -> None:
    backend = ApiServer(fake, (running(), budget()))
    fake.faults.inject[("POST", "/eviction")] = [429]
    error = evict(backend)
    assert isinstance(error, ApiTooManyRequests) and not error.budget
    assert backend.exists("Pod", "p")
    assert evict(backend) is None  # the next one goes through
