"""The search: order, combinations, backtracking, constraints, limits and error classes."""

from __future__ import annotations

import itertools

from tests.allocator.harness import NO_GATES, allocate
from tests.builders import attrs, claim, device, device_class, exact, first_available, resource_slice

A = device_class()


def gpus(n: int, **per_device: object) -> list[dict[str, object]]:
    return [
        device(
            f"dev-{i}",
            attributes=attrs(**{k: (v[i] if isinstance(v, list) else v) for k, v in per_device.items()}),
        )
        for i in range(n)
    ]


def test_first_fit_takes_devices_in_slice_order() -> None:
    out = allocate([A, resource_slice("s", gpus(4)), claim(requests=[exact(count=2)])])
    assert out.devices() == [("req-0", "dev-0"), ("req-0", "dev-1")]


def test_pools_are_searched_by_driver_then_pool_name_and_slices_by_name() -> None:
    objects = [
        device_class(expression=None),
        resource_slice("z-slice", [device("in-z")], driver="b-driver", pool="a"),
        resource_slice("b-slice", [device("in-b")], driver="a-driver", pool="p", count=2),
        resource_slice("a-slice", [device("in-a")], driver="a-driver", pool="p", count=2),
        claim(requests=[exact(count=3)]),
    ]
    assert allocate(objects).devices() == [("req-0", "in-a"), ("req-0", "in-b"), ("req-0", "in-z")]


def test_devices_in_use_are_skipped_and_admin_results_do_not_block() -> None:
    objects = [
        A,
        resource_slice("s", gpus(3)),
        claim(
            "held",
            allocation={
                "devices": {
                    "results": [{"request": "r", "driver": "driver-a", "pool": "pool-1", "device": "dev-0"}]
                }
            },
        ),
        claim(
            "admin",
            allocation={
                "devices": {
                    "results": [
                        {
                            "request": "r",
                            "driver": "driver-a",
                            "pool": "pool-1",
                            "device": "dev-1",
                            "adminAccess": True,
                        }
                    ]
                }
            },
        ),
        claim(requests=[exact(count=2)]),
    ]
    assert allocate(objects).devices() == [("req-0", "dev-1"), ("req-0", "dev-2")]


def test_devices_picked_for_an_earlier_claim_block_later_claims() -> None:
    objects = [A, resource_slice("s", gpus(2)), claim("c1"), claim("c2"), claim("c3")]
    out = allocate(objects, ["c1", "c2"])
    assert out.devices(0) == [("req-0", "dev-0")] and out.devices(1) == [("req-0", "dev-1")]
    assert allocate(objects, ["c1", "c2", "c3"]).unsatisfiable is not None


def test_backtracking_across_requests_with_a_constraint() -> None:
    # req-0 would take dev-0 (numa 0) first, but only numa 1 has room for all three devices.
    objects = [
        A,
        resource_slice("s", gpus(4, numa=[0, 1, 1, 1])),
        claim(
            requests=[exact("req-0"), exact("req-1", count=2)],
            constraints=[{"matchAttribute": "driver-a/numa"}],
        ),
    ]
    assert allocate(objects).devices() == [("req-0", "dev-1"), ("req-1", "dev-2"), ("req-1", "dev-3")]


def test_backtracking_across_claims() -> None:
    # c1 can use dev-0 or dev-1; c2 only dev-0: c1 must move to dev-1.
    objects = [
        A,
        resource_slice("s", gpus(2, kind=["both", "only-c1"])),
        claim("c1"),
        claim("c2", requests=[exact(selectors=['device.attributes["driver-a"].kind == "both"'])]),
    ]
    out = allocate(objects, ["c1", "c2"])
    assert out.devices(0) == [("req-0", "dev-1")] and out.devices(1) == [("req-0", "dev-0")]


def test_match_attribute_needs_the_attribute_on_every_device() -> None:
    objects = [
        A,
        resource_slice("s", [device("a", attributes=attrs(numa=0)), device("b")]),
        claim(requests=[exact(count=2)], constraints=[{"matchAttribute": "driver-a/numa"}]),
    ]
    assert allocate(objects).unsatisfiable is not None


