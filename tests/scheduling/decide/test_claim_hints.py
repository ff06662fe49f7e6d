"""Claim hints (issue 53): one named case per hint, on a small cluster of four real drivers'
shapes (AMD whole GPUs and partitions, NVIDIA GPUs, dranet NICs, CPU driver NUMA groups), and
the claims that fit, which get no hint."""

from __future__ import annotations

from typing import Any

import pytest

from extender.allocator import Features
from extender.cel import CelEnvironment
from extender.cluster.state import ClusterState
from extender.model.dra import ClaimSpec, ResourceClaim, parse_resource_claim
from extender.scheduling.decide import claim_hints
from extender.scheduling.decide.claim_hints import ClaimHint, ClaimHints, closest, closest_class, hints_for
from extender.scheduling.decide.published import OutOfTime, Published
from extender.simulate import SimulationRequest, simulate
from tests.builders import (
    attrs,
    claim,
    device,
    device_class,
    exact,
    first_available,
    node,
    pod,
    resource_slice,
)
from tests.virtual_time import Ticking

AMD, NV, NET, CPU = "gpu.amd.com", "gpu.nvidia.com", "dra.net", "dra.cpu"


def cluster() -> list[dict[str, Any]]:
    amd = [
        device("gpu-1-128", attributes=attrs(type="amdgpu", deviceID="0x74a1", pciAddr="0000:11:00.0")),
        *(
            device(f"gpu-2-{136 + i}", attributes=attrs(type="amdgpu-partition", parentDeviceID="0x74a1"))
            for i in range(2)
        ),
    ]
    objects = [
        node("node-1"),
        node("node-2"),
        resource_slice("amd", amd, driver=AMD, pool="node-1", node="node-1"),
        resource_slice(
            "cpu",
            [
                device(
                    "cpudevnuma000",
                    attributes={
                        **attrs(numaNodeID=0),
                        "dra.net/numaNode": {"int": 0},
                        "resource.kubernetes.io/numaNode": {"int": 0},
                    },
                    capacity={"dra.cpu/cpu": "14"},
                    allowMultipleAllocations=True,
                )
            ],
            driver=CPU,
            pool="node-1",
            node="node-1",
        ),
        resource_slice(
            "net",
            [device("eth1", attributes={**attrs(ifName="eth1"), "dra.net/numaNode": {"int": 0}})],
            driver=NET,
            pool="node-1",
            node="node-1",
        ),
    ]
    for n in ("node-1", "node-2"):
        gpus = [
            device(
                f"gpu-{i}",
                attributes=attrs(productName="A100", uuid=f"GPU-{n}-{i}"),
                capacity={"memory": "40Gi"},
            )
            for i in range(2)
        ]
        objects.append(resource_slice(f"nv-{n}", gpus, driver=NV, pool=n, node=n))
    objects += [
        device_class(AMD, f'device.driver == "{AMD}"'),
        device_class(NV, f'device.driver == "{NV}"'),
        device_class("everything", None),  # a class with no selector: every device
        device_class("dranet", f'device.driver == "{NET}"'),
        device_class(CPU, f'device.driver == "{CPU}"'),
        device_class(
            "dranet-cloud", f'device.driver == "{NET}" && has(device.attributes["{NET}"].cloudNetwork)'
        ),
        # Reads cloudNetwork behind a guard that lets every NIC through.
        device_class(
            "dranet-any-cloud",
            f'device.driver == "{NET}" && (!has(device.attributes["{NET}"].cloudNetwork) || '
            f'device.attributes["{NET}"].cloudNetwork == "vpc")',
        ),
    ]
    return objects


def spec(requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None) -> ClaimSpec:
    return parse_resource_claim(claim("c", requests, constraints=constraints)).spec


def nv(selector: str | None = None, count: int = 1, name: str = "gpu") -> dict[str, Any]:
    return exact(name, NV, count, selectors=[selector] if selector else None)


PARTITION = 'device.attributes["gpu.amd.com"].type == "amdgpu-partition"'
WHOLE = 'device.attributes["gpu.amd.com"].type == "amdgpu"'

