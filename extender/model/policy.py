"""policy/v1 PodDisruptionBudgets, as far as preemption reads them, and metav1 label selectors.

DefaultPreemption (``filterPodsWithPDBViolation``, pkg/scheduler/framework/preemption) reads a
budget's namespace, ``spec.selector``, ``status.disruptionsAllowed`` and
``status.disruptedPods``; a nil or empty selector matches nothing there (until 1.37; from 1.38,
kubernetes#141785, an empty selector ``{}`` matches every pod of the budget's namespace and a
pod without labels is no longer skipped), and
neither does one that ``metav1.LabelSelectorAsSelector`` cannot convert.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from extender.model.errors import ObjectError
from extender.model.reader import Reader

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present  # DoesNotExist


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A converted ``metav1.LabelSelector``: every requirement must hold (no requirement: all)."""

    requirements: tuple[LabelRequirement, ...]

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)


def parse_label_selector(reader: Reader) -> LabelSelector:
    """``metav1.LabelSelectorAsSelector`` for a selector that is set: matchLabels are ``In``
    with one value; ``In``/``NotIn`` need values, ``Exists``/``DoesNotExist`` none. Raises
    ObjectError where the conversion fails."""
    requirements = [
        LabelRequirement(str(k), "In", frozenset({str(v)})) for k, v in reader.mapping("matchLabels").items()
    ]
    for expr in reader.readers("matchExpressions"):
        operator, values = expr.string("operator"), expr.strings("values")
        if operator not in _OPERATORS:
            raise ObjectError(f"{expr.path}.operator: {operator!r} is not a valid label selector operator")
        if operator in ("In", "NotIn") and not values:
            raise ObjectError(f"{expr.path}.values: must be specified when operator is {operator}")
        if operator in ("Exists", "DoesNotExist") and values:
            raise ObjectError(f"{expr.path}.values: may not be specified when operator is {operator}")
        requirements.append(LabelRequirement(expr.string("key"), operator, frozenset(values)))
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    #: None: the budget protects no pod (no selector, an empty one, or one that does not convert).
    selector: LabelSelector | None
    disruptions_allowed: int
    #: ``status.disruptedPods``: pod names the API server has already counted against the budget.
    disrupted_pods: frozenset[str]
    #: The selector is the empty ``{}`` (``selector`` is None then).
    selects_all: bool = False
    #: The object as read.
    raw: dict[str, object] = field(default_factory=dict, repr=False, compare=False)

    def protects(self, namespace: str, labels: Mapping[str, str], *, as_policy_v1: bool = False) -> bool:
        """Whether a pod with these labels counts against this budget.

        ``as_policy_v1``: kube-scheduler 1.38's reading (kubernetes#141785), as policy/v1
        defines selectors: ``{}`` selects every pod of the namespace, and a pod without labels is
        matched like any other. Before, an empty selector and an unlabelled pod matched nothing."""
        if namespace != self.namespace:
            return False
        if self.selects_all:
            return as_policy_v1
        if self.selector is None or (not labels and not as_policy_v1):
            return False
        return self.selector.matches(labels)


def parse_pod_disruption_budget(obj: dict[str, object]) -> PodDisruptionBudget:
    meta = Reader(obj.get("metadata"), "metadata")
    spec = Reader(obj.get("spec"), "spec")
    status = Reader(obj.get("status"), "status")
    selector: LabelSelector | None = None
    selects_all = False
    if spec.has("selector"):
        try:
            selector = parse_label_selector(spec.sub("selector"))
        except ObjectError:
            selector = None  # "This object has an invalid selector, it does not match the pod"
        if selector is not None and selector.empty:
            selector, selects_all = None, True  # 1.37: "A PDB with a nil or empty selector matches nothing"
    return PodDisruptionBudget(
        namespace=meta.string("namespace", "default"),
        name=meta.string("name"),
        selector=selector,
        disruptions_allowed=status.integer("disruptionsAllowed"),
        disrupted_pods=frozenset(str(k) for k in status.mapping("disruptedPods")),
        selects_all=selects_all,
        raw=obj,
    )
