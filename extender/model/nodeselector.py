"""core/v1 NodeSelector: parsing and matching against a node's name and labels.

Parsing checks what component-helpers' ``nodeaffinity.NewNodeSelector`` checks (operators,
value counts, integer values for Gt/Lt, label keys and values): a selector that passes API
validation can still fail there, and kube-scheduler then reports an error, not "no match".
Such a selector keeps its ``error``; matching it raises :class:`NodeSelectorError`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from extender.model.reader import Reader
from extender.names import LABEL_VALUE_CHECK, qualified_name

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
FIELD_OPERATORS = ("In", "NotIn")
INT64 = (-(2**63), 2**63 - 1)


class NodeSelectorError(ValueError):
    """A node selector that kube-scheduler cannot turn into a selector (``NewNodeSelector`` fails)."""


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
            # Parsing guarantees one integer value; the node's label must parse as int64 too.
            if value is None or len(self.values) != 1 or not _is_int64(value):
                return False
            have, want = int(value), int(self.values[0])
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
            # fields.Set of a node holds only metadata.name; other keys read as "".
            value = node_name if req.key == "metadata.name" else ""
            if (value == req.values[0]) != (req.operator == "In"):
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
    #: Why ``NewNodeSelector`` would refuse this selector (None: it parses).
    error: str | None = None

    def matches(self, node_name: str, labels: Mapping[str, str]) -> bool:
        if self.error is not None:
            raise NodeSelectorError(self.error)
        return any(term.matches(node_name, labels) for term in self.terms)

    def describe(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        return {"nodeSelectorTerms": [t.to_dict() for t in self.terms]}


def _requirements(items: list[Reader]) -> tuple[Requirement, ...]:
    return tuple(Requirement(r.string("key"), r.string("operator"), r.strings("values")) for r in items)


def _go_strings(values: tuple[str, ...]) -> str:
    """A []string as Go's %#v prints it (how field.Invalid shows a value list; absent is nil)."""
    if not values:
        return "[]string(nil)"
    return "[]string{" + ", ".join(json.dumps(v) for v in values) + "}"


def _invalid(path: str, shown: str, detail: str) -> str:
    """field.Invalid(path, value, detail).Error()."""
    return f"{path}: Invalid value: {shown}: {detail}"


def _unsupported(path: str, value: str, supported: tuple[str, ...]) -> str:
    allowed = ", ".join(json.dumps(v) for v in supported)
    return f"{path}.operator: Unsupported value: {json.dumps(value)}: supported values: {allowed}"


def _label_errors(req: Requirement, path: str) -> list[str]:
    """labels.NewRequirement's checks (apimachinery), as field errors under ``path``."""
    errors = []
    problems = qualified_name(req.key)
    if problems:
        errors.append(_invalid(f"{path}.key", json.dumps(req.key), "; ".join(problems)))
    at, op, vals = f"{path}.values", req.operator, req.values
    if op in ("In", "NotIn") and not vals:
        errors.append(
            _invalid(at, _go_strings(vals), "for 'in', 'notin' operators, values set can't be empty")
        )
    elif op in ("Exists", "DoesNotExist") and vals:
        errors.append(
            _invalid(at, _go_strings(vals), "values set must be empty for exists and does not exist")
        )
    elif op in ("Gt", "Lt"):
        if len(vals) != 1:
            errors.append(
                _invalid(at, _go_strings(vals), "for 'Gt', 'Lt' operators, exactly one value is required")
            )
        errors.extend(
            _invalid(f"{at}[{i}]", json.dumps(v), "for 'Gt', 'Lt' operators, the value must be an integer")
            for i, v in enumerate(vals)
            if not _is_int64(v)
        )
    for i, v in enumerate(vals):
        problems = LABEL_VALUE_CHECK(v)
        if problems:
            errors.append(_invalid(f"{at}[{i}]", json.dumps(v), "; ".join(problems)))
    return errors


def _is_int64(text: str) -> bool:
    """strconv.ParseInt(text, 10, 64) succeeds."""
    body = text[1:] if text[:1] in "+-" else text
    if not body.isascii() or not body.isdigit():
        return False
    return INT64[0] <= int(text) <= INT64[1]


def _term_errors(term: Term, path: str) -> list[str]:
    errors: list[str] = []
    for i, req in enumerate(term.match_expressions):
        p = f"{path}.matchExpressions[{i}]"
        if req.operator not in LABEL_OPERATORS:
            errors.append(_unsupported(p, req.operator, LABEL_OPERATORS))
        else:
            errors.extend(_label_errors(req, p))
    for i, req in enumerate(term.match_fields):
        p = f"{path}.matchFields[{i}]"
        if req.operator not in FIELD_OPERATORS:
            errors.append(_unsupported(p, req.operator, FIELD_OPERATORS))
        elif len(req.values) != 1:
            errors.append(_invalid(f"{p}.values", _go_strings(req.values), "must have one element"))
    return errors


def aggregate(errors: list[str]) -> str:
    """apimachinery's errors.NewAggregate(...).Error(): one message, or a de-duplicated list."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def parse_node_selector(reader: Reader) -> NodeSelector:
    node = _single_node(reader.data)
    if node is not None:
        return node_name_selector(node)
    terms = []
    errors: list[str] = []
    for i, raw in enumerate(reader.readers("nodeSelectorTerms")):
        term = Term(_requirements(raw.readers("matchExpressions")), _requirements(raw.readers("matchFields")))
        terms.append(term)
        errors.extend(_term_errors(term, f"nodeSelectorTerms[{i}]"))
    return NodeSelector(tuple(terms), aggregate(errors) if errors else None)


def _single_node(data: dict[str, Any]) -> str | None:
    """The node of ``matchFields metadata.name In [node]`` and nothing else: the selector of
    every node-local allocation, read from each claim event, write answer and assumed write
    (1.2% of the extender's CPU at 500 x 8 went to reading it generally, issue 54); None for
    any other selector (read generally, with its errors)."""
    terms = data.get("nodeSelectorTerms")
    if len(data) != 1 or type(terms) is not list or len(terms) != 1:
        return None
    term = terms[0]
    if type(term) is not dict or len(term) != 1:
        return None
    fields = term.get("matchFields")
    if type(fields) is not list or len(fields) != 1:
        return None
    requirement = fields[0]
    if (
        type(requirement) is not dict
        or len(requirement) != 3
        or requirement.get("key") != "metadata.name"
        or requirement.get("operator") != "In"
    ):
        return None
    values = requirement.get("values")
    if type(values) is not list or len(values) != 1 or type(values[0]) is not str:
        return None
    return values[0]


@functools.lru_cache(maxsize=8192)
def node_name_selector(node_name: str) -> NodeSelector:
    """``matchFields metadata.name In [node]``: the selector of a node-local allocation. One
    per node, shared (it is immutable): every claim allocated on a node has it."""
    return NodeSelector((Term((), (Requirement("metadata.name", "In", (node_name,)),)),))
