"""The make-room hint as filter sees it (issue 51): what a plan found, the line it adds to the
reason of the node it frees, and what filter asks of whoever plans in the background
(:class:`Hints`; the service's planner is :class:`extender.scheduling.make_room_hints.HintPlanner`,
everything else has :class:`NoHints`)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

from extender.model.core import Pod
from extender.scheduling.config import EngineConfig
from extender.scheduling.preempt.make_room import Plan


@dataclass(frozen=True, slots=True)
class Hint:
    """The node a plan frees, and the line its reason gets; the plan itself and when it was
    made (on the planner's ``clock``), for the mover (:mod:`extender.scheduling.make_room_mover`)."""

    node: str
    line: str
    plan: Plan | None = field(default=None, compare=False)
    made: float = field(default=0.0, compare=False)


def hint_line(pod: Pod, found: Plan) -> str:
    """``fits on node-12 after moving 2 pods: kubectl dra make-room ml/trainer``."""
    return f"{found.explain()}: kubectl dra make-room {pod.namespace}/{pod.name}"


def with_hint(hint: Hint | None, unresolvable: dict[str, str], failed: dict[str, str]) -> None:
    """A filter answer that fits no node: the hint's line goes into the reason of the node its
    plan frees, in whichever map holds it (the node stays there), once.

    kube-scheduler (kubernetes/kubernetes pkg/scheduler/schedule_one.go,
    ``findNodesThatPassExtenders``, read at 003b4460 of the 1.35-1.37 period; the v1.37.0 tag
    itself could not be fetched here) sets each FailedNodes entry as the node's Unschedulable
    status and each FailedAndUnresolvableNodes entry as its UnschedulableAndUnresolvable one,
    the message its one reason (``statuses.Set``; a node in both maps counts once, as
    Unresolvable). ``FitError.Error`` (pkg/scheduler/framework/types.go, read at f899a310)
    counts every node's reasons alike, whatever the code, and sorts "<count> <reason>": "0/10
    nodes are available: 1 <reason>; fits on node-12 after moving 2 pods: kubectl dra make-room
    ml/trainer, 9 <reason>." ``handleSchedulingFailure`` puts that message in the
    FailedScheduling event, cut at 1,024 bytes (``truncateMessage``), and in full in the
    PodScheduled condition. Only for an answer that fits no node: a hint left from before is
    stale once the pod fits somewhere."""
    if hint is None:
        return
    for reasons in (unresolvable, failed):
        reason = reasons.get(hint.node)
        if reason is not None:
            reasons[hint.node] = f"{reason}; {hint.line}"
            return


class Hints(Protocol):
    """What filter asks of the background planner (on the engine's loop)."""

    def hint(self, pod: Pod) -> Hint | None:
        """The hint an earlier computation left for the pod, if any (never computes)."""

    def ask(self, pod: Pod, candidates: Collection[str] | None = None) -> None:
        """No node fits the pod: plan for it in the background (at most once per interval).
        ``candidates``: the nodes kube-scheduler's own filters passed (the filter's names):
        the plan frees one of them."""

    def forget(self, uid: str) -> None:
        """The pod is bound: its hint goes."""

    def drop(self, uid: str) -> None:
        """A node fits the pod now: its plan (made while none did) goes; a later one may come."""

    def reconfigure(self, config: EngineConfig) -> None: ...

    def entries(self) -> int: ...

    def touch(self) -> None:
        """A verb runs now (the planner keeps off the GIL for a while)."""


class NoHints:
    """No background planner (simulate, benchmarks and tests that do not ask for one)."""

    def hint(self, pod: Pod) -> Hint | None:
        return None

    def ask(self, pod: Pod, candidates: Collection[str] | None = None) -> None:
        pass

    def forget(self, uid: str) -> None:
        pass

    def drop(self, uid: str) -> None:
        pass

    def reconfigure(self, config: EngineConfig) -> None:
        pass

    def entries(self) -> int:
        return 0

    def touch(self) -> None:
        pass
