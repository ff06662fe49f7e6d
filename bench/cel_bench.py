"""CEL benchmark: compile time, per-evaluation cost, and 10,000-device selector passes.

Run: ``python -m bench.cel_bench`` (add ``--json FILE`` to keep the numbers).

Every timing is printed next to a floor measured in the same run: a hand-written Python
predicate doing the same check over the same devices, so a noisy, shared machine shows up in
both columns.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from extender.cel import CelCostLimitError, CelDevice, CelEnvironment, Program, parse_quantity

DOMAIN = "gpu.nvidia.com"
MODELS = [
    # productName, memory, driverVersion, cudaComputeCapability
    ("NVIDIA A100-SXM4-40GB", "40Gi", "550.54.15", "8.0.0"),
    ("NVIDIA H100 80GB HBM3", "80Gi", "550.90.7", "9.0.0"),
    ("Tesla T4", "16Gi", "535.104.5", "7.5.0"),
    ("NVIDIA L4", "24Gi", "525.60.13", "8.9.0"),
]

SELECTORS = {
    "productName equality": f'device.attributes["{DOMAIN}"].productName == "NVIDIA A100-SXM4-40GB"',
    "memory compareTo": f'device.capacity["{DOMAIN}"].memory.compareTo(quantity("40Gi")) >= 0',
    "semver driverVersion": f'device.attributes["{DOMAIN}"].driverVersion.isGreaterThan(semver("535.0.0"))',
}

_40GI = parse_quantity("40Gi").value

#: 4M body evaluations uncapped: stopped by the cost limit (MAX_COST) long before.
RUNAWAY = "lists.range(2000).all(x, lists.range(2000).all(y, x + y >= 0))"

#: Hand-written equivalents: the floor a Python predicate costs over the same records.
FLOORS: dict[str, Callable[[CelDevice], bool]] = {
    "productName equality": lambda d: (
        d.attributes[DOMAIN]["productName"] == ("string", "NVIDIA A100-SXM4-40GB")
    ),
    "memory compareTo": lambda d: d.capacity[DOMAIN]["memory"].value >= _40GI,
    "semver driverVersion": lambda d: (
        tuple(int(x) for x in d.attributes[DOMAIN]["driverVersion"][1].split(".")) > (535, 0, 0)
    ),
    "uuid prefix (all distinct)": lambda d: d.attributes[DOMAIN]["uuid"][1].startswith("GPU-0000"),
}

#: No sharing possible: every device has its own uuid, so every device costs one evaluation.
WORST_CASE = {"uuid prefix (all distinct)": f'device.attributes["{DOMAIN}"].uuid.startsWith("GPU-0000")'}

EXTRA_COMPILE = {
    "driver equality": 'device.driver == "gpu.nvidia.com"',
    "mig profile": f'device.attributes["{DOMAIN}"].type == "mig" && '
    f'device.capacity["{DOMAIN}"].memory.compareTo(quantity("10Gi")) < 0',
    "two-var exists": f'device.attributes["{DOMAIN}"].exists(k, v, k == "index" && v == 1)',
}


def make_devices(n: int) -> list[CelDevice]:
    """``n`` GPUs of 4 models, 13 attributes and one capacity each (unique uuid/index/pcieRoot)."""
    devices = []
    for i in range(n):
        name, memory, driver_version, cc = MODELS[i % len(MODELS)]
        attrs: dict[str, tuple[str, Any]] = {
            "productName": ("string", name),
            "architecture": ("string", "Ampere"),
            "brand": ("string", "Nvidia"),
            "type": ("string", "gpu"),
            "index": ("int", i % 8),
            "minor": ("int", i % 8),
            "uuid": ("string", f"GPU-{i:08d}-06c0-7d70-1a51-e59b25b2c16c"),
            "cudaComputeCapability": ("version", cc),
            "driverVersion": ("version", driver_version),
            "cudaDriverVersion": ("version", "12.4.0"),
            "resource.kubernetes.io/pcieRoot": ("string", f"pci{i // 4:04d}:00"),
            "numaNode": ("int", (i // 4) % 2),
            "migEnabled": ("bool", False),
        }
        devices.append(CelDevice.from_flat(DOMAIN, attrs, {"memory": parse_quantity(memory)}))
    return devices


def timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def per_call(fn: Callable[[], Any], calls: int, repeat: int) -> float:
    """Median time of one call, measured over batches of ``calls`` calls."""

    def batch() -> None:
        for _ in range(calls):
            fn()

    return statistics.median(timed(batch, repeat)) / calls


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.2f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} µs"


def run(n_devices: int, repeat: int) -> dict[str, Any]:
    results: dict[str, Any] = {"devices": n_devices}
    env = CelEnvironment()

    print("== compile (uncached, per expression; median of", repeat * 10, "runs)")
    compile_times = {}
    for label, expr in {**SELECTORS, **EXTRA_COMPILE}.items():
        samples = timed(functools.partial(env.compile, expr, use_cache=False), repeat * 10)
        compile_times[label] = statistics.median(samples)
        print(f"  {label:24s} {us(compile_times[label])}")
    results["compile_s"] = compile_times

    print("== one evaluation of (expression, device): unmemoized vs memoized; floor = hand-written predicate")
    sample = make_devices(8)
    per_eval: dict[str, dict[str, float]] = {}
    for label, expr in SELECTORS.items():
        program = env.compile(expr)
        assert isinstance(program, Program)
        dev = sample[0]
        dev.value(False)  # conversion done once per device, not per expression
        cold = per_call(functools.partial(env.evaluate_unmemoized, program, dev), 2000, repeat)
        env.matches(program, dev)
        memo = per_call(functools.partial(env.matches, program, dev), 2000, repeat)
        floor_fn = FLOORS[label]
        floor = per_call(functools.partial(floor_fn, dev), 2000, repeat)
        per_eval[label] = {"cold_s": cold, "memoized_s": memo, "floor_s": floor}
        print(f"  {label:24s} cold {us(cold)}   memoized {us(memo)}   floor {us(floor)}")
    conversion = per_call(
        lambda: CelDevice(sample[1].driver, sample[1].attributes, sample[1].capacity).value(False),
        2000,
        repeat,
    )
    print(f"  device -> CEL value conversion (once per device): {us(conversion)}")
    results["per_evaluation"] = per_eval
    results["conversion_s"] = conversion

    print(f"== {n_devices} devices of {len(MODELS)} models: cold (fresh environment and devices) vs memoized")
    passes: dict[str, dict[str, float]] = {}
    for label, expr in {**SELECTORS, **WORST_CASE}.items():
        colds, memos, floors = [], [], []
        for _ in range(repeat):
            fresh_env = CelEnvironment()
            program = fresh_env.compile(expr)
            assert isinstance(program, Program)
            devices = make_devices(n_devices)
            gc.collect()
            start = time.perf_counter()
            cold_hits = sum(fresh_env.matches(program, d) for d in devices)
            colds.append(time.perf_counter() - start)
            start = time.perf_counter()
            memo_hits = sum(fresh_env.matches(program, d) for d in devices)
            memos.append(time.perf_counter() - start)
            floor_fn = FLOORS[label]
            start = time.perf_counter()
            floor_hits = sum(floor_fn(d) for d in devices)
            floors.append(time.perf_counter() - start)
            assert cold_hits == memo_hits == floor_hits, (label, cold_hits, memo_hits, floor_hits)
        passes[label] = {
            "cold_s": statistics.median(colds),
            "memoized_s": statistics.median(memos),
            "floor_s": statistics.median(floors),
            "evaluations": len(program.memo) if isinstance(program, Program) else 0,
        }
        targets = ("(target < 100 ms)", "(target < 5 ms)") if label in SELECTORS else ("", "")
        print(
            f"  {label:26s} cold {ms(passes[label]['cold_s'])} {targets[0]:17s}  "
            f"memoized {ms(passes[label]['memoized_s'])} {targets[1]:15s}  "
            f"floor {ms(passes[label]['floor_s'])}   CEL evaluations: {passes[label]['evaluations']}"
        )
    results["passes"] = passes

    print("== a runaway expression stopped by the runtime cost limit (median of", repeat, "runs)")
    runaway = env.compile(RUNAWAY)
    assert isinstance(runaway, Program)

    def stopped() -> None:
        try:
            env.evaluate_unmemoized(runaway, sample[0])
        except CelCostLimitError:
            return
        raise AssertionError("the runaway expression was not stopped")

    results["runaway_to_cost_limit_s"] = statistics.median(timed(stopped, repeat))
    print(f"  {RUNAWAY}: {ms(results['runaway_to_cost_limit_s'])} (--node-timeout is 1 s)")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args()
    results = run(args.devices, args.repeat)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