def test_match_attribute_scoped_to_named_requests() -> None:
    objects = [
        A,
        resource_slice("s", gpus(3, numa=[0, 1, 1])),
        claim(
            requests=[exact("a"), exact("b"), exact("c")],
            constraints=[{"matchAttribute": "driver-a/numa", "requests": ["b", "c"]}],
        ),
    ]
    assert allocate(objects).devices() == [("a", "dev-0"), ("b", "dev-1"), ("c", "dev-2")]


def test_match_attribute_on_versions_compares_exact_strings() -> None:
    objects = [
        A,
        resource_slice("s", gpus(2, v=[("version", "1.0.0"), ("version", "1.0.0+build")])),
        claim(requests=[exact(count=2)], constraints=[{"matchAttribute": "driver-a/v"}]),
    ]
    assert allocate(objects).unsatisfiable is not None


def test_qualified_attribute_of_another_domain_is_not_the_driver_attribute() -> None:
    objects = [
        A,
        resource_slice("s", gpus(2, numa=[0, 0])),
        claim(requests=[exact(count=2)], constraints=[{"matchAttribute": "other.example.com/numa"}]),
    ]
    assert allocate(objects).unsatisfiable is not None


def test_distinct_attribute_needs_the_incubating_allocator() -> None:
    objects = [
        A,
        resource_slice("s", gpus(2, numa=[0, 1])),
        claim(requests=[exact("a"), exact("b")], constraints=[{"distinctAttribute": "driver-a/numa"}]),
    ]
    assert "empty constraint (unsupported constraint type?)" in (
        allocate(objects, gates=NO_GATES).error or ""
    )
    assert allocate(objects).devices() == [("a", "dev-0"), ("b", "dev-1")]


def test_distinct_attribute_rejects_equal_values() -> None:
    objects = [
        A,
        resource_slice("s", gpus(3, numa=[0, 0, 1])),
        claim(requests=[exact("a"), exact("b")], constraints=[{"distinctAttribute": "driver-a/numa"}]),
    ]
    assert allocate(objects).devices() == [("a", "dev-0"), ("b", "dev-2")]


def test_all_mode_takes_every_matching_device() -> None:
    objects = [A, resource_slice("s", gpus(3)), claim(requests=[exact(mode="All")])]
    assert [d for _, d in allocate(objects).devices()] == ["dev-0", "dev-1", "dev-2"]


def test_all_mode_fails_when_a_device_is_in_use_or_none_match() -> None:
    held = claim(
        "held",
        allocation={
            "devices": {
                "results": [{"request": "r", "driver": "driver-a", "pool": "pool-1", "device": "dev-1"}]
            }
        },
    )
    assert allocate(
        [A, resource_slice("s", gpus(3)), held, claim(requests=[exact(mode="All")])]
    ).unsatisfiable
    assert allocate([A, resource_slice("s", []), claim(requests=[exact(mode="All")])]).unsatisfiable


def test_all_mode_constraint_violation_is_an_error() -> None:
    objects = [
        A,
        resource_slice("s", gpus(2, numa=[0, 1])),
        claim(requests=[exact(mode="All")], constraints=[{"matchAttribute": "driver-a/numa"}]),
    ]
    assert "because a claim constraint would not be satisfied" in (allocate(objects).error or "")


def test_all_mode_over_an_incomplete_pool_of_any_driver_is_an_error() -> None:
    objects = [
        A,
        resource_slice("s", gpus(1)),
        resource_slice("other", [device("x")], driver="driver-b", pool="p", count=2),
        claim(requests=[exact(mode="All")]),
    ]
    assert "driver-b/p is currently being updated" in (allocate(objects).error or "")


def test_result_limit_is_checked_per_claim() -> None:
    objects = [A, resource_slice("s", gpus(40)), claim(requests=[exact("a", count=20), exact("b", count=20)])]
    assert "number of requested devices 40 exceeds the claim limit of 32" in (allocate(objects).error or "")


def test_prioritized_list_prefers_the_first_alternative() -> None:
    objects = [
        A,
        resource_slice("s", gpus(2)),
        claim(requests=[first_available("r", exact("big", count=2), exact("small"))]),
    ]
    assert allocate(objects).devices() == [("r/big", "dev-0"), ("r/big", "dev-1")]


def test_prioritized_list_falls_back_when_a_later_request_needs_the_devices() -> None:
    objects = [
        A,
        resource_slice("s", gpus(3)),
        claim(
            requests=[first_available("r", exact("big", count=2), exact("small")), exact("other", count=2)]
        ),
    ]
    assert allocate(objects).devices() == [("r/small", "dev-0"), ("other", "dev-1"), ("other", "dev-2")]


