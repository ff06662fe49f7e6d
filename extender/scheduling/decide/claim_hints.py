"""Claims that can never match what the cluster's drivers publish, caught before a pod waits on
them: hints, never decisions (issue 53).

The in-tree plugin reports such a claim only as "cannot allocate all claims" or a CEL runtime
error ("no such key: index"), node by node, after the pod has waited. These checks read the
claim against every device published (:class:`~extender.scheduling.decide.published.Published`)
and say which name is missing and which published name is close:

``class``
    the request's DeviceClass does not exist.
``attribute`` / ``capacity``
    a selector (the request's or its class's) reads an attribute or capacity that no device of
    the class's drivers publishes; a capacity request names a capacity none publishes.
``constraint``
    a ``matchAttribute``/``distinctAttribute`` names an attribute that no device one of its
    requests could get publishes (AMD's partitions publish ``parentDeviceID``, not
    ``deviceID``; one driver's NUMA name against another's).
``count``
    a request asks for more devices than any one node is offered of those it could get.
``nothing``
    no device published anywhere satisfies the request (said only when no hint above explains
    the request already).

A hint never changes what filter, bind or simulate decide: they only add its line to a reason.
Pure: a claim spec and a :class:`Published` in, hints out.
"""

from __future__ import annotations

import difflib
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from cachetools import LRUCache

from extender.cel import CelEnvironment
from extender.cel.reads import Path
from extender.cluster.state import ClusterState
from extender.model.dra import ClaimSpec, Constraint, DeviceRequest, ExactRequest, ResourceClaim
from extender.scheduling.decide.answers import FilterResult
from extender.scheduling.decide.published import (
    DriverNames,
    OutOfTime,
    Published,
    PublishedDevice,
    qualified,
)

#: The checks, in the order a request's hints are listed.
CHECKS = ("class", "attribute", "capacity", "constraint", "count", "nothing")


@dataclass(frozen=True, slots=True)
class ClaimHint:
    check: str
    #: The request (``gpu``, or ``gpu/a100`` for a firstAvailable subrequest); None: the claim.
    request: str | None
    message: str
    #: A published name (or class) close to the one the claim names.
    did_you_mean: str | None = None

    def text(self) -> str:
        where = f"request {self.request}: " if self.request else ""
        close = f"; did you mean {self.did_you_mean}?" if self.did_you_mean else ""
        return f"{where}{self.message}{close}"

    def to_dict(self) -> dict[str, str | None]:
        return {
            "check": self.check,
            "request": self.request,
            "message": self.message,
            "didYouMean": self.did_you_mean,
            "text": self.text(),
        }


def closest(name: str, published: Iterable[str]) -> str | None:
    """The published ``domain/id`` whose id is closest to ``name``'s (``deviceID`` ->
    ``parentDeviceID``; ``numaNode`` of another domain), preferring ``name``'s own domain. Ids
    only: whole names of one domain look alike whatever their ids."""
    ident = name.rpartition("/")[2].lower()
    by_ident: dict[str, list[str]] = {}
    for candidate in sorted(set(published) - {name}):
        by_ident.setdefault(candidate.rpartition("/")[2].lower(), []).append(candidate)
    found = difflib.get_close_matches(ident, list(by_ident), n=1, cutoff=0.6)
    if not found:
        return None
    candidates = by_ident[found[0]]
    domain = name.rpartition("/")[0]
    return next((c for c in candidates if c.rpartition("/")[0] == domain), candidates[0])


def closest_class(name: str, classes: Iterable[str]) -> str | None:
    """The class name closest to ``name``: alike as a whole, and alike once the suffix they share
    is cut off (``imex.nvidia.com`` is not close to ``mig.nvidia.com``: ``imex`` against ``mig``)."""
    best: tuple[float, str] | None = None
    for candidate in sorted(classes):
        shared = _shared_suffix(name, candidate)
        own = difflib.SequenceMatcher(None, name[: len(name) - shared], candidate[: len(candidate) - shared])
        whole = difflib.SequenceMatcher(None, name, candidate).ratio()
        if own.ratio() >= 0.6 and whole >= 0.85 and (best is None or whole > best[0]):
            best = (whole, candidate)
    return best[1] if best else None


