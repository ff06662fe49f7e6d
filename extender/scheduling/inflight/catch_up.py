"""What kube-scheduler saw that the extender's cache may not show yet.

kube-scheduler and the extender watch the same objects on separate connections, so either can
be ahead. Measured with a real kube-scheduler 1.36 and kube-controller-manager (issue 30): a
pod's filter request carried its ``status.resourceClaimStatuses`` (the resourceclaim controller
had just created its claims) while the extender's pod watch had not delivered that update yet,
and the bind, which names the pod only, then found "ResourceClaim not created yet" in the cache
and failed; a preemptor's preempt request came while the claims its status named were not in
the claims cache yet, and every candidate was answered away, which parks the pod (kube-scheduler
records NodeResourcesFit as its rejector, and no claim event wakes that plugin).

So:

* :class:`SeenPods` keeps the newest version of each pod a filter or preempt request carried; a
  bind decides on the cache's pod with the claim statuses of that version when it is newer (a
  pod's ``resourceVersion`` is an etcd revision: comparable).
* :func:`lag` tells whether the cache lacks claims the pod names in its status (they exist:
  the controller creates a claim before recording its name in the pod), or (for ``spec``'s
  own claim names) has not yet seen the revision of the pod's last change.
* :func:`wait` awaits the cache (it changes on the engine's loop between two pieces of work)
  for at most a bounded time. It never blocks the loop.

Pure bookkeeping otherwise: the clock of a wait is injected.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping, Sequence

from extender.cluster.state import ClusterState, is_newer
from extender.model.core import Pod
from extender.model.dra import ResourceClaim

#: How many pods' request versions are remembered (a bind follows its filter within
#: kube-scheduler's scheduling and binding cycles: far fewer pods in between).
SEEN_PODS = 4096
#: How many entries :class:`SeenPods` gains between two looks for pods that are gone or bound: a
#: look costs one cache lookup per entry, so entries stay within this of the pods still to bind.
#: (At 256 a 30-minute soak saw the map climb for the whole run: pods deleted before their bind
#: arrive a few a minute.)
PRUNE_STEP = 64
#: How long a pod whose filter waited in vain is not waited for again (seconds).
STUCK_SECONDS = 60.0
#: How soon a wait looks at the cache again, and how seldom at most (seconds).
POLL_SECONDS = 0.005
MAX_POLL_SECONDS = 0.05


def resource_version(pod: Pod) -> str:
    meta = pod.raw.get("metadata")
    return str((meta or {}).get("resourceVersion") or "") if isinstance(meta, dict) else ""


def newer(a: Pod | None, b: Pod | None) -> Pod | None:
    """The newer of two versions of one pod (same UID); ``a`` when they cannot be told apart."""
    if a is None or b is None or a.uid != b.uid:
        return a if a is not None else b
    ra, rb = resource_version(a), resource_version(b)
    if ra and rb and ra != rb and is_newer(rb, ra):
        return b
    return a


class SeenPods:
    """The newest version of each pod that kube-scheduler sent in a request, by UID: the last
    ``size`` pods (no clock: an old entry loses to the cache's newer version anyway). A bind is
    the only reader, so a pod's entry goes when its bind is over and when the pod is gone."""

    def __init__(self, size: int = SEEN_PODS) -> None:
        self.size = size
        self._pods: dict[str, Pod] = {}
        #: Entries at the last look for pods that are gone (:meth:`forget_gone`).
        self._looked_at = 0

    def __len__(self) -> int:
        return len(self._pods)

    def remember(self, pod: Pod) -> None:
        if not pod.uid:
            return
        kept = self._pods.pop(pod.uid, None)
        self._pods[pod.uid] = newer(kept, pod) or pod
        if len(self._pods) > self.size:
            del self._pods[next(iter(self._pods))]

    def forget(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def forget_gone(self, cached: Mapping[tuple[str, str], Pod]) -> None:
        """Drop the pods no bind will ask for: gone from the cache (``ClusterState.pods``), or
        bound. Once the map has grown by ``PRUNE_STEP`` entries since the last look: amortized,
        it costs next to nothing per call."""
        if len(self._pods) < self._looked_at + PRUNE_STEP:
            return
        for uid, pod in list(self._pods.items()):
            now = cached.get((pod.namespace, pod.name))
            if now is None or now.uid != uid or now.node_name:
                del self._pods[uid]
        self._looked_at = len(self._pods)

    def newest(self, cached: Pod | None, uid: str) -> Pod | None:
        """The cache's pod, with the claim statuses of the version a request carried when that
        one is newer. Only the statuses: the spec (what the pod asks for, immutable) and
        everything else stay the cache's, so a made-up request cannot change what a bind
        writes for a real pod (a claim from a template is used only if the pod owns it:
        :mod:`extender.scheduling.decide.prefilter`). None when the cache has no pod of that UID."""
        if cached is None or cached.uid != uid:
            return None
        seen = self._pods.get(uid)
        if seen is None or newer(cached, seen) is cached or seen.claims != cached.claims:
            return cached
        if seen.claim_statuses == cached.claim_statuses:
            return cached
        return dataclasses.replace(cached, claim_statuses=dict(seen.claim_statuses))


def with_statuses(request: Pod, cached: Pod | None) -> Pod:
    """The request's pod with the claim statuses of the cache's version of it, when that version
    is newer and they differ (the resourceclaim controller recorded the pod's claims after
    kube-scheduler read it); otherwise the request's pod as it is."""
    if cached is None or cached.uid != request.uid or cached.claims != request.claims:
        return request
    if cached.claim_statuses == request.claim_statuses or newer(request, cached) is request:
        return request
    return dataclasses.replace(request, claim_statuses=dict(cached.claim_statuses))


def lag(state: ClusterState, pod: Pod, *, spec_claims: bool = True) -> str | None:
    """Why the cache is behind the pod as a request carried it, or None.

    A claim the pod's status names exists (the controller records the name after creating
    it): one not cached yet is lag. A claim ``spec`` names may not exist at all (the user has
    not created it): it is lag only while the claims cache has not seen the revision of the
    pod's last change (then the claim may have been created just before); ``spec_claims``
    False: such claims are not waited for (a quiet claims watch does not advance its revision,
    and filter, which kube-scheduler calls for one pod at a time, must not wait for a claim
    that was never created).
    """
    missing: list[str] = []
    known = True
    for ref in pod.claims:
        name = ref.resource_claim_name or pod.claim_statuses.get(ref.name)
        if not name:
            continue  # not created yet, or not needed: the pod's own version tells
        key = (pod.namespace, name)
        if key in state.claims or key in state.broken_claims:
            continue
        if ref.resource_claim_name and not spec_claims:
            continue
        missing.append(name)
        if not ref.resource_claim_name:
            known = False  # named by the status: it exists
    if not missing:
        return None
    if known:
        revision = resource_version(pod)
        seen = state.claims_seen_rv
        if not revision or (seen and not is_newer(revision, seen)):
            return None  # the claims cache is past the pod's revision: it does not exist
    return f"resourceclaims {', '.join(sorted(missing))} not in the DRA extender's cache yet"


async def wait(
    behind: Callable[[], str | None],
    *,
    seconds: float,
    clock: Callable[[], float],
    poll: float = POLL_SECONDS,
) -> str | None:
    """Await until ``behind()`` is None or ``seconds`` have passed; returns its last answer. It
    looks again after ``poll`` seconds, then less often (up to :data:`MAX_POLL_SECONDS`): a
    watch event usually arrives within milliseconds, and many waits must not busy the loop."""
    why = behind()
    if why is None or seconds <= 0:
        return why
    deadline = clock() + seconds
    while why is not None and clock() < deadline:
        await asyncio.sleep(min(poll, max(0.0, deadline - clock())))
        poll = min(poll * 2, MAX_POLL_SECONDS)
        why = behind()
    return why


def pending(state: ClusterState, pod: Pod, *, spec_claims: bool = True) -> str | None:
    """:func:`lag`, and also claims from templates the pod's status does not name yet (the
    resourceclaim controller has not created them, or the pod's update is not here yet); only
    from templates that exist (the controller cannot create the others)."""
    statuses = pod.claim_statuses
    waiting = [
        r.name
        for r in pod.claims
        if r.resource_claim_template_name
        and r.name not in statuses
        and (pod.namespace, r.resource_claim_template_name) in state.templates
    ]
    if waiting:
        return f"the claims of {', '.join(waiting)} are not created yet"
    return lag(state, pod, spec_claims=spec_claims)


async def claims_shown(
    state: ClusterState, pod: Pod, *, spec_claims: bool, seconds: float, clock: Callable[[], float]
) -> str | None:
    """Until the cache is not behind ``pod`` (:func:`lag`), at most ``seconds``."""
    return await wait(lambda: lag(state, pod, spec_claims=spec_claims), seconds=seconds, clock=clock)


async def created(
    state: ClusterState, seen: SeenPods, pod: Pod, *, seconds: float, clock: Callable[[], float]
) -> Pod:
    """Before a preemption: the newest version of the pod (the request's or the cache's), once
    its claims exist in the cache (:func:`pending`) or ``seconds`` have passed. An empty
    preempt answer parks the pod under the plugin that rejected it in kube-scheduler
    (NodeResourcesFit, say), which no claim event wakes: it must not come from the extender
    lagging behind, nor from the resourceclaim controller being a moment late."""
    if not pod.claims:
        return pod
    seen.remember(pod)

    def current() -> Pod:
        return seen.newest(state.pods.get(pod.key), pod.uid) or pod

    await wait(lambda: pending(state, current()), seconds=seconds, clock=clock)
    return current()


async def released(
    state: ClusterState, claims: Sequence[ResourceClaim], *, seconds: float, clock: Callable[[], float]
) -> str:
    """'' once the cache shows every one of ``claims`` deallocated, deleted or replaced; after
    ``seconds``, why a bind cannot write (their devices would be given twice)."""

    def holding() -> str | None:
        still = []
        for claim in claims:
            now = state.claims.get(claim.key)
            if now is not None and now.uid == claim.uid and now.allocation is not None:
                still.append(f"{claim.namespace}/{claim.name}")
        return ", ".join(still) or None

    still = await wait(holding, seconds=seconds, clock=clock)
    if still is None:
        return ""
    return (
        f"the claims of the pods preempted for this one ({still}) still hold the devices after {seconds:g}s"
    )


class Stuck:
    """Pods whose wait ran out, so that their next filters do not wait again for a while: a pod
    whose claims are never created (the controller is down) must not stall kube-scheduler's
    queue, which is served one pod at a time, on every attempt."""

    def __init__(self, clock: Callable[[], float], seconds: float = STUCK_SECONDS, size: int = SEEN_PODS):
        self.clock, self.seconds, self.size = clock, seconds, size
        self._until: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._until)

    def __contains__(self, uid: object) -> bool:
        until = self._until.get(uid) if isinstance(uid, str) else None
        return until is not None and until > self.clock()

    def mark(self, uid: str) -> None:
        now = self.clock()
        self._until.pop(uid, None)
        # Oldest first (each ends ``seconds`` after it was marked): the ended ones go from the front.
        while self._until and next(iter(self._until.values())) <= now:
            del self._until[next(iter(self._until))]
        self._until[uid] = now + self.seconds
        if len(self._until) > self.size:
            del self._until[next(iter(self._until))]


async def for_filter(
    state: ClusterState, pod: Pod, stuck: Stuck, *, seconds: float, clock: Callable[[], float]
) -> Pod:
    """Before a filter: the request's pod with the claim statuses the cache has seen since, once
    the claims it needs exist in the cache, or ``seconds`` have passed (then, for a while, its
    filters do not wait: :class:`Stuck`).

    The in-tree plugin does not even try a pod whose claims are not created yet (PreEnqueue);
    kube-scheduler has no such step for an extender, so it tries the pod, the extender rejects
    every node, and any cluster event requeues it (ExtenderName is its rejector): measured on the
    real 1.36 control plane, 23-38 attempts per template pod before its claim existed, each an
    event and a status write. Waiting here for the resourceclaim controller (milliseconds per
    pod) makes that one attempt. Claims ``spec`` names are not waited for (they may never be
    created)."""
    if not pod.claims:
        return pod

    def current() -> Pod:
        return with_statuses(pod, state.pods.get(pod.key))

    if pending(state, current(), spec_claims=False) is None or pod.uid in stuck:
        return current()
    why = await wait(lambda: pending(state, current(), spec_claims=False), seconds=seconds, clock=clock)
    if why is not None:
        stuck.mark(pod.uid)
    return current()
