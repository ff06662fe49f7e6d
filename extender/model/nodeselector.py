"""core/v1 NodeSelector: parsing and matching against a node's name and labels."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.model.reader import Reader


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, value: str | None) -> bool:
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt"):
            if value is None or len(self.values) != 1:
                return False
            try:
                have, want = int(value), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True, slots=True)
class Term:
    match_expressions: tuple[Requirement, ...]
    match_fields: tuple[Requirement, ...]

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term selects nothing
        for req in self.match_expressions:
            if not req.matches(labels.get(req.key)):
                return False
        for req in self.match_fields:
            if (
                req.key != "metadata.name"
                or req.operator not in ("In", "NotIn")
                or not req.matches(node_name)
            ):
                return False
        return True

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.match_expressions:
            out["matchExpressions"] = [r.to_dict() for r in self.match_expressions]
        if self.match_fields:
            out["matchFields"] = [r.to_dict() for r in self.match_fields]
        return out


@dataclass(frozen=True, slots=True)
class NodeSelector:
    terms: tuple[Term, ...]

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        return any(term.matches(node_name, labels) for term in self.terms)

    def to_dict(self) -> dict[str, Any]:
        return {"nodeSelectorTerms": [t.to_dict() for t in self.terms]}


def _requirements(items: list[Reader]) -> tuple[Requirement, ...]:
    return tuple(Requirement(r.string("key"), r.string("operator"), r.strings("values")) for r in items)


def parse_node_selector(reader: Reader) -> NodeSelector:
    return NodeSelector(
        tuple(
            Term(_requirements(term.readers("matchExpressions")), _requirements(term.readers("matchFields")))
            for term in reader.readers("nodeSelectorTerms")
        )
    )


def node_name_selector(node_name: str) -> NodeSelector:
    """``matchFields metadata.name In [node]``: the selector of a node-local allocation."""
    return NodeSelector((Term((), (Requirement("metadata.name", "In", (node_name,)),)),))