def _shared_suffix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def hints_for(spec: ClaimSpec, published: Published) -> list[ClaimHint]:
    """Every hint for one claim (or template) spec, request by request, then its constraints."""
    out: list[ClaimHint] = []
    candidates: dict[str, list[PublishedDevice]] = {}
    derived: dict[str, set[str]] = {}
    for request in spec.requests:
        reachable: list[PublishedDevice] = []
        found: list[_Alternative] = []
        for name, exact in alternatives(request):
            found.append(_request_hints(name, exact, published))
            reachable += found[-1].devices
            derived.setdefault(request.name, set()).update(n for n, _ in exact.derived_attributes)
        out += _request_says(found)
        candidates[request.name] = reachable
    reach = _Reach(candidates, published)
    for constraint in spec.constraints:
        out += _constraint_hints(constraint, reach, derived, [r.name for r in spec.requests])
    return out


@dataclass(slots=True)
class _Alternative:
    """One request, or one firstAvailable subrequest: its hints and the devices it could get."""

    hints: list[ClaimHint]
    devices: list[PublishedDevice]
    #: Its hints mean the whole request fails wherever it is tried, whatever the alternatives
    #: after it: a DeviceClass that does not exist (every subrequest is validated first), or a
    #: selector that raised a CEL runtime error on a published device (the decision's error).
    fatal: bool = False


def _request_says(found: Sequence[_Alternative]) -> list[ClaimHint]:
    """A request's hints. With firstAvailable, one subrequest that could fit means the request
    may fit: then only the hints that still make it fail are said (a class that does not exist,
    a CEL runtime error in a subrequest tried before that one); a first choice no device has
    (``productName == "H100"``, ``count: 8``) is what firstAvailable is for."""
    fits = next((i for i, a in enumerate(found) if not a.hints), None)
    if fits is None:
        return [h for a in found for h in a.hints]
    return [
        h
        for i, a in enumerate(found)
        if a.fatal and (i < fits or any(h.check == "class" for h in a.hints))
        for h in a.hints
    ]


def alternatives(request: DeviceRequest) -> Iterator[tuple[str, ExactRequest]]:
    if request.exactly is not None:
        yield request.name, request.exactly
    for sub in request.first_available:
        yield f"{request.name}/{sub.name}", sub


def _request_hints(name: str, exact: ExactRequest, published: Published) -> _Alternative:
    """A request's hints, and the devices it could ever get."""
    published.check_time()
    device_class = published.classes.get(exact.device_class_name)
    if device_class is None:
        message = f"DeviceClass {exact.device_class_name} does not exist"
        close = closest_class(exact.device_class_name, published.classes)
        return _Alternative([ClaimHint("class", name, message, close)], [], fatal=True)
    drivers = published.class_drivers(device_class)
    names = published.names_of(drivers)
    whose = _whose(drivers)
    out: list[ClaimHint] = []
    for capacity in exact.capacity_requests or {}:
        full = _qualified_request(capacity, drivers)
        if not full & names.capacities:
            message = f"requests capacity {capacity}, which {whose} publishes"
            out.append(ClaimHint("capacity", name, message, closest(min(full), names.capacities)))
    of_class = published.of_class(device_class)
    errors = published.errors
    devices = published.matching(of_class, exact.selectors)
    fatal = published.errors > errors
    if devices:
        # Reads of unpublished names are harmless here (a has() guard, an optional): only the count.
        if exact.allocation_mode == "ExactCount" and exact.count > 1:  # one device: any of them
            most, node = _most_on_one_node(devices)
            if exact.count > most:
                message = (
                    f"asks for {exact.count} devices; at most {most} that it could get are "
                    f"published for one node ({node})"
                )
                out.append(ClaimHint("count", name, message))
        return _Alternative(out, devices, fatal)
    if not of_class:
        # What the request reads does not matter while its class accepts nothing; what the
        # class reads may say why.
        message = (
            f"DeviceClass {device_class.name} accepts none of the {len(published.devices)} published devices"
        )
        out.append(ClaimHint("class", name, message))
        selectors_read = [(f"DeviceClass {device_class.name}'s selector", device_class.selectors)]
    else:
        # The class accepts devices: its own reads (guarded or not) are not why nothing matches.
        selectors_read = [("the request's selector", exact.selectors)]
    for owner, selectors in selectors_read:
        for selector in selectors:
            program = published.program(selector)
            if program is not None:
                out += _unpublished_reads(name, owner, program.reads, names, whose)
    if not out:
        message = (
            f"no published device satisfies DeviceClass {device_class.name} and the request's "
            f"selectors ({len(of_class)} devices of the class)"
        )
        out.append(ClaimHint("nothing", name, message))
    return _Alternative(out, devices, fatal)


