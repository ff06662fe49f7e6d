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
then count as taken for every pod of lower or equal priority. Pure: a snapshot in, decisions out.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cachetools import TTLCache

from extender.cluster.state import ClusterState, Key
from extender.model.core import Node, Pod
from extender.model.dra import Allocation, ResourceClaim, parse_allocation
from extender.model.reader import Reader
from extender.scheduling.decide import extended as er
from extender.scheduling.decide.decision import DEFAULT_NODE_TIMEOUT, NOT_EVALUATED, Assessment, NodeDecision
from extender.scheduling.decide.prefilter import PodClaims
from extender.scheduling.decide.snapshot import Snapshot

#: (preemptor UID, node name) -> UIDs of the victims the preempt verb named for it there.
VictimsOf = Callable[[str, str], frozenset[str]]


def no_victims(uid: str, node: str) -> frozenset[str]:
    return frozenset()


@dataclass(frozen=True, slots=True)
class Nominations:
    """Whose nominations keep devices, and what their preemptions free."""

    #: Only pods of these schedulers (upstream keeps room only for the pods in its own queue);
    #: None: any pod (offline, where no scheduler is named).
    scheduler_names: frozenset[str] | None = None
    #: The victims the preempt verb named, per preemptor and node.
    victims_of: VictimsOf = no_victims
    #: UIDs of pods whose bind is being written: those writes hold their devices already.
    binding: frozenset[str] = frozenset()


def importance(pod: Pod) -> tuple[int, float, str, str]:
    """Sort key, most important first: higher priority, then earlier start (upstream's
    ``MoreImportantPod``: a pod not started counts as starting now, the latest), then name."""
    started = pod.start_time if pod.start_time is not None else float("inf")
    return (-pod.priority, started, pod.namespace, pod.name)


def nominated_here(state: ClusterState, pod: Pod, node_name: str, nominations: Nominations) -> list[Pod]:
    """Pods nominated to ``node_name`` that ``pod`` must leave room for: not bound, not
    terminating, not ``pod`` itself, priority at least ``pod``'s (upstream ``addGENominatedPods``),
    of a scheduler this extender serves and not being bound already, most important first."""
    waiting = state.nominated.get(node_name)
    if not waiting:
        return []
    names = nominations.scheduler_names
    return sorted(
        (
            q
            for q in waiting.values()
            if q.uid != pod.uid
            and q.priority >= pod.priority
            and not q.deleting
            and not q.node_name
            and (names is None or q.scheduler_name in names)
            and q.uid not in nominations.binding
        ),
        key=importance,
    )


def held_claims(claims: Mapping[Key, ResourceClaim], pod: Pod) -> list[ResourceClaim]:
    """The claims reserved for ``pod``: those its ``spec.resourceClaims`` name and its
    extended-resource claim."""
    names = [ref.resource_claim_name or pod.claim_statuses.get(ref.name) for ref in pod.claims]
    status = pod.raw.get("status") if isinstance(pod.raw.get("status"), dict) else None
    extended = (status or {}).get("extendedResourceClaimStatus")
    recorded = extended.get("resourceClaimName") if isinstance(extended, dict) else None
    if isinstance(recorded, str) and recorded:
        names.append(recorded)
    elif er.may_request(pod):
        names.append(er.claim_name(pod))  # created by a bind whose status patch did not land
    out: list[ResourceClaim] = []
    for name in dict.fromkeys(n for n in names if n):
        claim = claims.get((pod.namespace, name))
        if claim is not None and claim.reserved_for_uid(pod.uid):
            out.append(claim)
    return out


def freed_allocations(
    claims: Mapping[Key, ResourceClaim],
    pods: Iterable[Pod],
    evicted: Collection[str],
    keep: Collection[Key] = (),
) -> list[Allocation]:
    """The allocations that evicting ``evicted`` (UIDs, ``pods`` among them) would release: the
    claims those pods hold that are reserved for nobody else. The resourceclaim controller
    deallocates a claim when its last reservation goes, so a claim shared with a pod that stays
    keeps its devices. ``keep``: claims that stay whoever goes (the pod that asks uses them: it
    is not in their ``reservedFor`` before its bind, and evicting the others would deallocate
    them under it)."""
    out: list[Allocation] = []
    seen: set[Key] = set(keep)
    for pod in pods:
        for claim in held_claims(claims, pod):
            if claim.key in seen or claim.allocation is None:
                continue
            seen.add(claim.key)
            if all(entry.get("uid") in evicted for entry in claim.reserved_for):
                out.append(claim.allocation)
    return out


