"""Fixtures of the real-control-plane suite (marker ``realcluster``).

One etcd and kube-apiserver serve the whole session (starting them costs ~10 s on two cores);
each test gets the cluster emptied of what the tests create, and starts the kube-scheduler and
extender processes it needs. Without the binaries every test here is skipped with one line that
says which binary is missing and how to provide it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.realcluster import binaries as found
from tests.realcluster.api import Api, ApiError
from tests.realcluster.controlplane import ControlPlane, running
from tests.realcluster.workload import remove

#: Namespaced kinds the tests create, in the order they are removed.
NAMESPACED = ("Pod", "ResourceClaim", "ResourceClaimTemplate", "PodDisruptionBudget", "Lease")
#: Cluster-scoped kinds the tests create.
CLUSTER = ("ResourceSlice", "DeviceClass", "DeviceTaintRule", "Node", "PriorityClass")
TEST_NAMESPACES = ("default", "team-a")


#: The long fault runs (minutes of leases lapsing and pods arriving, mostly waiting): a group of
#: their own, so that another worker runs them on a control plane of its own while one runs the
#: other real-control-plane tests (one group took the suite past ten minutes on two cores).
FAULT_RUNS = {"test_failover.py", "test_soak.py", "test_fence_trials.py"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        path = Path(str(item.fspath))
        if here in path.parents:
            item.add_marker(pytest.mark.realcluster)
            # One worker runs each group: its tests share that worker's etcd and kube-apiserver.
            group = "realcluster-faults" if path.name in FAULT_RUNS else "realcluster"
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def binaries() -> found.Binaries:
    located = found.find()
    if isinstance(located, str):
        pytest.skip(found.skip_reason(located))
    return located


@pytest.fixture(scope="session")
def control_plane(
    binaries: found.Binaries, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    plane = ControlPlane(binaries, tmp_path_factory.mktemp("controlplane"))
    try:
        plane.start()
        # Admin access to devices is allowed only in namespaces labelled for it.
        plane.add_namespace("team-a", {"resource.kubernetes.io/admin-access": "true"})
        with contextlib.suppress(ApiError):
            plane.api.create(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": "default"},
                }
            )
        yield plane
    finally:
        plane.stop()


def empty(api: Api) -> None:
    """Remove everything the tests create (claims' finalizers first: no controller does it)."""
    remove(api, (*NAMESPACED, "Event"), TEST_NAMESPACES)
    for kind in CLUSTER:
        try:
            objects = api.list(kind)
        except ApiError as exc:
            if exc.code != 404:  # a kind this API server does not serve (DeviceTaintRule, gate off)
                raise
            continue
        names = [o["metadata"]["name"] for o in objects]
        if kind == "PriorityClass":
            names = [n for n in names if not n.startswith("system-")]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda name: api.delete(kind, name), names))  # noqa: B023

    def emptied() -> bool:
        return not any(api.list(kind, ns) for ns in TEST_NAMESPACES for kind in ("Pod", "ResourceClaim"))

    api.wait_for(emptied, what="test namespaces emptied")


@pytest.fixture
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The session's control plane, emptied before and after the test."""
    empty(control_plane.api)
    yield control_plane
    empty(control_plane.api)


def own_plane(tmp_path_factory: pytest.TempPathFactory, name: str, **kw: Any) -> Iterator[ControlPlane]:
    """A control plane for one module whose gates differ from the session's (``kw``: ControlPlane's
    ``feature_gates``, ``runtime_config``); skipped, saying why, without the binaries."""
    located = found.find()
    if isinstance(located, str):
        pytest.skip(found.skip_reason(located))
    with running(located, tmp_path_factory.mktemp(name), **kw) as plane:
        yield plane


def emptied(plane: ControlPlane, first: tuple[str, ...] = ()) -> Iterator[ControlPlane]:
    """The plane emptied before and after a test; ``first``: kinds removed before the rest."""
    for phase in ("before", "after"):
        if first:
            remove(plane.api, first, TEST_NAMESPACES)
        empty(plane.api)
        if phase == "before":
            yield plane