#: (case, requests, constraints, [(check, request, in the message, did you mean)]).
HINTS: list[
    tuple[
        str, list[dict[str, Any]], list[dict[str, Any]] | None, list[tuple[str, str | None, str, str | None]]
    ]
] = [
    (
        "class: a DeviceClass that does not exist, with a close name",
        [exact("gpu", "gpu.nvidai.com")],
        None,
        [("class", "gpu", "DeviceClass gpu.nvidai.com does not exist", "gpu.nvidia.com")],
    ),
    (
        "nothing: the class accepts NICs, so its guarded read of cloudNetwork is not named as the cause",
        [exact("nic", "dranet-any-cloud", selectors=['device.attributes["dra.net"].ifName == "eth9"'])],
        None,
        [("nothing", "nic", "no published device satisfies DeviceClass dranet-any-cloud", None)],
    ),
    (
        "class: imex.nvidia.com is not close to mig- or gpu.nvidia.com (the shared suffix is not counted)",
        [exact("channel", "imex.nvidia.com")],
        None,
        [("class", "channel", "DeviceClass imex.nvidia.com does not exist", None)],
    ),
    (
        "class: a class whose own selector reads what dranet does not publish (its quick-start)",
        [exact("nic", "dranet-cloud")],
        None,
        [
            ("class", "nic", "DeviceClass dranet-cloud accepts none of the 9 published devices", None),
            (
                "attribute",
                "nic",
                "DeviceClass dranet-cloud's selector reads attribute dra.net/cloudNetwork",
                None,
            ),
        ],
    ),
    (
        "attribute: NVIDIA's index, gone since v25.8.0, with no close published name",
        [nv('device.attributes["gpu.nvidia.com"].index == 0')],
        None,
        [
            (
                "attribute",
                "gpu",
                "reads attribute gpu.nvidia.com/index, which no device of driver gpu.nvidia.com publishes",
                None,
            )
        ],
    ),
    (
        "attribute: a misspelt name gets the published one",
        [nv('device.attributes["gpu.nvidia.com"].productname == "A100"')],
        None,
        [("attribute", "gpu", "reads attribute gpu.nvidia.com/productname", "gpu.nvidia.com/productName")],
    ),
    (
        "attribute: dranet's name, where it publishes ifName",
        [exact("nic", "dranet", selectors=['device.attributes["dra.net"].name == "eth1"'])],
        None,
        [("attribute", "nic", "reads attribute dra.net/name", "dra.net/ifName")],
    ),
    (
        "attribute: a domain no device of the driver publishes in",
        [nv('"x" in device.attributes["nvidia.com"]')],
        None,
        [
            (
                "attribute",
                "gpu",
                "reads attribute domain nvidia.com, in which no device of driver gpu.nvidia.com",
                None,
            )
        ],
    ),
    (
        "capacity: a selector on a capacity the driver does not publish",
        [nv('device.capacity["gpu.nvidia.com"].mem.compareTo(quantity("10Gi")) >= 0')],
        None,
        [("capacity", "gpu", "reads capacity gpu.nvidia.com/mem", "gpu.nvidia.com/memory")],
    ),
    (
        "capacity: a capacity request the driver does not publish",
        [exact("cpu", CPU, capacity={"requests": {"dra.cpu/cpus": "2"}})],
        None,
        [
            (
                "capacity",
                "cpu",
                "requests capacity dra.cpu/cpus, which no device of driver dra.cpu",
                "dra.cpu/cpu",
            )
        ],
    ),
    (
        "constraint: AMD's partitions publish parentDeviceID, not deviceID (matchAttribute)",
        [exact(f"p{i}", AMD, selectors=[PARTITION]) for i in range(2)],
        [{"requests": ["p0", "p1"], "matchAttribute": "gpu.amd.com/deviceID"}],
        [
            (
                "constraint",
                None,
                f"matchAttribute gpu.amd.com/deviceID: no device of driver {AMD} that request {r}",
                "gpu.amd.com/parentDeviceID",
            )
            for r in ("p0", "p1")
        ],
    ),
    (
        "constraint: the same with distinctAttribute",
        [exact("p0", AMD, selectors=[PARTITION])],
        [{"distinctAttribute": "gpu.amd.com/deviceID"}],
        [("constraint", None, "distinctAttribute gpu.amd.com/deviceID", "gpu.amd.com/parentDeviceID")],
    ),
    (
        "constraint: across drivers, a NUMA name the NIC side does not publish",
        [exact("cpu", CPU), exact("nic", "dranet")],
        [{"matchAttribute": "resource.kubernetes.io/numaNode"}],
        [("constraint", None, "no device of driver dra.net that request nic could get", "dra.net/numaNode")],
    ),
    (
        "count: more devices than any node publishes",
        [nv(count=3)],
        None,
        [
            (
                "count",
                "gpu",
                "asks for 3 devices; at most 2 that it could get are published for one node (node-1)",
                None,
            )
        ],
    ),
    (
        "nothing: every name is published, no device has these values",
        [nv('device.attributes["gpu.nvidia.com"].productName == "B200"')],
        None,
        [
            (
                "nothing",
                "gpu",
                "no published device satisfies DeviceClass gpu.nvidia.com and the request's selectors (4 devices",
                None,
            )
        ],
    ),
    (
        "firstAvailable: a first choice whose CEL runtime error ends every attempt, before one that fits",
        [
            first_available(
                "gpu", nv('device.attributes["gpu.nvidia.com"].index == 0', name="old"), nv(name="any")
            )
        ],
        None,
        [("attribute", "gpu/old", "reads attribute gpu.nvidia.com/index", None)],
    ),
    (
        "firstAvailable: a later choice's DeviceClass does not exist (every subrequest is validated first)",
        [first_available("gpu", nv(name="any"), exact("imex", "imex.nvidia.com"))],
        None,
        [("class", "gpu/imex", "DeviceClass imex.nvidia.com does not exist", None)],
    ),
    (
        "firstAvailable: no subrequest can ever match, each is named",
        [
            first_available(
                "gpu",
                nv('device.attributes["gpu.nvidia.com"].index == 0', name="old"),
                nv(count=3, name="three"),
            )
        ],
        None,
        [
            ("attribute", "gpu/old", "reads attribute gpu.nvidia.com/index", None),
            ("count", "gpu/three", "asks for 3 devices; at most 2", None),
        ],
    ),
]

