"""Argument types and flags the subcommands share."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING

from extender.allocator.features import Features, parse_feature_gates
from extender.allocator.releases import (
    DEFAULT_MINOR,
    RELEASES,
    Release,
    ReleaseError,
    parse_release,
    release_of,
)
from extender.defaults import DEFAULT_MAKE_ROOM_MAX_MOVES, DEFAULT_MAKE_ROOM_MIN_AGE, DEFAULT_MAX_STATE_BYTES

if TYPE_CHECKING:
    from extender.scheduling.config import Rules


def kubernetes_version(text: str) -> Release:
    """argparse type: a Kubernetes release the extender knows (``1.36``, ``v1.37.0``)."""
    try:
        return parse_release(text)
    except ReleaseError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: Exit codes of the commands that decide (simulate, explain, kubectl dra): it fits, it fits
#: nowhere (or no plan), usage or errors.
FITS, FITS_NOWHERE, USAGE = 0, 1, 2

VERSION_HELP = (
    "decide as kube-scheduler of this Kubernetes release does: its DRA gate defaults and the "
    f"rules that changed between releases ({', '.join(r.name for r in RELEASES.values())})"
)


_PATH_CHARACTERS = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@/-]*")


def url_prefix(text: str) -> str:
    """argparse type: the verbs' URL path prefix, as the routes use it: ``/scheduler`` for
    "scheduler", "/scheduler" or "/scheduler/"; "" (the root) for "" or "/". Characters a URL
    path cannot hold unescaped are refused (kube-scheduler's urlPrefix could not reach them)."""
    if not _PATH_CHARACTERS.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a URL path: {text!r} (letters, digits and -._~!$&'()*+,;=:@/ only)"
        )
    if "//" in text.strip("/"):
        raise argparse.ArgumentTypeError(f"not a URL path: {text!r} (an empty segment)")
    return "/" + text.strip("/") if text.strip("/") else ""


def _positive(text: str, unit: str) -> float:
    """A finite number > 0 (``unit``: what the error calls it, " of seconds" or "")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number{unit}: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number{unit}, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    return _positive(text, " of seconds")


def positive_rate(text: str) -> float:
    """argparse type: how many a minute, > 0."""
    return _positive(text, "")


def non_negative_seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0 (0: off)."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    return positive_seconds(text)


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 (any free port) to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return value


def max_state_bytes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-state-bytes",
        type=positive_int,
        default=DEFAULT_MAX_STATE_BYTES,
        metavar="BYTES",
        help=f"refuse a state file larger than this (default {DEFAULT_MAX_STATE_BYTES})",
    )


def offline_version(parser: argparse.ArgumentParser) -> None:
    """``--kubernetes-version`` of a command that decides offline (default: the default release)."""
    parser.add_argument(
        "--kubernetes-version",
        type=kubernetes_version,
        default=release_of(DEFAULT_MINOR),
        metavar="VERSION",
        help=f"{VERSION_HELP}; default 1.{DEFAULT_MINOR}",
    )


def offline_features(text: str, release: Release) -> Features:
    """``--feature-gates`` for a decision made offline (simulate, kubectl dra): locked gates may
    be changed, to emulate an older release, with a warning on stderr."""
    gates = parse_feature_gates(text, allow_locked=True, release=release)
    for name, value in gates.items():
        spec = release.gates[name]
        if spec.locked and value != spec.default:
            print(
                f"warning: feature gate {name} is locked to {str(spec.default).lower()} in Kubernetes "
                f"{release.name}; emulating an older release (--kubernetes-version does it fully)",
                file=sys.stderr,
            )
    return Features.from_gates(gates, release)


def make_room_flags(group: argparse._ActionsContainer) -> None:
    """The make-room planner's rules (who may move, how many), as ``serve`` takes them for its
    views and ``kubectl dra make-room`` for a plan it computes itself: one definition for both."""
    group.add_argument(
        "--make-room-max-priority",
        type=int,
        default=0,
        metavar="PRIORITY",
        help="for a shape (a class and a count, not a pod): pods above this priority never move "
        "(default 0); for a pod, its own priority is the ceiling",
    )
    group.add_argument(
        "--make-room-min-age",
        type=non_negative_seconds,
        default=DEFAULT_MAKE_ROOM_MIN_AGE,
        metavar="SECONDS",
        help=f"pods that started less than this long ago never move (default {DEFAULT_MAKE_ROOM_MIN_AGE:g})",
    )
    group.add_argument(
        "--make-room-controller-kind",
        action="append",
        metavar="KIND",
        help="an owner kind, besides ReplicaSet, StatefulSet and Job, whose controller recreates "
        "its evicted pods (repeatable)",
    )
    group.add_argument(
        "--make-room-max-moves",
        type=positive_int,
        default=DEFAULT_MAKE_ROOM_MAX_MOVES,
        metavar="N",
        help=f"the most pods one plan moves (default {DEFAULT_MAKE_ROOM_MAX_MOVES})",
    )


def make_room_rules(args: argparse.Namespace) -> Rules:
    """The make-room planner's rules from :func:`make_room_flags` (the planner is imported only
    here: the parsers stay light)."""
    from extender.scheduling.config import DEFAULT_CONTROLLER_KINDS, Rules

    return Rules(
        max_priority=args.make_room_max_priority,
        controller_kinds=DEFAULT_CONTROLLER_KINDS | frozenset(args.make_room_controller_kind or ()),
        min_age=args.make_room_min_age,
        max_moves=args.make_room_max_moves,
    )