def releasing(
    snapshot: Snapshot, pod: Pod, node_name: str, victims_of: VictimsOf, keep: Collection[Key] = ()
) -> list[ResourceClaim]:
    """The claims the preemption that nominated ``pod`` to ``node_name`` is releasing (the caller
    knows the nomination: the request's pod or the cache's may be the newer): allocated
    claims reserved only for its victims there (those the preempt verb named, and pods of lower
    priority on the node that are terminating or were deleted), or for no one while being
    deleted. Between a victim's deletion and kube-controller-manager's release of its claims
    (0-20 ms measured, longer under load) these count as free for the preemptor on that node,
    and for nobody else: otherwise kube-scheduler, retrying the preemptor at once, finds the
    node full, sees no terminating pod left and preempts again elsewhere (issue 30: five
    victims for four pods). ``keep``: the preemptor's own claims."""
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
    out: list[ResourceClaim] = []
    for claim in snapshot.claims.values():
        if claim.allocation is None or claim.key in keep:
            continue
        uids = [entry.get("uid") for entry in claim.reserved_for]
        if (uids and all(uid in gone for uid in uids)) or (not uids and claim.deleting):
            out.append(claim)
    return out


def own_claims(claims: PodClaims) -> set[Key]:
    """The keys of the claims a pod uses (never freed by a what-if on its behalf)."""
    return {c.key for c in claims.ordered}