#: A request derives ``example.com/numa`` from each driver's own NUMA name (DRADerivedAttributes).
DERIVED_NUMA = [
    exact(
        "cpu",
        CPU,
        derivedAttributes=[
            {"name": "example.com/numa", "expression": 'device.attributes["dra.cpu"].numaNodeID'}
        ],
    ),
    exact(
        "nic",
        "dranet",
        derivedAttributes=[
            {"name": "example.com/numa", "expression": 'device.attributes["dra.net"].numaNode'}
        ],
    ),
]

#: (case, requests, constraints): claims that fit somewhere get no hint.
NO_HINTS: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None]] = [
    ("one GPU", [nv()], None),
    ("as many GPUs as a node has", [nv(count=2)], None),
    ("all GPUs", [exact("gpu", NV, mode="All")], None),
    ("a published attribute", [nv('device.attributes["gpu.nvidia.com"].productName == "A100"')], None),
    (
        "an unpublished attribute read behind a has() guard, by a request that gets devices",
        [
            nv(
                '!has(device.attributes["gpu.nvidia.com"].index) || device.attributes["gpu.nvidia.com"].index == 0'
            )
        ],
        None,
    ),
    (
        "a whole AMD GPU constrained on deviceID, which it publishes (one node has one)",
        [exact("g0", AMD, selectors=[WHOLE])],
        [{"matchAttribute": "gpu.amd.com/deviceID"}],
    ),
    (
        "across drivers on the NUMA name both publish",
        [exact("cpu", CPU), exact("nic", "dranet")],
        [{"matchAttribute": "dra.net/numaNode"}],
    ),
    (
        "a published capacity requested",
        [exact("cpu", CPU, capacity={"requests": {"dra.cpu/cpu": "2"}})],
        None,
    ),
    ("a class with no selector", [exact("any", "everything")], None),
    (
        "firstAvailable: a first choice no device has, then one that fits",
        [
            first_available(
                "gpu",
                nv('device.attributes["gpu.nvidia.com"].productName == "H100"', name="h100"),
                nv(name="any"),
            )
        ],
        None,
    ),
    (
        "firstAvailable: a first choice that fits, then one reading what is not published (never tried)",
        [
            first_available(
                "gpu", nv(name="any"), nv('device.attributes["gpu.nvidia.com"].index == 0', name="old")
            )
        ],
        None,
    ),
    (
        "firstAvailable: more GPUs than a node has, else one",
        [first_available("gpu", nv(count=3, name="three"), nv(name="one"))],
        None,
    ),
    (
        "a constraint on an attribute each request derives (DRADerivedAttributes), which no device publishes",
        DERIVED_NUMA,
        [{"matchAttribute": "example.com/numa"}],
    ),
]


