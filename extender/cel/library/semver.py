"""Semantic versions (blang/semver strict parsing, SemVer 2.0 precedence) and the CEL semver library."""

from __future__ import annotations

import re
from typing import Any

from extender.cel import types as t
from extender.cel.errors import CelEvalError
from extender.cel.library.registry import Registry
from extender.cel.values import CelObject, no_such_overload

_NUMBERS = re.compile(r"^[0-9]*$")
#: The SemVer 2.0 grammar; a match is exactly what the strict parser below accepts (fast path).
STRICT = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_ALPHANUM = re.compile(r"^[0-9A-Za-z-]*$")


class SemverError(ValueError):
    """Not a strict semantic version (blang/semver's message)."""


class Semver(CelObject):
    __slots__ = ("build", "major", "minor", "patch", "pre")
    cel_type_name = "kubernetes.Semver"

    def __init__(
        self, major: int, minor: int, patch: int, pre: tuple[int | str, ...], build: tuple[str, ...]
    ) -> None:
        self.major = major
        self.minor = minor
        self.patch = patch
        self.pre = pre
        self.build = build

    def __repr__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def cel_equals(self, other: Any) -> bool:
        if not isinstance(other, Semver):
            raise no_such_overload()
        return self.compare(other) == 0

    def compare(self, other: Semver) -> int:
        for a, b in ((self.major, other.major), (self.minor, other.minor), (self.patch, other.patch)):
            if a != b:
                return 1 if a > b else -1
        if not self.pre and not other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        for x, y in zip(self.pre, other.pre, strict=False):
            c = _compare_identifier(x, y)
            if c:
                return c
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))


def _compare_identifier(x: int | str, y: int | str) -> int:
    if isinstance(x, int) and isinstance(y, int):
        return (x > y) - (x < y)
    if isinstance(x, int):
        return -1
    if isinstance(y, int):
        return 1
    return (x > y) - (x < y)


def _number(part: str, what: str) -> int:
    if not _NUMBERS.match(part):
        raise SemverError(f"Invalid character(s) found in {what} number {part!r}")
    if len(part) > 1 and part[0] == "0":
        raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {part!r}")
    if not part:
        raise SemverError(f'strconv.ParseUint: parsing "": invalid syntax ({what})')
    return int(part)


def parse_semver(text: str) -> Semver:
    """blang/semver ``Parse``: strict ``MAJOR.MINOR.PATCH[-PRE][+BUILD]``."""
    m = STRICT.fullmatch(text)
    if m is not None:
        major, minor, patch, pre_text, build_text = m.groups()
        pre = tuple(int(p) if p.isdigit() else p for p in pre_text.split(".")) if pre_text else ()
        return Semver(
            int(major), int(minor), int(patch), pre, tuple(build_text.split(".")) if build_text else ()
        )
    return _parse_slow(text)


def _parse_slow(text: str) -> Semver:
    """The step-by-step parse, for blang/semver's exact error messages."""
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    patch_text = parts[2]
    build: list[str] = []
    pre_parts: list[str] = []
    if "+" in patch_text:
        patch_text, build_text = patch_text.split("+", 1)
        build = build_text.split(".")
    if "-" in patch_text:
        patch_text, pre_text = patch_text.split("-", 1)
        pre_parts = pre_text.split(".")
    patch = _number(patch_text, "patch")
    pre: list[int | str] = []
    for p in pre_parts:
        if not p:
            raise SemverError("Prerelease is empty")
        if _NUMBERS.match(p):
            if len(p) > 1 and p[0] == "0":
                raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {p!r}")
            pre.append(int(p))
        elif _ALPHANUM.match(p):
            pre.append(p)
        else:
            raise SemverError(f"Invalid character(s) found in prerelease {p!r}")
    for b in build:
        if not b:
            raise SemverError("Build meta data is empty")
        if not _ALPHANUM.match(b):
            raise SemverError(f"Invalid character(s) found in build meta data {b!r}")
    return Semver(major, minor, patch, tuple(pre), tuple(build))


def normalize_version(text: str) -> str:
    """The K8s semver library's normalization: drop a ``v`` prefix, pad and strip leading zeros."""
    if text[:1] in ("v", "V"):
        text = text[1:]
    core, rest = text, ""
    for i, ch in enumerate(text):
        if ch in "-+":
            core, rest = text[:i], text[i:]
            break
    parts = core.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts = [p.lstrip("0") or "0" for p in parts]
    return ".".join(parts) + rest


def _semver(text: str, normalize: bool = False) -> Semver:
    try:
        return parse_semver(normalize_version(text) if normalize else text)
    except SemverError as exc:
        raise CelEvalError(str(exc)) from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        parse_semver(normalize_version(text) if normalize else text)
    except SemverError:
        return False
    return True


def register(reg: Registry) -> None:
    V, S, B, Int = t.SEMVER, t.STRING, t.BOOL, t.INT
    reg.register_object(Semver, V)
    reg.add("semver", "string_to_semver", (S,), V, _semver)
    reg.add("semver", "string_bool_to_semver", (S, B), V, _semver)
    reg.add("isSemver", "is_semver_string", (S,), B, _is_semver)
    reg.add("isSemver", "is_semver_string_bool", (S, B), B, _is_semver)
    reg.add("isGreaterThan", "semver_is_greater_than", (V, V), B, lambda a, b: a.compare(b) > 0, member=True)
    reg.add("isLessThan", "semver_is_less_than", (V, V), B, lambda a, b: a.compare(b) < 0, member=True)
    reg.add("compareTo", "semver_compare_to", (V, V), Int, lambda a, b: a.compare(b), member=True)
    reg.add("major", "semver_major", (V,), Int, lambda v: v.major, member=True)
    reg.add("minor", "semver_minor", (V,), Int, lambda v: v.minor, member=True)
    reg.add("patch", "semver_patch", (V,), Int, lambda v: v.patch, member=True)
