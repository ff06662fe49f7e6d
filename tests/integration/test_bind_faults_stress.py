"""Randomized fault injection: many concurrent binds while the API server misbehaves (issue 9).

A scheduler loop (filter over every node, bind to a passing one, up to 16 binds at once) runs
against ``dra-extender serve --kubeconfig`` while a fault thread makes the fake API server lose
answers, answer garbage, refuse writes, lag or drop watches, compact its history and go away for
a moment. Afterwards, with the faults gone, the loop retries as kube-scheduler would until no
unbound pod fits anywhere. The fake's own store must then hold no device twice, every bound pod's
claims reserved for it on its node, and no reservation for a pod that is not bound.
"""

from __future__ import annotations

import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.builders import claim, device, device_class, node, pod, resource_slice
from tests.fakeapi.server import FakeApiServer
from tests.integration.invariants import violations
from tests.integration.servers import cli_server
from tests.integration.test_serve_cluster import kubeconfig, ready, wait_until
from tests.service.fixtures import args_names, binding, scheduler_pod

NODES = [f"node-{i}" for i in range(6)]
DEVICES_PER_NODE = 4


def cluster() -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Objects, and each pod's claim names: more pods than devices, some with two claims, some sharing."""
    objects: list[dict[str, Any]] = [device_class()]
    for name in NODES:
        devices = [device(f"d{i}") for i in range(DEVICES_PER_NODE)]
        objects += [node(name), resource_slice(f"{name}-slice", devices, node=name, pool=name)]
    claims: dict[str, list[str]] = {}
    for i in range(30):
        claims[f"single-{i}"] = [f"c-single-{i}"]
    for i in range(5):
        claims[f"double-{i}"] = [f"c-double-{i}-a", f"c-double-{i}-b"]
    for i in range(3):
        claims[f"share-{i}-x"] = [f"c-shared-{i}"]
        claims[f"share-{i}-y"] = [f"c-shared-{i}"]
    for name in sorted({c for names in claims.values() for c in names}):
        objects.append(claim(name))
    for name, names in claims.items():
        objects.append(pod(name, names))
    return objects, claims


class Scheduler:
    """kube-scheduler's loop over HTTP: filter every node, bind to a random passing one."""

    def __init__(self, url: str, claims: dict[str, list[str]], rng: random.Random) -> None:
        self.url = url
        self.claims = claims
        self.rng = rng
        self.hangs: list[str] = []
        self.local = threading.local()

    def http(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self.local, "client", None)
        if client is None:
            client = self.local.client = httpx.Client(base_url=self.url, timeout=30)
        return client

    def schedule(self, name: str) -> bool:
        """One scheduling attempt; True when the pod fits somewhere (whether or not the bind worked)."""
        refs = [{"name": c, "resourceClaimName": c} for c in self.claims[name]]
        body = args_names(scheduler_pod(name, f"uid-{name}", refs), NODES)
        try:
            answer = self.http().post("/scheduler/filter", content=body)
            passing = answer.json()["NodeNames"] or [] if answer.status_code == 200 else []
            if not passing:
                return False
            target = self.rng.choice(passing)
            self.http().post("/scheduler/bind", content=binding(name, f"uid-{name}", target))
            return True
        except httpx.TimeoutException:
            self.hangs.append(name)
            return True
        except httpx.TransportError:
            return True  # the server is fine; a connection hiccup counts as a failed attempt

    def round(self, names: list[str]) -> list[bool]:
        with ThreadPoolExecutor(16) as pool:
            return list(pool.map(self.schedule, names))


#: What the API server can do wrong (see :func:`apply_api_fault`).
API_FAULTS = [
    "lose-status",
    "lose-binding",
    "null-status",
    "garbage",
    "status-code",
    "binding-code",
    "watch-lag",
    "drop-watch",
    "expire",
    "outage",
]


