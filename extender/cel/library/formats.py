"""The K8s ``format`` CEL library: named OpenAPI/Kubernetes string formats and their validators."""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import re
from collections.abc import Callable
from typing import Any

from extender.cel import types as t
from extender.cel.library.registry import Registry
from extender.cel.library.urls import parse_request_uri
from extender.cel.values import NONE, CelObject, Optional, no_such_overload

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(f"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")

Validator = Callable[[str], list[str]]


def _regex_check(rx: re.Pattern[str], limit: int, message: str) -> Validator:
    def check(value: str) -> list[str]:
        errors = []
        if len(value) > limit:
            errors.append(f"must be no more than {limit} characters")
        if not rx.match(value):
            errors.append(message)
        return errors

    return check


def _prefix(check: Validator) -> Validator:
    """``...Prefix`` formats accept a trailing '-' (generateName prefixes)."""

    def wrapped(value: str) -> list[str]:
        return check(value[:-1] if value.endswith("-") else value)

    return wrapped


def _qualified_name(value: str) -> list[str]:
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + e for e in _DNS1123_SUBDOMAIN_CHECK(prefix))
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character, with an optional DNS subdomain prefix and '/'"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if name and not _QUALIFIED_NAME_PART.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character"
        )
    return errors


def _decodes(fn: Callable[[str], Any], message: str) -> Validator:
    def check(value: str) -> list[str]:
        try:
            fn(value)
        except (ValueError, binascii.Error):
            return [message]
        return []

    return check


_DNS1123_SUBDOMAIN_CHECK = _regex_check(
    _DNS1123_SUBDOMAIN,
    253,
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character",
)
_DNS1123_LABEL_CHECK = _regex_check(
    _DNS1123_LABEL,
    63,
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character",
)
_DNS1035_LABEL_CHECK = _regex_check(
    _DNS1035_LABEL,
    63,
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character",
)

VALIDATORS: dict[str, Validator] = {
    "dns1123Label": _DNS1123_LABEL_CHECK,
    "dns1123Subdomain": _DNS1123_SUBDOMAIN_CHECK,
    "dns1035Label": _DNS1035_LABEL_CHECK,
    "qualifiedName": _qualified_name,
    "dns1123LabelPrefix": _prefix(_DNS1123_LABEL_CHECK),
    "dns1123SubdomainPrefix": _prefix(_DNS1123_SUBDOMAIN_CHECK),
    "dns1035LabelPrefix": _prefix(_DNS1035_LABEL_CHECK),
    "labelValue": _regex_check(
        _LABEL_VALUE,
        63,
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character",
    ),
    "uri": _decodes(parse_request_uri, "must be a valid URI"),
    "uuid": _regex_check(_UUID, 36, "does not match the UUID format"),
    "byte": _decodes(lambda v: base64.b64decode(v, validate=True), "invalid base64"),
    "date": _decodes(lambda v: _dt.date.fromisoformat(v) if len(v) == 10 else int("x"), "invalid date"),
    "datetime": _decodes(
        lambda v: (
            _dt.datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
            if "T" in v.upper()
            else int("x")
        ),
        "invalid datetime",
    ),
}


class Format(CelObject):
    __slots__ = ("name",)
    cel_type_name = "kubernetes.NamedFormat"

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"format.{self.name}()"

    def __hash__(self) -> int:
        return hash(self.name)

    def cel_equals(self, other: Any) -> bool:
        if not isinstance(other, Format):
            raise no_such_overload()
        return self.name == other.name


def _validate(fmt: Format, value: str) -> Optional:
    errors = VALIDATORS[fmt.name](value)
    return Optional(True, errors) if errors else NONE


def register(reg: Registry) -> None:
    F = t.FORMAT
    reg.register_object(Format, F)
    reg.add(
        "format.named",
        "format_named",
        (t.STRING,),
        t.optional_of(F),
        lambda name: Optional(True, Format(name)) if name in VALIDATORS else NONE,
    )
    for name in VALIDATORS:
        reg.add(f"format.{name}", f"format_{name}", (), F, lambda n=name: Format(n))
    reg.add(
        "validate",
        "format_validate",
        (F, t.STRING),
        t.optional_of(t.list_of(t.STRING)),
        _validate,
        member=True,
    )
