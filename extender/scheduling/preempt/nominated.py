"""Devices a preemption made room for stay with the pod that preempted (kube-scheduler's
nominated pods, for devices).

After a preemption kube-scheduler sets the preemptor's ``status.nominatedNodeName`` and deletes
the victims; when their claims are released, the freed devices must go to the preemptor, not to
whichever pod is filtered first. kube-scheduler keeps CPU and memory for nominated pods this way
(``RunFilterPluginsWithNominatedPods`` adds every pod nominated to the node with at least the
filtered pod's priority before running the filters). The in-tree DynamicResources plugin has no
``PreFilterExtensions`` (it returns nil), so in-tree devices are not kept: there is no
device-aware preemption in-tree through 1.37. With device preemption on, the extender keeps them.

What a nominated pod keeps is decided by allocating its claims on the node as if its victims
were gone already: the victims the preempt verb named for it on that node (if this replica
answered that preemption) and the lower-priority pods there that are terminating. Its devices
then count as taken for every pod of lower or equal priority. This module says who waits on a
node and what is being released there (a :class:`~extender.scheduling.decide.what_if.NodeAdjustment`);
:mod:`extender.scheduling.decide.what_if` allocates with it. Pure: a snapshot in, adjustments out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cachetools import TTLCache

from extender.cluster.state import ClusterState, Key
from extender.model.core import Pod
from extender.model.dra import ResourceClaim
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot
from extender.scheduling.decide.what_if import UNCHANGED, NodeAdjustment, Waiting

#: (preemptor UID, node name) -> UIDs of the victims the preempt verb named for it there.
VictimsOf = Callable[[str, str], frozenset[str]]


def no_victims(uid: str, node: str) -> frozenset[str]:
    return frozenset()


@dataclass(frozen=True, slots=True)
class RoomHold:
    """Make room's hold (issue 52): the mover is moving ``moved`` off ``node`` for ``pod``, so
    ``pod`` keeps there what it would get with them gone, as a nominated pod keeps what its
    preemption frees: from every pod of no higher priority (the moved pods' replacements
    included: they never have a higher one), and it may use their claims being released."""

    pod: Pod
    node: str
    #: UIDs of the pods moved (or being moved) off the node for it.
    moved: frozenset[str]
    #: The claims they held there when the plan started: what is released for it even once the
    #: pods are gone from the cache and their claims not released yet.
    claims: frozenset[Key] = frozenset()


@dataclass(frozen=True, slots=True)
class Nominations:
    """Whose nominations keep devices, and what their preemptions free."""

    #: Only pods of these schedulers (upstream keeps room only for the pods in its own queue);
    #: None: any pod (offline, where no scheduler is named).
    scheduler_names: frozenset[str] | None = None
    #: The victims the preempt verb named, per preemptor and node (and the pods make room moves).
    victims_of: VictimsOf = no_victims
    #: UIDs of pods whose bind is being written: those writes hold their devices already.
    binding: frozenset[str] = frozenset()
    #: Whether pods kube-scheduler nominated (``status.nominatedNodeName``) keep devices: with
    #: device preemption only. Make room's holds keep theirs either way.
    nominated_pods: bool = True
    #: Make room's holds, by node.
    holds: Mapping[str, tuple[RoomHold, ...]] = field(default_factory=dict)

    def held_node(self, uid: str) -> str:
        """The node make room holds devices on for the pod with this UID ('': none)."""
        for holds in self.holds.values():
            for hold in holds:
                if hold.pod.uid == uid:
                    return hold.node
        return ""


def importance(pod: Pod) -> tuple[int, float, str, str]:
    """Sort key, most important first: higher priority, then earlier start (upstream's
    ``MoreImportantPod``: a pod not started counts as starting now, the latest), then name."""
    started = pod.start_time if pod.start_time is not None else float("inf")
    return (-pod.priority, started, pod.namespace, pod.name)


def nominated_here(state: ClusterState, pod: Pod, node_name: str, nominations: Nominations) -> list[Pod]:
    """Pods nominated to ``node_name`` that ``pod`` must leave room for: not bound, not
    terminating, not ``pod`` itself, priority at least ``pod``'s (upstream ``addGENominatedPods``),
    of a scheduler this extender serves and not being bound already, most important first;
    and the pods make room holds devices for there (as they are in the cache, if they are)."""
    waiting = list(state.nominated.get(node_name, {}).values()) if nominations.nominated_pods else []
    for hold in nominations.holds.get(node_name, ()):
        cached = state.pods.get(hold.pod.key)
        waiting.append(cached if cached is not None and cached.uid == hold.pod.uid else hold.pod)
    if not waiting:
        return []
    names = nominations.scheduler_names
    held = {hold.pod.uid for hold in nominations.holds.get(node_name, ())}
    return sorted(
        (
            q
            for q in {q.uid: q for q in waiting}.values()
            if q.uid != pod.uid
            and q.priority >= pod.priority
            and not q.deleting
            and not q.node_name
            and (names is None or q.scheduler_name in names or q.uid in held)
            and q.uid not in nominations.binding
        ),
        key=importance,
    )


def releasing_claims(
    snapshot: Snapshot, pod: Pod, claims: PodClaims, node_name: str, victims_of: VictimsOf
) -> list[ResourceClaim]:
    """The claims the preemption that nominated ``pod`` to ``node_name`` is releasing (the caller
    knows the nomination: the request's pod or the cache's may be the newer): allocated
    claims reserved only for its victims there (those the preempt verb named, and pods of lower
    priority on the node that are terminating or were deleted), or for no one while being
    deleted. Between a victim's deletion and kube-controller-manager's release of its claims
    (0-20 ms measured, longer under load) these count as free for the preemptor on that node,
    and for nobody else: otherwise kube-scheduler, retrying the preemptor at once, finds the
    node full, sees no terminating pod left and preempts again elsewhere (issue 30: five
    victims for four pods). The preemptor's own ``claims`` are never among them."""
    if not node_name or pod.node_name:
        return []
    state = snapshot.state
    gone = set(victims_of(pod.uid, node_name))
    gone.update(
        p.uid
        for p in state.pods_by_node.get(node_name, {}).values()
        if p.deleting and p.priority < pod.priority
    )
    gone.update(
        uid
        for uid, (node, priority) in state.deleted_pods.items()
        if node == node_name and priority < pod.priority
    )
    if not gone:
        return []
    keep = {c.key for c in claims.ordered}
    out: list[ResourceClaim] = []
    for claim in snapshot.claims.values():
        if claim.allocation is None or claim.key in keep:
            continue
        uids = [entry.get("uid") for entry in claim.reserved_for]
        if (uids and all(uid in gone for uid in uids)) or (not uids and claim.deleting):
            out.append(claim)
    return out