def test_prioritized_list_gate_off_is_an_error() -> None:
    objects = [A, resource_slice("s", gpus(1)), claim(requests=[first_available("r", exact("a"))])]
    assert "has subrequests, but the DRAPrioritizedList feature is disabled" in (
        allocate(objects, gates=NO_GATES).error or ""
    )


def test_subrequest_over_the_result_limit_is_skipped() -> None:
    objects = [
        A,
        resource_slice("s", gpus(40)),
        claim(requests=[first_available("r", exact("huge", count=33), exact("fine", count=2))]),
    ]
    assert [r for r, _ in allocate(objects).devices()] == ["r/fine", "r/fine"]


PER_REQUEST_ERRORS = [
    ("missing-class", exact(cls="nope"), "could not retrieve device class nope"),
    ("empty-class", exact(cls=""), "missing device class name (unsupported request type?)"),
    ("bad-mode", exact(mode="Some"), "unsupported count mode Some"),
    ("admin-gate-off", exact(adminAccess=False), "admin access is requested, but the feature is disabled"),
    (
        "capacity-gate-off",
        exact(capacity={"requests": {"memory": "1Gi"}}),
        "has capacity requests, but the DRAConsumableCapacity feature is disabled",
    ),
]


def test_request_validation_errors() -> None:
    for name, request, message in PER_REQUEST_ERRORS:
        objects = [A, resource_slice("s", gpus(1)), claim(requests=[request])]
        got = allocate(objects, gates=NO_GATES).error or ""
        assert message in got, (name, got)


def test_selector_without_cel_is_an_error() -> None:
    request = exact()
    request["exactly"]["selectors"] = [{}]
    got = allocate([A, resource_slice("s", gpus(1)), claim(requests=[request])]).error or ""
    assert "CEL expression empty (unsupported selector type?)" in got


def test_cel_errors_name_their_source_and_only_happen_for_evaluated_devices() -> None:
    bad_class = device_class("bad", "device.attributes['driver-a'].missing == 1")
    objects = [bad_class, resource_slice("s", gpus(1)), claim(requests=[exact(cls="bad")])]
    got = allocate(objects).error or ""
    assert (
        "class bad: selector #0 on device driver-a/pool-1/dev-0: CEL runtime error: no such key: missing"
        in got
    )
    compile_error = device_class("broken", "device.nope == 1")
    got = (
        allocate([compile_error, resource_slice("s", gpus(1)), claim(requests=[exact(cls="broken")])]).error
        or ""
    )
    assert "class broken: selector #0: CEL compile error" in got and "undefined field 'nope'" in got
    # The only device is in use: the bad selector is never evaluated, so there is no error.
    held = claim(
        "held",
        allocation={
            "devices": {
                "results": [{"request": "r", "driver": "driver-a", "pool": "pool-1", "device": "dev-0"}]
            }
        },
    )
    assert allocate(
        [bad_class, resource_slice("s", gpus(1)), held, claim(requests=[exact(cls="bad")])]
    ).unsatisfiable


def test_claim_selector_errors_name_the_claim() -> None:
    objects = [
        A,
        resource_slice("s", gpus(1)),
        claim(requests=[exact(selectors=["device.attributes['driver-a'].x > 1"])]),
    ]
    assert "claim default/claim-0: selector #0 on device" in (allocate(objects).error or "")


def test_an_unsatisfiable_search_stops_at_the_time_budget() -> None:
    # 24 partitions of a counter worth 12, 13 wanted: the counter only fails at depth 13, so
    # without a budget every 12-subset of 24 devices would be tried.
    ticks = itertools.count()
    counters = resource_slice(
        "counters", None, count=2, sharedCounters=[{"name": "set", "counters": {"c": {"value": "12"}}}]
    )
    parts = [
        device(f"p{i}", consumesCounters=[{"counterSet": "set", "counters": {"c": {"value": "1"}}}])
        for i in range(24)
    ]
    objects = [A, counters, resource_slice("parts", parts, count=2), claim(requests=[exact(count=13)])]
    out = allocate(objects, timeout=100.0, clock=lambda: float(next(ticks)))
    assert out.timeout is not None and "timed out" in out.timeout