def _whose(drivers: set[str]) -> str:
    if not drivers:
        return "no device"
    listed = ", ".join(sorted(drivers))
    return f"no device of driver{'s' if len(drivers) > 1 else ''} {listed}"


def _unpublished_reads(
    name: str, owner: str, reads: frozenset[Path], names: DriverNames, whose: str
) -> list[ClaimHint]:
    out = []
    for path in sorted(reads):
        if path[0] not in ("attributes", "capacity") or len(path) < 2:
            continue
        kind = "attribute" if path[0] == "attributes" else "capacity"
        pool = names.attributes if kind == "attribute" else names.capacities
        if len(path) == 2:
            if not any(n.rpartition("/")[0] == path[1] for n in pool):
                message = f"{owner} reads {kind} domain {path[1]}, in which {whose} publishes any {kind}"
                out.append(ClaimHint(kind, name, message))
            continue
        full = f"{path[1]}/{path[2]}"
        if full not in pool:
            message = f"{owner} reads {kind} {full}, which {whose} publishes"
            out.append(ClaimHint(kind, name, message, closest(full, pool)))
    return out


def _qualified_request(capacity: str, drivers: Iterable[str]) -> set[str]:
    """A capacity request's name as each driver would publish it (a bare name is the driver's)."""
    return {qualified(d, capacity) for d in drivers} or {capacity}


def _most_on_one_node(devices: Sequence[PublishedDevice]) -> tuple[int, str]:
    """The most of these devices one node is offered: its own plus those of pools that serve
    several nodes (counted for every node: an upper bound)."""
    shared = sum(1 for d in devices if d.node is None)
    per_node = Counter(d.node for d in devices if d.node is not None)
    if not per_node:
        return shared, "pools for several nodes"
    node, most = min(per_node.items(), key=lambda kv: (-kv[1], kv[0]))
    return most + shared, node


class _Reach:
    """The drivers and attribute names of the devices each request could get, gathered once per
    request, on the claim's budget (32 constraints over 32 requests of 40,000 devices each would
    otherwise walk every device a thousand times)."""

    def __init__(self, candidates: dict[str, list[PublishedDevice]], published: Published) -> None:
        self._candidates = candidates
        self._published = published
        self._names: dict[str, tuple[set[str], set[str]]] = {}

    def of(self, request: str) -> tuple[set[str], set[str]] | None:
        """(drivers, qualified attribute names); None when the request could get no device."""
        devices = self._candidates.get(request)
        if not devices:
            return None
        self._published.check_time()  # a clock read per constraint and request: 1,024 at most
        found = self._names.get(request)
        if found is None:
            drivers = {d.device.id.driver for d in devices}
            names = set().union(*{id(d.attributes): d.attributes for d in devices}.values())
            found = self._names[request] = (drivers, names)
        return found


def _constraint_hints(
    constraint: Constraint, reach: _Reach, derived: dict[str, set[str]], requests: list[str]
) -> list[ClaimHint]:
    attribute = constraint.match_attribute or constraint.distinct_attribute
    if attribute is None:
        return []
    kind = "matchAttribute" if constraint.match_attribute else "distinctAttribute"
    out = []
    for request in constraint.requests or requests:
        found = reach.of(request)
        # A derived attribute (DRADerivedAttributes) stands in for a published one of its name.
        if found is None or attribute in derived.get(request, ()):
            continue
        drivers, published = found
        if attribute in published:  # upstream's lookupAttribute: a bare id is the driver's
            continue
        message = f"{kind} {attribute}: {_whose(drivers)} that request {request} could get publishes it"
        out.append(ClaimHint("constraint", None, message, closest(attribute, published)))
    return out


