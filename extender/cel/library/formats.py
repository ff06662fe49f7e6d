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
from extender.names import (
    DNS1035_LABEL_CHECK,
    DNS1123_LABEL_CHECK,
    DNS1123_SUBDOMAIN_CHECK,
    LABEL_VALUE_CHECK,
    Validator,
    prefix,
    qualified_name,
    regex_check,
)

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _decodes(fn: Callable[[str], Any], message: str) -> Validator:
    def check(value: str) -> list[str]:
        try:
            fn(value)
        except (ValueError, binascii.Error):
            return [message]
        return []

    return check


VALIDATORS: dict[str, Validator] = {
    "dns1123Label": DNS1123_LABEL_CHECK,
    "dns1123Subdomain": DNS1123_SUBDOMAIN_CHECK,
    "dns1035Label": DNS1035_LABEL_CHECK,
    "qualifiedName": qualified_name,
    "dns1123LabelPrefix": prefix(DNS1123_LABEL_CHECK),
    "dns1123SubdomainPrefix": prefix(DNS1123_SUBDOMAIN_CHECK),
    "dns1035LabelPrefix": prefix(DNS1035_LABEL_CHECK),
    "labelValue": LABEL_VALUE_CHECK,
    "uri": _decodes(parse_request_uri, "must be a valid URI"),
    "uuid": regex_check(_UUID, 36, "does not match the UUID format"),
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
