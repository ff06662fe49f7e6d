"""Which scheduling.k8s.io version PodGroups are read at (DRAWorkloadResourceClaims): discovery
that fails is retried until it answers, and only an API server that serves no podgroups means
none are read."""

from __future__ import annotations

import threading

from extender.cluster.api import ClusterAPIError
from extender.service.cluster_mode import pod_group_version


class Discovery:
    """RawKube's pod_group_version, answering ``answers`` in turn (an exception is raised)."""

    def __init__(self, *answers: str | Exception | None) -> None:
        self.answers = list(answers)
        self.calls = 0

    def pod_group_version(self) -> str | None:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_failed_discovery_is_retried_until_it_answers() -> None:
    raw = Discovery(ClusterAPIError("503 Service Unavailable"), ClusterAPIError("timeout"), "v1beta1")
    assert pod_group_version(raw, threading.Event()) == "v1beta1"  # type: ignore[arg-type]
    assert raw.calls == 3


def test_a_server_without_podgroups_reads_none() -> None:
    raw = Discovery(None)
    assert pod_group_version(raw, threading.Event()) is None  # type: ignore[arg-type]
    assert raw.calls == 1


def test_shutdown_ends_the_retries() -> None:
    stop = threading.Event()
    stop.set()
    raw = Discovery(ClusterAPIError("503"), "v1beta1")
    assert pod_group_version(raw, stop) is None  # type: ignore[arg-type]
    assert raw.calls == 1