def apply_api_fault(fake: FakeApiServer, kind: str, rng: random.Random, stop: threading.Event) -> None:
    """One fault of the fake API server: the next matching requests misbehave, or for a while."""
    faults = fake.faults
    if kind == "lose-status":
        faults.lose_answer[("PUT", "/status")] = faults.lose_answer.get(("PUT", "/status"), 0) + 1
    elif kind == "lose-binding":
        faults.lose_answer[("POST", "/binding")] = faults.lose_answer.get(("POST", "/binding"), 0) + 1
    elif kind == "null-status":
        faults.null_status[("PUT", "resourceclaims")] = 1
    elif kind == "garbage":
        faults.garbage[("PUT", "resourceclaims")] = 1
    elif kind == "status-code":
        faults.inject.setdefault(("PUT", "/status"), []).append(rng.choice([409, 500, 422, 503]))
    elif kind == "binding-code":
        faults.inject.setdefault(("POST", "/binding"), []).append(rng.choice([409, 500, 403]))
    elif kind == "watch-lag":
        faults.watch_lag = rng.choice([0.0, 0.2, 0.8])
    elif kind == "drop-watch":
        faults.drop_watch_after = 1
        stop.wait(0.2)
        faults.drop_watch_after = None
    elif kind == "expire":
        faults.watch_410 = rng.randint(1, 4)
        fake.store.compact()
    elif kind == "outage":
        faults.outage(rng.uniform(0.3, 1.0))
    else:
        raise ValueError(kind)


def inject_faults(fake: FakeApiServer, rng: random.Random, stop: threading.Event) -> list[str]:
    done: list[str] = []
    while not stop.wait(rng.uniform(0.1, 0.4)):
        kind = rng.choice(API_FAULTS)
        done.append(kind)
        apply_api_fault(fake, kind, rng, stop)
    return done


def clear(fake: FakeApiServer) -> None:
    faults = fake.faults
    faults.lose_answer.clear()
    faults.null_status.clear()
    faults.garbage.clear()
    faults.inject.clear()
    faults.watch_lag = 0.0
    faults.drop_watch_after = None
    faults.watch_410 = 0
    faults.outage_until = 0.0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [int(os.environ.get("STRESS_SEED", "0")) or s for s in (1, 2)])
def test_concurrent_binds_under_random_faults_keep_the_store_consistent(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    objects, claims = cluster()
    with FakeApiServer() as fake:
        for obj in objects:
            fake.create(obj)
        with (
            cli_server(
                "--kubeconfig",
                kubeconfig(fake, tmp_path),
                "--api-timeout",
                "2",
                "--cache-stale-after",
                "3",
            ) as url,
            httpx.Client(base_url=url, timeout=30) as http,
        ):
            wait_until(lambda: ready(http))
            scheduler = Scheduler(url, claims, rng)
            stop = threading.Event()
            injected: list[str] = []
            thread = threading.Thread(target=lambda: injected.extend(inject_faults(fake, rng, stop)))
            thread.start()
            fault_phase_ends = time.monotonic() + 20
            while time.monotonic() < fault_phase_ends:
                unbound = [n for n in claims if not fake.get("Pod", n, "default")["spec"].get("nodeName")]
                if not unbound:
                    break
                scheduler.round(rng.sample(unbound, len(unbound)))
            stop.set()
            thread.join()
            clear(fake)
            wait_until(lambda: ready(http), timeout=30)
            # kube-scheduler retries every unbound pod until it binds or fits nowhere.
            deadline = time.monotonic() + 45
            while time.monotonic() < deadline:
                unbound = [n for n in claims if not fake.get("Pod", n, "default")["spec"].get("nodeName")]
                if not any(scheduler.round(unbound)):
                    break
                time.sleep(0.3)  # let the watches bring the last writes in
            context = f"seed {seed}; faults injected: {sorted(set(injected))}"
            assert scheduler.hangs == [], context
            assert violations(fake) == [], context
            unbound = [n for n in claims if not fake.get("Pod", n, "default")["spec"].get("nodeName")]
            assert not any(scheduler.schedule(n) for n in unbound), f"{context}: pods that fit stay unbound"
            bound = len(claims) - len(unbound)
            # 24 devices: every one in use, or every pod bound (two sharers use one device).
            assert bound > 0, context