def reservations(
    snapshot: Snapshot,
    pod: Pod,
    node: Node,
    nominations: Nominations,
    *,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> list[Allocation]:
    """The devices the pods nominated to ``node`` ahead of ``pod`` keep there, most important
    pod first (each allocated with the devices of those before it taken)."""
    held: list[Allocation] = []
    state = snapshot.state
    for waiting in nominated_here(state, pod, node.name, nominations):
        claims = snapshot.claims_of(waiting)
        if claims.error is not None or claims.reason is not None or not claims.allocates:
            continue  # nothing to keep: it cannot be allocated anyway, or it holds its devices already
        named = nominations.victims_of(waiting.uid, node.name)
        gone = [
            p
            for p in state.pods_by_node.get(node.name, {}).values()
            if p.uid in named or (p.deleting and p.priority < waiting.priority)
        ]
        freed = freed_allocations(snapshot.claims, gone, {p.uid for p in gone}, own_claims(claims))
        with snapshot.what_if(freed=freed, held=held):
            decision = snapshot.decide(claims, node, timeout=timeout)
        if decision.fits:
            held.extend(parse_allocation(Reader(a, "allocation")) for a in decision.allocations.values())
    return held


def decide(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    node: Node,
    *,
    nominations: Nominations | None,
    freed: Sequence[Allocation] = (),
    held: Sequence[Allocation] | None = None,
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
    gone: Collection[str] = (),
) -> NodeDecision:
    """:meth:`Snapshot.decide` with the devices of ``freed`` free and those that pods nominated
    to the node ahead of ``pod`` keep taken (``nominations`` None: nominations are ignored, as
    the in-tree plugin does; ``held``: those devices, when the caller has them already)."""
    return _judge(snapshot, pod, claims, node, nominations, freed, held, timeout, summarize=False, gone=gone)[
        0
    ]


def assess(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    node: Node,
    *,
    nominations: Nominations | None,
    freed: Sequence[Allocation] = (),
    timeout: float | None = DEFAULT_NODE_TIMEOUT,
) -> Assessment:
    """Filter's and prioritize's answer for a node where nominated pods may keep devices: like
    :meth:`Snapshot.summarize`, with the kept devices taken (free devices left counted too) and
    those of ``freed`` free."""
    _, assessment = _judge(snapshot, pod, claims, node, nominations, freed, None, timeout, summarize=True)
    assert assessment is not None
    return assessment


def _judge(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    node: Node,
    nominations: Nominations | None,
    freed: Sequence[Allocation],
    held: Sequence[Allocation] | None,
    timeout: float | None,
    *,
    summarize: bool,
    gone: Collection[str] = (),
) -> tuple[NodeDecision, Assessment | None]:
    if held is None:
        held = (
            reservations(snapshot, pod, node, nominations, timeout=timeout)
            if nominations is not None and claims.allocates
            else []
        )
    if not freed and not held and not gone:
        decision = snapshot.decide(claims, node, timeout=timeout)
        return decision, snapshot.summarize(claims, node, decision) if summarize else None
    with snapshot.what_if(freed=freed, held=held, gone=gone):
        decision = snapshot.decide(claims, node, timeout=timeout)
        assessment = snapshot.summarize(claims, node, decision) if summarize else None
    kept = bool(held) and not decision.fits and bool(decision.reason)
    if kept and nominations is not None and _fits_unheld(snapshot, claims, node, freed, timeout):
        waiting = ", ".join(
            f"{q.namespace}/{q.name}" for q in nominated_here(snapshot.state, pod, node.name, nominations)
        )
        decision.reason = (
            f"{decision.reason} (devices here are kept for {waiting}, nominated to this node by a preemption)"
        )
        if assessment is not None:
            assessment = Assessment(
                False,
                decision.reason,
                decision.error,
                timed_out=decision.timed_out,
                resolvable=decision.resolvable,
            )
    return decision, assessment


def _fits_unheld(
    snapshot: Snapshot, claims: PodClaims, node: Node, freed: Sequence[Allocation], timeout: float | None
) -> bool:
    with snapshot.what_if(freed=freed):
        return snapshot.decide(claims, node, timeout=timeout).fits


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


def releasing_for(
    snapshot: Snapshot, pod: Pod, claims: PodClaims, node_name: str, victims_of: VictimsOf
) -> list[ResourceClaim]:
    """Claims the preemption that nominated the pod to ``node_name`` is releasing there
    (:func:`releasing`); none when the pod is not nominated to that node."""
    if nominated_node(snapshot.state, pod) != node_name:
        return []
    return releasing(snapshot, pod, node_name, victims_of, own_claims(claims))


def while_released(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    node: Node,
    decision: NodeDecision,
    *,
    nominations: Nominations | None,
    victims_of: VictimsOf,
    timeout: float | None,
) -> tuple[NodeDecision, list[ResourceClaim]]:
    """A bind's decision for a preemptor on its nominated node with the devices of its victims'
    claims free, and those claims (the bind writes once they are released); or ``decision``
    unchanged, and none."""
    freeing = releasing_for(snapshot, pod, claims, node.name, victims_of)
    if not freeing:
        return decision, []
    freed = decide(
        snapshot,
        pod,
        claims,
        node,
        nominations=nominations,
        freed=[c.allocation for c in freeing if c.allocation is not None],
        timeout=timeout,
    )
    return (freed, freeing) if freed.fits else (decision, [])


# --- Filter's answers for nodes where a nomination changes what fits, each node judged on its own.
#
# Filter groups look-alike nodes and judges one per group (:meth:`Snapshot.node_groups`). Two
# kinds of node get an answer of their own afterwards:
#
# * nodes where pods nominated ahead of the filtered pod keep devices (device preemption:
#   :func:`kept_for_others`): those devices are taken there;
# * the node a preemption nominated the filtered pod itself to, while its victims' claims are
#   being released (:func:`preemptor`): those devices are free there, for this pod only.
#
# Pure: a snapshot in, answers changed in place.


@dataclass(slots=True)
class Judged:
    """One filter call's nodes: per node name its group, one answer per group."""

    names: Sequence[str]
    groups: list[Hashable]
    answers: dict[Hashable, Assessment]
    lookup: Mapping[str, Node]

    def judge_alone(self, i: int, tag: str, answer: Assessment) -> None:
        """The node at ``i`` in a group of its own, with this answer."""
        self.groups[i] = (tag, self.names[i])
        self.answers[self.groups[i]] = answer


def kept_for_others(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    judged: Judged,
    nominations: Nominations,
    deadline: float,
    clock: Callable[[], float],
    timeout: float | None,
) -> None:
    """Nodes where pods nominated ahead of this one keep devices are judged on their own, with
    those devices taken (see :mod:`extender.scheduling.preempt.nominated`); within the filter budget,
    as every node (past it: not evaluated)."""
    state = snapshot.state
    targets = {n for n in state.nominated if nominated_here(state, pod, n, nominations)}
    if not targets:
        return
    for i, name in enumerate(judged.names):
        node = judged.lookup.get(name)
        if name not in targets or node is None:
            continue
        if clock() > deadline:
            judged.judge_alone(i, "nominated", NOT_EVALUATED)
            continue
        judged.judge_alone(
            i,
            "nominated",
            assess(snapshot, pod, claims, node, nominations=nominations, timeout=timeout),
        )


def preemptor(
    snapshot: Snapshot,
    pod: Pod,
    claims: PodClaims,
    judged: Judged,
    target: str,
    freeing: Sequence[ResourceClaim],
    nominations: Nominations | None,
    timeout: float | None,
) -> None:
    """The node ``target`` a preemption nominated the pod to, judged on its own with the devices
    of ``freeing`` (its victims' claims, being released: :func:`releasing`) free. The
    bind holds them and writes once the release shows (:mod:`extender.scheduling.write.binder`)."""
    node = judged.lookup.get(target)
    if node is None or not freeing:
        return
    freed = [c.allocation for c in freeing if c.allocation is not None]
    for i, name in enumerate(judged.names):
        if name != target:
            continue
        if judged.answers[judged.groups[i]].fits:
            return
        answer = assess(snapshot, pod, claims, node, nominations=nominations, freed=freed, timeout=timeout)
        judged.judge_alone(i, "preemptor", answer)