@pytest.fixture(scope="module")
def published() -> Published:
    return Published(ClusterState.from_objects(cluster()), CelEnvironment())


def said(hints: list[ClaimHint]) -> list[tuple[str, str | None, str | None]]:
    return [(h.check, h.request, h.did_you_mean) for h in hints]


@pytest.mark.parametrize(
    ("requests", "constraints", "expected"), [c[1:] for c in HINTS], ids=[c[0] for c in HINTS]
)
def test_a_claim_that_can_never_match_gets_its_hint(
    published: Published,
    requests: list[dict[str, Any]],
    constraints: list[dict[str, Any]] | None,
    expected: list[tuple[str, str | None, str, str | None]],
) -> None:
    hints = hints_for(spec(requests, constraints), published)
    assert said(hints) == [(check, request, mean) for check, request, _, mean in expected]
    for hint, (_, _, message, _) in zip(hints, expected, strict=True):
        assert message in hint.message
        assert hint.text().startswith(f"request {hint.request}: " if hint.request else hint.message)


@pytest.mark.parametrize(("requests", "constraints"), [c[1:] for c in NO_HINTS], ids=[c[0] for c in NO_HINTS])
def test_a_claim_that_fits_somewhere_gets_no_hint(
    published: Published, requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None
) -> None:
    assert hints_for(spec(requests, constraints), published) == []


@pytest.mark.parametrize(("requests", "constraints"), [c[1:] for c in NO_HINTS], ids=[c[0] for c in NO_HINTS])
def test_the_claims_without_hints_do_fit_somewhere(
    requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None
) -> None:
    """What "fits somewhere" means above: the decision places the claim's pod on some node."""
    state = ClusterState.from_objects(
        [*cluster(), claim("c", requests, constraints=constraints), pod("p", ["c"])]
    )
    features = Features.from_gates({"DRADerivedAttributes": True})
    [answer] = simulate(state, features, SimulationRequest(pod="default/p"))["pods"]
    assert any(d["fits"] for d in answer["nodes"].values()), answer


def test_every_check_has_a_case() -> None:
    from extender.scheduling.decide.claim_hints import CHECKS

    assert {e[0] for c in HINTS for e in c[3]} == set(CHECKS)


@pytest.mark.parametrize(
    ("name", "published", "expected"),
    [
        (
            "gpu.amd.com/deviceID",
            ["gpu.amd.com/parentDeviceID", "gpu.amd.com/pciAddr"],
            "gpu.amd.com/parentDeviceID",
        ),
        ("resource.kubernetes.io/numaNode", ["dra.net/numaNode", "dra.cpu/numaNodeID"], "dra.net/numaNode"),
        ("gpu.nvidia.com/index", ["gpu.nvidia.com/uuid", "gpu.nvidia.com/brand"], None),
        ("a.b/x", [], None),
    ],
)
def test_closest_compares_ids_not_domains(name: str, published: list[str], expected: str | None) -> None:
    assert closest(name, published) == expected


def test_closest_class_leaves_out_the_shared_suffix() -> None:
    classes = ["gpu.nvidia.com", "mig.nvidia.com", "compute-domain-default-channel.nvidia.com"]
    assert closest_class("imex.nvidia.com", classes) is None
    assert closest_class("mig.nvidia.co", classes) == "mig.nvidia.com"


def stale_claim_state() -> tuple[ClusterState, ResourceClaim]:
    objects = [*cluster(), claim("stale", [nv('device.attributes["gpu.nvidia.com"].index == 0')])]
    state = ClusterState.from_objects(objects)
    return state, state.claims[("default", "stale")]


def publish_index(state: ClusterState) -> None:
    """A driver upgrade that publishes ``index`` again."""
    gpus = [device("gpu-0", attributes=attrs(productName="A100", index=0))]
    state.apply(resource_slice("nv-node-1", gpus, driver=NV, pool="node-1", node="node-1", generation=2))