#: Seconds one claim's hints may take on filter's path (a claim of 32 requests whose selectors
#: read whole attribute maps is evaluated on every device): past it, that claim gets no hint.
HINT_BUDGET = 0.2

#: Lines kept per claim on filter's path (filter shows the first; lint lists them all).
LINES_KEPT = 10

#: The published index is built again, after the inventory changed, once this many times its
#: last build's cost has passed since that build: at most a tenth of the time goes to it (at
#: 5,000 nodes x 8 GPUs a build costs about 0.14 s, so hints lag slice changes by up to 1.4 s).
REBUILD_AFTER_COSTS = 10.0


class ClaimHints:
    """Hint lines for the claims of pods that fit nowhere, memoized: the published index per
    inventory version (slices, classes, taint rules), built again at most as often as
    :data:`REBUILD_AFTER_COSTS` allows, and each claim's lines per resourceVersion, so a pod
    filtered again and again costs a lookup per claim."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, size: int = 1024) -> None:
        self._clock = clock
        self._published: Published | None = None
        #: What the index was built from: another state or CEL environment is another index.
        self._built_from: tuple[ClusterState, CelEnvironment] | None = None
        self._built_at = -math.inf
        self._build_cost = 0.0
        self._lines: LRUCache[tuple[str, str, str], list[str]] = LRUCache(maxsize=size)

    def __len__(self) -> int:
        return len(self._lines)

    def lines(self, state: ClusterState, cel: CelEnvironment, claims: Iterable[ResourceClaim]) -> list[str]:
        """``claim NS/NAME: <hint>`` for each hint of each claim (the decisions' own state)."""
        published = self._index(state, cel)
        out: list[str] = []
        for claim in claims:
            key = (claim.namespace, claim.name, claim.resource_version)
            found = self._lines.get(key)
            if found is None:
                where = f"claim {claim.namespace}/{claim.name}"
                published.deadline = self._clock() + HINT_BUDGET
                try:
                    found = [f"{where}: {h.text()}" for h in hints_for(claim.spec, published)]
                    if len(found) > LINES_KEPT:  # 32 requests x 32 constraints: a thousand lines
                        more = len(found) - LINES_KEPT
                        found = [*found[:LINES_KEPT], f"{where}: {more} more hints (kubectl dra lint)"]
                except OutOfTime:  # kept, so that the claim is not tried again at every filter
                    found = []
                finally:
                    published.deadline = math.inf
                self._lines[key] = found
            out += found
        return out

    def _index(self, state: ClusterState, cel: CelEnvironment) -> Published:
        published = self._published
        built_from = self._built_from
        if (
            published is not None
            and built_from is not None
            and built_from[0] is state
            and built_from[1] is cel
        ):
            if published.inventory_version == state.inventory_version:
                return published
            if self._clock() - self._built_at < REBUILD_AFTER_COSTS * self._build_cost:
                return published
        started = self._clock()
        published = self._published = Published(state, cel, self._clock)
        self._built_at = self._clock()
        self._build_cost = self._built_at - started
        self._built_from = (state, cel)
        self._lines.clear()
        return published


#: What a reason or error with a claim hint reads between the decision's text and the hint.
HINT_SEPARATOR = "; hint: "


def without_hint(text: str) -> str:
    """A reason or error as the decision gave it, before a claim hint was added."""
    return text.split(HINT_SEPARATOR, 1)[0]


def with_claim_hints(lines: Sequence[str], result: FilterResult) -> None:
    """A filter answer that fits no node: the first hint goes into every node's reason, so that
    kube-scheduler's FailedScheduling message ("0/3 nodes are available: 3 <reason>.") carries it
    whatever reason it counts first, or into the answer's error (a CEL runtime error: the
    message is the error's); the rest are named by count (``kubectl dra lint`` lists them)."""
    if not lines:
        return
    more = f" (and {len(lines) - 1} more: kubectl dra lint)" if len(lines) > 1 else ""
    suffix = f"{HINT_SEPARATOR}{lines[0]}{more}"
    if result.error:
        result.error += suffix
        return
    for reasons in (result.unresolvable, result.failed):
        for node, reason in reasons.items():
            reasons[node] = reason + suffix
