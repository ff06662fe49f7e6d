"""Kubernetes name and label validation (apimachinery ``util/validation``), as error lists.

Shared by the CEL ``format`` library and node selector parsing; each validator returns the
messages apimachinery would give (empty: valid).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(f"^{_LABEL}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

Validator = Callable[[str], list[str]]


def regex_check(rx: re.Pattern[str], limit: int, message: str) -> Validator:
    def check(value: str) -> list[str]:
        errors = []
        if len(value) > limit:
            errors.append(f"must be no more than {limit} characters")
        if not rx.match(value):
            errors.append(message)
        return errors

    return check


def prefix(check: Validator) -> Validator:
    """``...Prefix`` formats accept a trailing '-' (generateName prefixes)."""

    def wrapped(value: str) -> list[str]:
        return check(value[:-1] if value.endswith("-") else value)

    return wrapped


def qualified_name(value: str) -> list[str]:
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + e for e in DNS1123_SUBDOMAIN_CHECK(prefix))
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


DNS1123_SUBDOMAIN_CHECK = regex_check(
    _DNS1123_SUBDOMAIN,
    253,
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character",
)
DNS1123_LABEL_CHECK = regex_check(
    _DNS1123_LABEL,
    63,
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character",
)
DNS1035_LABEL_CHECK = regex_check(
    _DNS1035_LABEL,
    63,
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character",
)

LABEL_VALUE_CHECK = regex_check(
    _LABEL_VALUE,
    63,
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character",
)