def test_claim_hints_are_memoized_per_claim_version_and_dropped_with_the_inventory() -> None:
    state, stale = stale_claim_state()
    cel = CelEnvironment()
    memo = ClaimHints(clock=lambda: 0.0)  # builds cost nothing: rebuilt at every inventory change
    [line] = memo.lines(state, cel, [stale])
    assert line.startswith(
        "claim default/stale: request gpu: the request's selector reads attribute gpu.nvidia.com/index"
    )
    assert memo.lines(state, cel, [stale]) == [line] and len(memo) == 1
    publish_index(state)
    assert memo.lines(state, cel, [stale]) == []


def test_the_index_is_built_again_at_most_once_per_ten_of_its_costs(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a slice change, the old index answers until ten times its build's cost has passed
    (no budget for the hints themselves here: the clock moves at every read)."""
    monkeypatch.setattr(claim_hints, "HINT_BUDGET", 1e9)
    state, stale = stale_claim_state()
    cel = CelEnvironment()
    clock = Ticking(1.0)  # each build reads the clock twice: it costs 1 s
    memo = ClaimHints(clock=clock)
    assert len(memo.lines(state, cel, [stale])) == 1  # built at t=2
    publish_index(state)
    assert len(memo.lines(state, cel, [stale])) == 1  # t=3: 1 s after, < 10 x 1 s: the old index
    clock.now += 8.0
    assert memo.lines(state, cel, [stale]) == []  # t=12: 10 s after: built again


def test_a_claim_whose_hints_run_past_the_budget_gets_none_and_is_not_tried_again() -> None:
    """A selector that reads a whole attribute map is run on every device: on a clock that moves
    a second per read, the first evaluation is past the 0.2 s budget."""
    wide = nv('device.attributes["gpu.nvidia.com"].size() > 100')  # matches nothing: a hint is due
    state = ClusterState.from_objects([*cluster(), claim("wide", [wide])])
    [wide_claim] = [c for c in state.claims.values() if c.name == "wide"]
    memo = ClaimHints(clock=Ticking(1.0))
    assert memo.lines(state, CelEnvironment(), [wide_claim]) == []
    assert len(memo) == 1  # remembered: the next filter does not spend the budget again
    assert [h.check for h in hints_for(wide_claim.spec, Published(state, CelEnvironment()))] == ["nothing"]


def test_constraint_hints_keep_to_the_claims_budget() -> None:
    """The constraint checks gather what each request's devices publish on the claim's budget:
    here the only clock read, past the deadline (no selector runs: the class has none)."""
    published = Published(ClusterState.from_objects(cluster()), CelEnvironment(), clock=lambda: 1.0)
    published.deadline = 0.5
    requests = [exact(f"r{i}", "everything") for i in range(2)]
    with pytest.raises(OutOfTime):
        hints_for(spec(requests, [{"matchAttribute": "example.com/missing"}]), published)


def test_a_claim_keeps_at_most_ten_hint_lines_and_counts_the_rest() -> None:
    requests = [exact(f"r{i}", "nothing-such") for i in range(12)]
    state = ClusterState.from_objects([*cluster(), claim("many", requests)])
    lines = ClaimHints(clock=lambda: 0.0).lines(state, CelEnvironment(), [state.claims[("default", "many")]])
    assert len(lines) == 11 and lines[-1] == "claim default/many: 2 more hints (kubectl dra lint)"
    assert all("DeviceClass nothing-such does not exist" in line for line in lines[:10])


def test_another_cel_environment_gets_an_index_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's reconfiguration (list-type attributes on or off) brings another environment:
    the index and the lines made with the old one are not reused."""
    monkeypatch.setattr(claim_hints, "HINT_BUDGET", 1e9)
    state, stale = stale_claim_state()
    memo = ClaimHints(clock=Ticking(1.0))  # builds cost 1 s: a changed inventory alone would wait 10 s
    first, second = CelEnvironment(), CelEnvironment()
    assert len(memo.lines(state, first, [stale])) == 1
    publish_index(state)
    assert len(memo.lines(state, first, [stale])) == 1  # the same environment: the old index waits
    assert memo.lines(state, second, [stale]) == []  # another one: built again, index published