# --- What the preempt verb named, and what a nominated preemptor may use ---------------------------

#: How many preemptions' victims are remembered.
MAX_REMEMBERED_PREEMPTIONS = 4096


class Preempted:
    """The victims the preempt verb named on each node, per preemptor UID, for ``seconds``: what
    pods nominated by those preemptions keep (pure: the clock is injected)."""

    def __init__(
        self, seconds: float, clock: Callable[[], float], size: int = MAX_REMEMBERED_PREEMPTIONS
    ) -> None:
        self._by_pod: TTLCache[str, dict[str, frozenset[str]]] = TTLCache(size, seconds, timer=clock)

    def __len__(self) -> int:
        return len(self._by_pod)

    def remember(self, pod_uid: str, victims: Mapping[str, Iterable[str]]) -> None:
        self._by_pod[pod_uid] = {node: frozenset(uids) for node, uids in victims.items()}

    def victims_of(self, pod_uid: str, node: str) -> frozenset[str]:
        return self._by_pod.get(pod_uid, {}).get(node, frozenset())


def nominated_node(state: ClusterState, pod: Pod) -> str:
    """The node a preemption nominated the pod to, as the request or the cache shows it."""
    if pod.nominated_node_name:
        return pod.nominated_node_name
    cached = state.pods.get(pod.key)
    if cached is None or cached.uid != pod.uid or cached.node_name:
        return ""
    return cached.nominated_node_name


# --- What nominations change on a node, for one pod ------------------------------------------------


def adjustments(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    names: Sequence[str],
    nominations: Nominations | None,
    victims_of: VictimsOf,
    *,
    releasing: bool = True,
) -> dict[str, NodeAdjustment]:
    """The nodes among ``names`` where nominations change what fits for ``pod``: those where
    pods nominated ahead of it keep devices (``nominations`` None: none, as the in-tree plugin),
    and, with ``releasing``, the node a preemption nominated ``pod`` to while its victims'
    claims are being released (:func:`releasing_claims`). Few nodes: only those with a nomination."""
    if not claims.allocates:
        return {}
    state = snapshot.state
    out: dict[str, NodeAdjustment] = {}
    if nominations is not None and ((nominations.nominated_pods and state.nominated) or nominations.holds):
        wanted = set(names)
        where = [*(state.nominated if nominations.nominated_pods else ()), *nominations.holds]
        for name in dict.fromkeys(where):
            if name in wanted:
                waiting = _waiting(snapshot, pod, name, nominations)
                if waiting:
                    out[name] = NodeAdjustment(waiting)
    target = ""
    if releasing:
        target = nominated_node(state, pod) or (nominations.held_node(pod.uid) if nominations else "")
    if target and target in names:
        freeing = releasing_claims(snapshot, pod, claims, target, victims_of)
        if freeing:
            out[target] = NodeAdjustment(out.get(target, UNCHANGED).waiting, tuple(freeing))
    return out


def _waiting(
    snapshot: Snapshot, pod: Pod, node_name: str, nominations: Nominations | None
) -> tuple[Waiting, ...]:
    """The pods nominated to ``node_name`` ahead of ``pod``, most important first, each with
    the pods its own preemption is evicting there: the victims the preempt verb named for it,
    and the lower-priority pods there that are terminating."""
    if nominations is None:
        return ()
    state = snapshot.state
    on_node = state.pods_by_node.get(node_name, {}).values()
    out = []
    holds = {hold.pod.uid: hold for hold in nominations.holds.get(node_name, ())}
    for waiting in nominated_here(state, pod, node_name, nominations):
        named = nominations.victims_of(waiting.uid, node_name)
        gone = tuple(p for p in on_node if p.uid in named or (p.deleting and p.priority < waiting.priority))
        hold = holds.get(waiting.uid)
        freeing = _freeing(snapshot, hold) if hold is not None else ()
        out.append(Waiting(waiting, gone, made_room=hold is not None, freeing=freeing))
    return tuple(out)


def _freeing(snapshot: Snapshot, hold: RoomHold) -> tuple[ResourceClaim, ...]:
    """The claims the pods make room moves for ``hold`` held, still allocated and reserved for
    none but them: free for the held pod, whether or not the cache still shows the pods (a
    deleted pod's claim is released a moment after the pod goes)."""
    out = []
    for key in hold.claims:
        claim = snapshot.claims.get(key)
        if (
            claim is not None
            and claim.allocation is not None
            and all(entry.get("uid") in hold.moved for entry in claim.reserved_for)
        ):
            out.append(claim)
    return tuple(out)
