"""The make-room mover's one write: evicting a pod through the Eviction API, and what its
answer means (:mod:`extender.scheduling.make_room_mover` decides what to do about it).

Never a plain DELETE: ``pods/eviction`` with the pod's UID as precondition, so the API server
checks every PodDisruptionBudget and never evicts a same-named replacement. An answer that does
not say whether the eviction was carried out (none, a 500 other than the two-budgets refusal, a
proxy's or kube-apiserver's own timeout) is settled by reading the pod.
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.cluster.api import (
    ApiConflict,
    ApiNotFound,
    ApiTooManyRequests,
    ClusterAPI,
    ClusterAPIError,
    FencedByStore,
    NotLeading,
)
from extender.model.core import Pod

#: kube-apiserver's answer when more than one budget selects a pod (a 500: never evictable).
MORE_THAN_ONE_BUDGET = "more than one PodDisruptionBudget"
#: Outcomes of ``dra_extender_make_room_evictions_total``.
EVICTION_OUTCOMES = ("evicted", "gone", "budget", "throttled", "refused", "error")


@dataclass(frozen=True, slots=True)
class Evicted:
    """What an eviction came to: ``outcome`` (one of :data:`EVICTION_OUTCOMES`) and why."""

    outcome: str
    why: str = ""
    #: Refused because this replica does not lead (its fence, or the store's).
    not_leading: bool = False
    #: Neither the answer nor the pod says whether it was evicted.
    unknown: bool = False

    @property
    def moved(self) -> bool:
        """The pod is gone or going: what it held is being released."""
        return self.outcome in ("evicted", "gone")


async def evict(api: ClusterAPI, pod: Pod) -> Evicted:
    """Evict ``pod`` (its UID as precondition) and say what came of it."""
    name = f"{pod.namespace}/{pod.name}"
    try:
        await api.evict_pod(pod.namespace, pod.name, pod.uid)
    except ApiTooManyRequests as exc:
        return Evicted("budget" if exc.budget else "throttled", f"evicting {name} refused: {exc}")
    except (ApiNotFound, ApiConflict):
        return Evicted("gone")  # deleted, or replaced by a pod of the same name: no longer here
    except (NotLeading, FencedByStore) as exc:
        return Evicted("refused", f"evicting {name} not sent or refused: {exc}", not_leading=True)
    except ClusterAPIError as exc:
        if exc.code == 403 or (exc.code == 500 and MORE_THAN_ONE_BUDGET in str(exc)):
            return Evicted("refused", f"evicting {name} refused: {exc}")
        landed = await _landed(api, pod)
        if landed:
            return Evicted("evicted")  # the answer was lost, the eviction was not
        return Evicted("error", f"evicting {name} failed: {exc}", unknown=landed is None)
    return Evicted("evicted")


async def _landed(api: ClusterAPI, pod: Pod) -> bool | None:
    """After an eviction with no clear answer: whether the API server shows the pod gone or
    going (None: it could not be asked either)."""
    try:
        current = await api.get_pod(pod.namespace, pod.name)
    except ApiNotFound:
        return True
    except ClusterAPIError:
        return None
    meta = current.get("metadata") or {}
    return meta.get("uid") != pod.uid or bool(meta.get("deletionTimestamp"))
