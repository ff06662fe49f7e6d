"""What the engine and its binder are configured with, and the metrics hooks they report to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from extender.allocator import Features
from extender.allocator.releases import DEFAULT_MINOR, Release, release_of
from extender.defaults import (
    DEFAULT_BINDING_TIMEOUT,
    DEFAULT_BINDING_WAIT,
    DEFAULT_CATCH_UP_WAIT,
    DEFAULT_MAKE_ROOM_AFTER,
    DEFAULT_MAKE_ROOM_COOLDOWN,
    DEFAULT_MAKE_ROOM_MAX_MOVES,
    DEFAULT_MAKE_ROOM_MIN_AGE,
    DEFAULT_MAKE_ROOM_RATE,
    DEFAULT_MAKE_ROOM_TIMEOUT,
    DEFAULT_RELEASE_WAIT,
    DEFAULT_SCHEDULER_NAME,
    SCORE_POLICIES,
    SCORE_TIE_BREAKS,
)

__all__ = [
    "DEFAULT_BINDING_TIMEOUT",
    "DEFAULT_BINDING_WAIT",
    "DEFAULT_CATCH_UP_WAIT",
    "DEFAULT_CONTROLLER_KINDS",
    "DEFAULT_RELEASE_WAIT",
    "DEFAULT_SCHEDULER_NAME",
    "SCORE_POLICIES",
    "SCORE_TIE_BREAKS",
    "EngineConfig",
    "Mover",
    "NoObserver",
    "Observer",
    "Rules",
]


class Observer(Protocol):
    """Metrics hooks (the service implements them with Prometheus)."""

    def filtered(self, passed: int, failed: int, error: bool) -> None: ...

    def filter_cut_short(self, cause: str) -> None:
        """A filter answer that did not judge every node in full: ``budget`` or ``node_timeout``."""

    def bound(self, outcome: str, reason: str = "") -> None: ...

    def conflict(self) -> None: ...

    def claim_created(self, outcome: str) -> None: ...

    def binding_waited(self, outcome: str) -> None: ...

    def make_room_hint(self, outcome: str) -> None:
        """A make-room plan for filter's hint line: ``plan`` (with moves), ``none`` (no plan or
        none needed) or ``skipped`` (the queue was full, the pod gone, or planning failed)."""

    def make_room_plan(self, outcome: str, reason: str = "") -> None:
        """The mover's plans: ``started``, ``carried_out``, ``abandoned`` (with the reason) or
        ``dry_run``."""

    def make_room_eviction(self, outcome: str) -> None:
        """One eviction the mover asked for: ``evicted``, ``gone``, ``budget``, ``throttled``,
        ``refused`` or ``error``."""


class NoObserver:
    def filtered(self, passed: int, failed: int, error: bool) -> None:
        pass

    def filter_cut_short(self, cause: str) -> None:
        pass

    def bound(self, outcome: str, reason: str = "") -> None:
        pass

    def conflict(self) -> None:
        pass

    def claim_created(self, outcome: str) -> None:
        pass

    def binding_waited(self, outcome: str) -> None:
        pass

    def make_room_hint(self, outcome: str) -> None:
        pass

    def make_room_plan(self, outcome: str, reason: str = "") -> None:
        pass

    def make_room_eviction(self, outcome: str) -> None:
        pass


#: Owner kinds whose controllers recreate an evicted pod (make room moves only their pods).
DEFAULT_CONTROLLER_KINDS = frozenset({"ReplicaSet", "StatefulSet", "Job"})


@dataclass(frozen=True, slots=True)
class Rules:
    """Make room's rules (:mod:`extender.scheduling.preempt.movable`): who may move and how
    hard the planner looks. Here, with the rest of the configuration, so that the decide room
    (which reads EngineConfig) does not reach the preempt room."""

    #: A shape target's priority: pods above it never move (a pod target uses its own).
    max_priority: int = 0
    #: Owner kinds whose pods are recreated when evicted.
    controller_kinds: frozenset[str] = DEFAULT_CONTROLLER_KINDS
    #: Pods that started less than this many seconds ago stay.
    min_age: float = DEFAULT_MAKE_ROOM_MIN_AGE
    max_moves: int = DEFAULT_MAKE_ROOM_MAX_MOVES
    #: Nodes searched (after ranking by a lower bound on moves).
    max_nodes: int = 100
    #: Seconds of the injected clock the search may take.
    budget: float = 1.0
    #: Exact search over subsets when a node has at most this many movable units.
    exact_up_to: int = 12
    #: Nodes tried as a moved pod's new home (fullest first).
    max_destinations: int = 64
    #: UIDs of the controllers (a pod's controller ownerReference) whose pods the mover moved
    #: within its cooldown: their pods stay (not configuration: the mover's state, passed in).
    resting: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Mover:
    """Make room carried out (issue 52; ``--make-room``): whether the mover runs, and its bounds
    (:mod:`extender.scheduling.make_room_mover`)."""

    on: bool = False
    #: Log what it would do; evict and hold nothing.
    dry_run: bool = False
    #: Seconds a pod waits for devices (its PodScheduled condition False) before pods move for it.
    after: float = DEFAULT_MAKE_ROOM_AFTER
    #: Evictions a minute, cluster-wide.
    rate: float = DEFAULT_MAKE_ROOM_RATE
    #: Seconds before a workload (a moved pod's controller) may be moved again.
    cooldown: float = DEFAULT_MAKE_ROOM_COOLDOWN
    #: Seconds from a plan's start until the moved pods' claims are released, at most.
    timeout: float = DEFAULT_MAKE_ROOM_TIMEOUT
    #: Seconds the freed devices stay held for the pod once they are released, waiting for its bind.
    hold_for: float = 120.0


@dataclass(frozen=True, slots=True)
class EngineConfig:
    features: Features = field(default_factory=Features)
    #: The Kubernetes release decisions follow (its gate defaults are in ``features`` already).
    release: Release = field(default_factory=lambda: release_of(DEFAULT_MINOR))
    score_policy: str = "binpack"
    #: Among prioritize's best nodes, prefer those a placement fragments least ("fragmentation"),
    #: or not ("none": the scores exactly as without it). See scores.break_ties.
    score_tie_break: str = "none"
    #: Allocation budget per node, and for all nodes of one filter call (seconds).
    node_timeout: float = 1.0
    filter_budget: float = 3.0
    #: Pods of these schedulers may be bound (kube-scheduler binds only its own pods).
    scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER_NAME})
    #: How long a node whose allocation timed out keeps that answer for the same claims (seconds).
    timeout_memo_seconds: float = 30.0
    decision_log_size: int = 200
    #: DynamicResourcesArgs.bindingTimeout: how long an allocated claim may wait for its
    #: devices' binding conditions before filter treats it as unavailable (seconds).
    binding_timeout: float = DEFAULT_BINDING_TIMEOUT
    #: How long one bind waits for its devices' binding conditions before it answers
    #: kube-scheduler "not yet" (claims kept; the retry waits again), in seconds: upstream's
    #: PreBind waits up to ``binding_timeout`` in one go, which no bind verb may (httpTimeout).
    binding_wait: float = DEFAULT_BINDING_WAIT
    #: How often a waiting bind looks at the cache again (seconds).
    binding_poll: float = 0.05
    #: How long a verb waits for the cache to show what kube-scheduler's request shows (claims
    #: the pod's status names), seconds (:mod:`extender.scheduling.inflight.catch_up`).
    catch_up_wait: float = DEFAULT_CATCH_UP_WAIT
    #: How long a preemptor's bind waits for its victims' claims to be released (seconds).
    release_wait: float = DEFAULT_RELEASE_WAIT
    #: After prioritize, how long the devices a pod would get on its single best-scored node
    #: are kept for it (until its bind or next filter), seconds; 0: off (docs/performance.md).
    hold_seconds: float = 0.0
    #: Device-aware preemption (kube-scheduler 1.38+): nodes where evicting lower-priority pods
    #: would make room are Unschedulable instead of Unresolvable, and pods nominated to a node
    #: keep the devices their preemption freed. Off: the in-tree plugin's answers exactly.
    device_preemption: bool = False
    #: How long the victims the preempt verb named are remembered (seconds).
    preemption_memory_seconds: float = 600.0
    #: Make room (issue 51): who may move and how hard the planner looks, for the read-only
    #: surfaces (/debug/make-room, ``kubectl dra make-room``) and filter's hint line.
    make_room: Rules = field(default_factory=Rules)
    #: How often one pod's make-room plan is computed again for filter's hint (seconds).
    make_room_hint_seconds: float = 30.0
    #: Make room carried out (``--make-room``): off by default.
    mover: Mover = field(default_factory=Mover)

    @property
    def allocation_timeout(self) -> float | None:
        """The limit of one node's allocation: ``node_timeout``, or none with the
        DRASchedulerFilterTimeout gate off (as the plugin's Filter then has none)."""
        return self.node_timeout if self.features.filter_timeout else None
