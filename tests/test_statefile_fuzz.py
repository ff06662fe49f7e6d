"""Any state file gets a clear answer: ``simulate`` on random bytes and on random YAML shaped like
Kubernetes objects never raises, and exits 0 (fits, or nothing pending), 1 (a pod fits nowhere)
or 2 (bad input, said in one ``error:`` line)."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from extender.cli import main
from extender.cluster.state import KINDS
from extender.service.runtime import ServeConfig, build_embedded
from extender.statefile import StateFileError

#: Words that reach deep into the parsers when they appear as keys.
KEYS = [
    "kind", "apiVersion", "metadata", "name", "namespace", "uid", "spec", "status", "devices",
    "requests", "exactly", "firstAvailable", "deviceClassName", "selectors", "cel", "expression",
    "attributes", "capacity", "allocation", "results", "nodeName", "containers", "resources",
    "claims", "resourceClaims", "resourceClaimName", "driver", "pool", "device", "count",
    "allocationMode", "constraints", "matchAttribute", "reservedFor", "sharedCounters",
    "consumesCounters", "counters", "value", "string", "int", "bool", "version", "taints",
    "nodeSelector", "nodeSelectorTerms", "matchExpressions", "allocatable", "labels", "priority",
    "derivedAttributes", "nodeAllocatableResources", "mapping", "overhead", "generation",
    "resourceSliceCount", "items", "ownerReferences", "finalizers",
]  # fmt: skip
API_VERSIONS = [
    "v1",
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta1",
    "scheduling.k8s.io/v1beta1",
    "policy/v1",
    "x",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["1Gi", "100m", "-1", "1e400", "node-1", 'device.driver == "x"', "ExactCount", "All"]),
)
#: What YAML holds and JSON does not (or not as such): bytes (!!binary), sets, timestamps.
yaml_only = st.one_of(
    st.binary(max_size=6),
    st.sets(st.integers(0, 9), max_size=3),
    st.datetimes(),
    st.dates(),
)
values = st.recursive(
    st.one_of(scalars, scalars, scalars, yaml_only),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(KEYS), st.text(max_size=8), st.integers(0, 3)), inner, max_size=5
        ),
    ),
    max_leaves=12,
)


@st.composite
def objects(draw: Any) -> dict[str, Any]:
    obj: dict[str, Any] = draw(st.dictionaries(st.sampled_from(KEYS), values, max_size=5))
    obj["kind"] = draw(
        st.one_of(st.sampled_from(sorted(KINDS)), st.sampled_from(["List", "ConfigMap"]), scalars)
    )
    obj["apiVersion"] = draw(st.one_of(st.sampled_from(API_VERSIONS), values))
    if draw(st.booleans()):
        obj["metadata"] = {"name": draw(st.text(min_size=1, max_size=5)), "namespace": "default"}
    return obj


def run_simulate(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    code = main(["simulate", str(path), "--timeout", "0.5"], out)
    err = capsys.readouterr().err
    assert code in (0, 1, 2), code
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, err


def fuzz(examples: int) -> settings:
    """2,100 examples in all: most of them bytes (cheap), the rest objects that reach the parsers."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    )


@fuzz(1800)
@given(data=st.binary(max_size=3000), suffix=st.sampled_from([".yaml", ".json", ".yml"]))
def test_random_bytes(data: bytes, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"state{suffix}"
        path.write_bytes(data)
        run_simulate(path, capsys)


documents = st.lists(st.one_of(objects(), objects(), objects(), values), max_size=5)


@fuzz(200)
@given(docs=documents)
def test_random_objects(docs: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "state.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        run_simulate(path, capsys)


@fuzz(100)
@given(docs=documents)
@example(docs=[{}, {"metadata": None}])  # found by this fuzz: the in-memory API server's seeding
@example(docs=[{"kind": "Pod", "metadata": [1]}])
def test_random_objects_served_embedded(docs: list[Any]) -> None:
    """``serve --state`` reads the same files into its in-memory API server (which copies every
    object as JSON): a file is served or refused with a StateFileError, nothing else."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "state.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        try:
            service, _store = build_embedded([str(path)], ServeConfig())
        except StateFileError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc)
            return
        service.worker.stop()
