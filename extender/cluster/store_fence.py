"""Whether the API server itself refuses this replica's writes when it does not lead
(store-enforced fencing).

The process-side fence (:meth:`LeaseElector.may_write`, checked right before each write is sent)
cannot recall a write already sent: one delayed in the network past a successor's takeover would
still be applied. ``manifests/`` therefore ship a ValidatingAdmissionPolicy
(:data:`~extender.cluster.api.FENCE_POLICY`) whose parameter is the Lease: kube-apiserver admits
a claim, Binding or pod-status write of the extender's ServiceAccount only when the Lease's
``holderIdentity`` starts with the writer's pod name (from its pod-bound token) and ``_``, at the
moment the write arrives. This module reads what the API server has and says whether that fence
holds for this replica (:class:`FenceState`):

- ``enforced``: a policy for this replica's user and a Deny binding on its Lease are installed,
  and its credentials and Lease identity let the policy tell it apart from the other replicas;
- ``absent``: no such policy or binding: the process-side fence still holds, the network case
  (a write delayed past a takeover) is open;
- ``unusable``: installed, but it cannot tell this replica apart (its token is not bound to its
  pod, or its Lease identity does not start with its pod name) or its binding names another Lease;
- ``unknown``: the API server could not be asked (no permission to read the policies, an error).

:func:`judge` is pure; :func:`read` asks the API server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from extender.cluster.api import FENCE_POLICY, ClusterAPIError

if TYPE_CHECKING:  # the Kubernetes client is imported only where a cluster is used
    from extender.cluster.kube import RawKube

#: The user's ``extra`` key kube-apiserver fills from a pod-bound ServiceAccount token.
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
STATES = ("enforced", "absent", "unusable", "unknown")
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


@dataclass(frozen=True, slots=True)
class FenceState:
    state: str
    detail: str
    #: Enforced: the Lease the fence checks (namespace, name), and this replica's pod.
    lease: tuple[str, str] | None = None
    pod: str = ""

    def admits(self, holder: str | None) -> bool:
        """Whether the fence would admit this replica's writes with the Lease held by ``holder``
        (not enforced: it admits everything)."""
        if self.state != "enforced":
            return True
        return bool(holder) and str(holder).startswith(self.pod + "_")

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"store fence state {self.state!r} is not one of {', '.join(STATES)}")


@dataclass(frozen=True, slots=True)
class Writer:
    """Who this replica is to the API server (a SelfSubjectReview's answer)."""

    username: str
    #: The pod its token is bound to ('' when the token is not pod-bound).
    pod: str = ""

    @classmethod
    def from_review(cls, review: dict[str, Any]) -> Writer:
        info = ((review.get("status") or {}).get("userInfo")) or {}
        pods = (info.get("extra") or {}).get(POD_NAME_EXTRA) or []
        return cls(str(info.get("username") or ""), str(pods[0]) if pods else "")


def judge(
    writer: Writer,
    identity: str | None,
    lease: tuple[str, str] | None,
    policies: Sequence[dict[str, Any]],
    bindings: Sequence[dict[str, Any]],
) -> FenceState:
    """The fence's state for a replica. ``identity`` and ``lease`` (namespace, name): this
    replica's own Lease when it elects (``--leader-elect``); None when kube-scheduler in its pod
    holds the Lease (the sidecar deployment)."""
    ours = [p for p in policies if _fences(p, writer.username)]
    if not ours:
        return FenceState(
            "absent", f"no ValidatingAdmissionPolicy {FENCE_POLICY}* checks {writer.username}'s writes"
        )
    names = {(p.get("metadata") or {}).get("name") for p in ours}
    denying = [b for b in bindings if (b.get("spec") or {}).get("policyName") in names and _denies(b)]
    if not denying:
        return FenceState(
            "absent", f"{', '.join(sorted(map(str, names)))} is installed but no binding denies with it"
        )
    on_lease = [b for b in denying if lease is None or _param(b) == lease]
    if not on_lease:
        found = ", ".join(f"{ns}/{name}" for ns, name in sorted({_param(b) for b in denying}))
        assert lease is not None
        return FenceState(
            "unusable",
            f"the fence's binding names Lease {found}, this replica elects on {lease[0]}/{lease[1]}",
        )
    if not writer.pod:
        return FenceState(
            "unusable",
            f"{writer.username}'s token is not bound to a pod: the policy cannot tell the replicas apart "
            "(every write of this replica is refused)",
        )
    if identity is not None and not identity.startswith(writer.pod + "_"):
        return FenceState(
            "unusable",
            f"the Lease identity {identity!r} does not start with the pod name {writer.pod!r} and '_' "
            "(every write of this replica is refused)",
        )
    binding = on_lease[0]
    ns, name = _param(binding)
    return FenceState(
        "enforced",
        f"binding {(binding.get('metadata') or {}).get('name')} on Lease {ns}/{name}, pod {writer.pod}",
        (ns, name),
        writer.pod,
    )


def read(raw: RawKube, identity: str | None, lease: tuple[str, str] | None) -> FenceState:
    """Ask the API server (a SelfSubjectReview, the policies and their bindings)."""
    try:
        review = raw.request(
            "POST",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        policies = raw.request("GET", f"{ADMISSION}/validatingadmissionpolicies").get("items") or []
        bindings = raw.request("GET", f"{ADMISSION}/validatingadmissionpolicybindings").get("items") or []
    except ClusterAPIError as exc:
        return FenceState("unknown", f"reading the admission policies: {exc}")
    return judge(Writer.from_review(review), identity, lease, policies, bindings)


def _fences(policy: dict[str, Any], username: str) -> bool:
    """One of ours (by name), with the Lease as parameter, for this user's writes."""
    meta, spec = policy.get("metadata") or {}, policy.get("spec") or {}
    if not str(meta.get("name") or "").startswith(FENCE_POLICY):
        return False
    if (spec.get("paramKind") or {}).get("kind") != "Lease":
        return False
    return any(f"'{username}'" in str(c.get("expression") or "") for c in spec.get("matchConditions") or [])


def _denies(binding: dict[str, Any]) -> bool:
    return "Deny" in ((binding.get("spec") or {}).get("validationActions") or [])


def _param(binding: dict[str, Any]) -> tuple[str, str]:
    ref = (binding.get("spec") or {}).get("paramRef") or {}
    return str(ref.get("namespace") or ""), str(ref.get("name") or "")
