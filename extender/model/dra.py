"""resource.k8s.io records: ResourceSlice and its devices, DeviceClass, claims, templates, taint rules.

Records keep exactly what allocation reads, in v1 terms, plus the raw pieces that are copied
verbatim into allocation results (tolerations, opaque configuration).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from extender.cel import CelDevice
from extender.cel.device import kinds_convert
from extender.model import nesting
from extender.model.attributes import parse_attributes
from extender.model.errors import ObjectError, TooDeep
from extender.model.json_form import as_json, content_digest
from extender.model.node_allocatable import ResourceMapping, parse_mappings, parse_resources
from extender.model.nodeselector import NodeSelector, parse_node_selector
from extender.model.reader import Reader
from extender.model.timestamps import parse_timestamp
from extender.model.versions import to_v1
from extender.quantity import Quantity

ALLOCATION_MODE_EXACT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
ALLOCATION_RESULTS_MAX = 32
DELETE_PROTECTION_FINALIZER = "resource.kubernetes.io/delete-protection"


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


# --- ResourceSlice ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestPolicy:
    default: Quantity | None
    valid_values: tuple[Quantity, ...] | None
    #: (min, max, step); max and step may be None.
    valid_range: tuple[Quantity | None, Quantity | None, Quantity | None] | None


@dataclass(frozen=True, slots=True)
class Capacity:
    value: Quantity
    request_policy: RequestPolicy | None = None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: dict[str, Quantity]
    #: DRADeviceCompatibilityGroups: what it may share the counter set with (empty: none named).
    compatibility_groups: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: dict[str, Quantity]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(eq=False, slots=True)
class Device:
    """One published device (identity semantics: the same object for the life of its slice)."""

    id: DeviceID
    attributes: dict[str, tuple[str, Any]]
    capacity: dict[str, Capacity]
    consumes_counters: tuple[CounterConsumption, ...] = ()
    taints: tuple[Taint, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    binds_to_node: bool = False
    allow_multiple_allocations: bool = False
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    #: DRANodeAllocatableResources: node resource -> how an allocation of this device counts
    #: (1.36's ``nodeAllocatableResourceMappings``; 1.37's ``nodeAllocatableResources``).
    node_allocatable: dict[str, ResourceMapping] = field(default_factory=dict)
    node_allocatable_resources: dict[str, ResourceMapping] = field(default_factory=dict)
    _cel: CelDevice | None = field(default=None, repr=False)
    #: The digest of the raw (v1-shaped) device this was read from; see :func:`content_digest`.
    fingerprint: bytes | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.id.device

    @property
    def has_binding_conditions(self) -> bool:
        # Upstream (isSelectable, poolHasBindingConditions) looks at bindingConditions only:
        # bindsToNode or bindingFailureConditions alone neither hide a device nor reorder its pool.
        return bool(self.binding_conditions)

    def cel(self) -> CelDevice:
        """The CEL input for this device, built on first use and kept (with its selector memo)."""
        if self._cel is None:
            self._cel = CelDevice.from_flat(
                self.id.driver,
                self.attributes,
                {name: cap.value for name, cap in self.capacity.items()},
                self.allow_multiple_allocations,
            )
        return self._cel

    def converts(self, list_attributes: bool) -> bool:
        """Whether CEL can read this device (:meth:`CelDevice.conversion_error` is None),
        answered from the published attributes while no expression has needed its CEL view."""
        if self._cel is None and kinds_convert(self.attributes.values(), list_attributes):
            return True
        return self.cel().conversion_error(list_attributes) is None

    def attribute(self, qualified_name: str) -> tuple[str, Any] | None:
        """Upstream's constraint lookup: exact key, else the bare id when the domain is the driver's."""
        found = self.attributes.get(qualified_name)
        if found is not None:
            return found
        domain, sep, ident = qualified_name.partition("/")
        if not sep or domain != self.id.driver:
            return None
        return self.attributes.get(ident)


@dataclass(eq=False, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_name: str | None
    node_selector: NodeSelector | None
    all_nodes: bool
    #: None when unset; upstream treats "set to false" differently from "unset" with the gate off.
    per_device_node_selection: bool | None
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...]
    resource_version: str = ""
    #: DRAOptionalNodeOperations (1.37 alpha): kubelet calls the driver may skip; copied to results.
    skip_node_operations: tuple[str, ...] = ()
    #: The digest of the raw spec without its devices (see :func:`content_digest`).
    fingerprint: bytes | None = field(default=None, repr=False)
    #: The object as read, as compact JSON: slices are the bulk of a cluster's objects, and
    #: their dicts would cost 8x the bytes (188 MB against 24 MB at 5,000 nodes x 8 devices).
    source: bytes = field(default=b"", repr=False, compare=False)

    @property
    def uses_compatibility_groups(self) -> bool:
        """A device names compatibility groups (with DRADeviceCompatibilityGroups off, 1.37
        ignores such a slice: its pool is incomplete, whatever is allocated)."""
        return any(c.compatibility_groups for d in self.devices for c in d.consumes_counters)

    def same_content(self, other: ResourceSlice) -> bool:
        """Whether ``other`` is this slice read again with nothing allocation reads changed: the
        same name and spec apart from the devices, and the very same device records (which
        :func:`parse_resource_slice` keeps for devices whose raw content is unchanged)."""
        return (
            self.name == other.name
            and self.fingerprint is not None
            and self.fingerprint == other.fingerprint
            and len(self.devices) == len(other.devices)
            and all(a is b for a, b in zip(self.devices, other.devices, strict=True))
        )


def _request_policy(reader: Reader) -> RequestPolicy | None:
    if not reader.data:
        return None
    valid_values = None
    if reader.has("validValues"):
        path = f"{reader.path}.validValues"
        valid_values = tuple(
            Reader({"v": v}, f"{path}[{i}]").quantity("v") for i, v in enumerate(reader.items("validValues"))
        )
    valid_range = None
    if reader.has("validRange"):
        rng = reader.sub("validRange")
        valid_range = (
            rng.quantity("min") if rng.has("min") else None,
            rng.quantity("max") if rng.has("max") else None,
            rng.quantity("step") if rng.has("step") else None,
        )
    default = reader.quantity("default") if reader.has("default") else None
    return RequestPolicy(default, valid_values, valid_range)


def _device(reader: Reader, driver: str, pool: str, fingerprint: bytes | None = None) -> Device:
    capacity = {}
    caps = reader.sub("capacity")
    for name in caps.data:
        entry = caps.sub(name)
        capacity[name] = Capacity(entry.quantity("value"), _request_policy(entry.sub("requestPolicy")))
    consumes = tuple(
        CounterConsumption(
            c.string("counterSet"),
            c.quantities("counters", "value"),
            frozenset(c.strings("compatibilityGroups")),
        )
        for c in reader.readers("consumesCounters")
    )
    taints = tuple(
        Taint(t.string("key"), t.string("value"), t.string("effect")) for t in reader.readers("taints")
    )
    return Device(
        id=DeviceID(driver, pool, reader.string("name")),
        attributes=parse_attributes(reader.sub("attributes")),
        capacity=capacity,
        consumes_counters=consumes,
        taints=taints,
        binding_conditions=reader.strings("bindingConditions"),
        binding_failure_conditions=reader.strings("bindingFailureConditions"),
        binds_to_node=reader.boolean("bindsToNode"),
        allow_multiple_allocations=reader.boolean("allowMultipleAllocations"),
        node_name=reader.opt_string("nodeName"),
        node_selector=parse_node_selector(reader.sub("nodeSelector")) if reader.has("nodeSelector") else None,
        all_nodes=reader.boolean("allNodes"),
        node_allocatable=parse_mappings(reader),
        node_allocatable_resources=parse_resources(reader),
        fingerprint=fingerprint,
    )


def _devices(spec: Reader, driver: str, pool: str, previous: Sequence[Device]) -> tuple[Device, ...]:
    """The slice's devices, each the ``previous`` record of the same raw content if there is one.

    Matched by position (the usual update changes devices in place), else, once devices moved,
    by name; a previous record is used at most once.
    """
    out: list[Device] = []
    n = len(previous)
    #: From the first position that does not match on: previous records by name (the first of
    #: a name), and those used since (the ones before that position are all used).
    by_name: dict[str, int] | None = None
    used: set[int] = set()
    for i, raw in enumerate(spec.items("devices")):
        digest = content_digest(raw) if isinstance(raw, dict) else None
        found = -1
        if digest is not None and n:
            if i < n and previous[i].fingerprint == digest and (by_name is None or i not in used):
                found = i
            elif by_name is None and i < n and previous[i].name == raw.get("name"):
                pass  # changed in place: the usual update
            else:
                if by_name is None:
                    by_name = {previous[j].name: j for j in range(n - 1, i - 1, -1)}
                j = by_name.get(raw.get("name"), -1)
                if j >= 0 and j not in used and previous[j].fingerprint == digest:
                    found = j
        if found < 0:
            out.append(_device(Reader(raw, f"spec.devices[{i}]"), driver, pool, digest))
            continue
        if by_name is not None:
            used.add(found)
        out.append(previous[found])
    return tuple(out)


def parse_resource_slice(original: dict[str, Any], previous: ResourceSlice | None = None) -> ResourceSlice:
    """``previous``: the same slice as read before. Its device records are reused for devices
    whose raw content is unchanged (same driver and pool only: they are part of the device's
    id), which also keeps what was computed for them (CEL inputs and selector results)."""
    obj = to_v1(original)
    meta = Reader(obj.get("metadata"), "metadata")
    spec = Reader(obj.get("spec"), "spec")
    pool = spec.sub("pool")
    driver = spec.string("driver")
    pool_name = pool.string("name")
    if not driver or not pool_name:
        raise ObjectError("spec.driver and spec.pool.name are required")
    same_pool = previous is not None and previous.driver == driver and previous.pool == pool_name
    reusable = previous.devices if previous is not None and same_pool else ()
    return ResourceSlice(
        name=meta.string("name"),
        driver=driver,
        pool=pool_name,
        generation=pool.integer("generation"),
        resource_slice_count=pool.integer("resourceSliceCount", 1),
        node_name=spec.opt_string("nodeName") or None,
        node_selector=parse_node_selector(spec.sub("nodeSelector")) if spec.has("nodeSelector") else None,
        all_nodes=spec.boolean("allNodes"),
        per_device_node_selection=spec.opt_boolean("perDeviceNodeSelection"),
        devices=_devices(spec, driver, pool_name, reusable),
        shared_counters=tuple(
            CounterSet(c.string("name"), c.quantities("counters", "value"))
            for c in spec.readers("sharedCounters")
        ),
        resource_version=meta.string("resourceVersion"),
        skip_node_operations=spec.strings("skipNodeOperations"),
        fingerprint=content_digest({k: v for k, v in spec.data.items() if k != "devices"}),
        source=as_json(original),
    )


# --- DeviceClass -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Selector:
    #: None for a selector without ``cel`` (an unknown future selector type).
    expression: str | None


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[Selector, ...]
    #: Raw DeviceConfiguration entries (``{"opaque": {...}}``), copied into allocation results.
    config: tuple[dict[str, Any], ...]
    extended_resource_name: str | None = None
    #: ``metadata.creationTimestamp`` (RFC 3339; ordering of classes naming one extended resource).
    created: str = ""
    #: The object as read.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def _selectors(reader: Reader, key: str = "selectors") -> tuple[Selector, ...]:
    out = []
    for sel in reader.readers(key):
        cel = sel.sub("cel")
        out.append(Selector(cel.string("expression") if sel.has("cel") else None))
    return tuple(out)


def _configuration(reader: Reader) -> dict[str, Any]:
    """The DeviceConfiguration part of a config entry (everything but ``requests``/``source``)."""
    return {k: v for k, v in reader.data.items() if k not in ("requests", "source")}


def _carried(obj: dict[str, Any]) -> None:
    """Refuse an object nested too deeply to carry (free-form opaque parameters can be)."""
    why = nesting.unreadable(obj) if isinstance(obj, dict) else None
    if why is not None:
        raise TooDeep(why)


def parse_device_class(original: dict[str, Any]) -> DeviceClass:
    _carried(original)
    obj = to_v1(original)
    meta = Reader(obj.get("metadata"), "metadata")
    spec = Reader(obj.get("spec"), "spec")
    return DeviceClass(
        name=meta.string("name"),
        selectors=_selectors(spec),
        config=tuple(_configuration(c) for c in spec.readers("config")),
        extended_resource_name=spec.opt_string("extendedResourceName"),
        created=meta.string("creationTimestamp"),
        raw=original,
    )


# --- ResourceClaim ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str
    #: The toleration as written, copied verbatim into allocation results.
    raw: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """An ``exactly`` request or a ``firstAvailable`` subrequest (which has no admin access)."""

    name: str
    device_class_name: str
    selectors: tuple[Selector, ...]
    allocation_mode: str
    count: int
    admin_access: bool | None
    tolerations: tuple[Toleration, ...]
    #: None when the request has no ``capacity`` field at all.
    capacity_requests: dict[str, Quantity] | None
    #: ``derivedAttributes`` (DRADerivedAttributes, 1.37): (name, CEL expression) pairs.
    derived_attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    #: The ``exactly`` part; None for a firstAvailable request, and for one with neither field
    #: (kube-scheduler's PreFilter: "unknown request type").
    exactly: ExactRequest | None
    first_available: tuple[ExactRequest, ...]


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None


@dataclass(frozen=True, slots=True)
class ClaimConfig:
    requests: tuple[str, ...]
    configuration: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[ClaimConfig, ...]


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One ``status.allocation.devices.results`` entry, as far as "devices in use" needs it."""

    id: DeviceID
    request: str
    admin_access: bool
    share_id: str | None
    consumed_capacity: dict[str, Quantity]
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceCondition:
    """One condition of ``status.devices[].conditions`` (metav1.Condition, as far as binding reads it)."""

    status: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Allocation:
    devices: tuple[AllocatedDevice, ...]
    node_selector: NodeSelector | None
    #: The allocation exactly as stored (what a status write would send back).
    raw: dict[str, Any]
    #: Precomputed for "devices in use": non-admin results without / with a shareID.
    exclusive: tuple[DeviceID, ...] = ()
    shares: tuple[AllocatedDevice, ...] = ()
    #: ``allocationTimestamp`` as seconds since the epoch (None: not set, or not a timestamp).
    allocation_timestamp: float | None = None
    #: Some result carries ``skipNodeOperations`` (DRAOptionalNodeOperations): only a node that
    #: declares that feature in ``status.declaredFeatures`` may run the pod.
    skips_node_operations: bool = False


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    resource_version: str
    spec: ClaimSpec
    allocation: Allocation | None
    reserved_for: tuple[dict[str, Any], ...]
    finalizers: tuple[str, ...]
    deleting: bool
    #: controller ownerReference UID (a template claim is owned by its pod), if any.
    controller_uid: str | None
    annotations: dict[str, str]
    raw: dict[str, Any]
    #: ``status.devices``: device -> condition type -> condition (what drivers report).
    device_conditions: Mapping[DeviceID, Mapping[str, DeviceCondition]] = field(default_factory=dict)
    #: The controller ownerReference's (apiVersion, kind, name), if any (a PodGroup's claim).
    controller: tuple[str, str, str] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    def reserved_for_uid(self, uid: str) -> bool:
        return any(entry.get("uid") == uid for entry in self.reserved_for)

    def reserved_for_group(self, group: str) -> bool:
        """Reserved for the PodGroup of this name (upstream IsReservedForPod: pods do not know
        their group's UID, so the group, resource and name are compared)."""
        return any(
            entry.get("apiGroup") == "scheduling.k8s.io"
            and entry.get("resource") == "podgroups"
            and entry.get("name") == group
            for entry in self.reserved_for
        )


def _tolerations(reader: Reader) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(t.string("key"), t.string("operator"), t.string("value"), t.string("effect"), dict(t.data))
        for t in reader.readers("tolerations")
    )


def _exact(reader: Reader, name: str, *, subrequest: bool) -> ExactRequest:
    return ExactRequest(
        name=name,
        device_class_name=reader.string("deviceClassName"),
        selectors=_selectors(reader),
        allocation_mode=reader.string("allocationMode", ALLOCATION_MODE_EXACT),
        count=reader.integer("count", 1),
        admin_access=None if subrequest else reader.opt_boolean("adminAccess"),
        tolerations=_tolerations(reader),
        capacity_requests=reader.sub("capacity").quantities("requests") if reader.has("capacity") else None,
        derived_attributes=tuple(
            (d.string("name"), d.string("expression")) for d in reader.readers("derivedAttributes")
        ),
    )


def parse_claim_spec(spec: Reader) -> ClaimSpec:
    devices = spec.sub("devices")
    requests = []
    for r in devices.readers("requests"):
        name = r.string("name")
        subrequests = tuple(_exact(s, s.string("name"), subrequest=True) for s in r.readers("firstAvailable"))
        exactly = _exact(r.sub("exactly"), name, subrequest=False) if r.has("exactly") else None
        requests.append(DeviceRequest(name, exactly, subrequests))
    constraints = tuple(
        Constraint(c.strings("requests"), c.opt_string("matchAttribute"), c.opt_string("distinctAttribute"))
        for c in devices.readers("constraints")
    )
    config = tuple(ClaimConfig(c.strings("requests"), _configuration(c)) for c in devices.readers("config"))
    return ClaimSpec(tuple(requests), constraints, config)


def parse_allocation(reader: Reader) -> Allocation:
    devices = []
    skips = False
    for r in reader.sub("devices").readers("results"):
        skips = skips or bool(r.strings("skipNodeOperations"))
        devices.append(
            AllocatedDevice(
                id=DeviceID(r.string("driver"), r.string("pool"), r.string("device")),
                request=r.string("request"),
                admin_access=r.boolean("adminAccess"),
                share_id=r.opt_string("shareID"),
                consumed_capacity=r.quantities("consumedCapacity"),
                binding_conditions=r.strings("bindingConditions"),
                binding_failure_conditions=r.strings("bindingFailureConditions"),
            )
        )
    node_selector = parse_node_selector(reader.sub("nodeSelector")) if reader.has("nodeSelector") else None
    exclusive = tuple(d.id for d in devices if not d.admin_access and not d.share_id)
    shares = tuple(d for d in devices if not d.admin_access and d.share_id)
    stamp = reader.opt_string("allocationTimestamp")
    timestamp = parse_timestamp(stamp) if stamp else None
    return Allocation(tuple(devices), node_selector, reader.data, exclusive, shares, timestamp, skips)


def _device_conditions(status: Reader) -> dict[DeviceID, dict[str, DeviceCondition]]:
    out: dict[DeviceID, dict[str, DeviceCondition]] = {}
    for d in status.readers("devices"):
        device = DeviceID(d.string("driver"), d.string("pool"), d.string("device"))
        if device in out:
            continue  # upstream getAllocatedDeviceStatus reads the first entry of a device
        conditions = out[device] = {}
        for c in d.readers("conditions"):
            conditions.setdefault(
                c.string("type"), DeviceCondition(c.string("status"), c.string("reason"), c.string("message"))
            )
    return out


def _known_allocation(known: Allocation, stored: Any) -> Allocation | None:
    """``known`` as ``stored`` holds it: the same, or with the ``allocationTimestamp`` the status
    write added (binding conditions on: sent beside the parsed allocation, issue 54); None when
    anything else differs."""
    if known.raw == stored:
        return known
    if not isinstance(stored, dict):
        return None
    stamp = stored.get("allocationTimestamp")
    if not isinstance(stamp, str) or "allocationTimestamp" in known.raw or len(stored) != len(known.raw) + 1:
        return None
    if any(known.raw.get(key) != value for key, value in stored.items() if key != "allocationTimestamp"):
        return None
    return replace(known, raw=stored, allocation_timestamp=parse_timestamp(stamp) if stamp else None)


def parse_resource_claim(
    original: dict[str, Any], previous: ResourceClaim | None = None, known: Allocation | None = None
) -> ResourceClaim:
    """``previous``: the same claim as read before. Its parsed spec and allocation are reused
    when unchanged (the spec is immutable; most updates touch other fields), which also keeps
    the allocation the same object, so accounting by identity sees no change. ``known``: an
    allocation parsed already (the one a status write sent), reused when the claim's is exactly
    it (the API server's answer to that write)."""
    _carried(original)
    obj = to_v1(original)
    meta = Reader(obj.get("metadata"), "metadata")
    status = Reader(obj.get("status"), "status")
    same = previous is not None and previous.uid == meta.string("uid")
    before = to_v1(previous.raw) if same and previous is not None else {}
    if same and previous is not None and before.get("spec") == obj.get("spec"):
        spec = previous.spec
    else:
        spec = parse_claim_spec(Reader(obj.get("spec"), "spec"))
    allocation = None
    if status.has("allocation"):
        old_status = before.get("status")
        if (
            same
            and previous is not None
            and previous.allocation is not None
            and isinstance(old_status, dict)
            and old_status.get("allocation") == status.raw("allocation")
        ):
            allocation = previous.allocation
        elif known is not None and (reused := _known_allocation(known, status.raw("allocation"))) is not None:
            allocation = reused
        else:
            allocation = parse_allocation(status.sub("allocation"))
    controller_uid = None
    controller = None
    for ref in meta.readers("ownerReferences"):
        if ref.boolean("controller"):
            controller_uid = ref.string("uid")
            controller = (ref.string("apiVersion"), ref.string("kind"), ref.string("name"))
    annotations = meta.mapping("annotations")
    return ResourceClaim(
        namespace=meta.string("namespace", "default"),
        name=meta.string("name"),
        uid=meta.string("uid"),
        resource_version=meta.string("resourceVersion"),
        spec=spec,
        allocation=allocation,
        reserved_for=tuple(r.data for r in status.readers("reservedFor")),
        finalizers=meta.strings("finalizers"),
        deleting=meta.has("deletionTimestamp"),
        controller_uid=controller_uid,
        annotations={str(k): str(v) for k, v in annotations.items()},
        raw=original,
        device_conditions=_device_conditions(status),
        controller=controller,
    )


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec
    raw: dict[str, Any]


def parse_resource_claim_template(obj: dict[str, Any]) -> ResourceClaimTemplate:
    _carried(obj)
    obj = to_v1(obj)
    meta = Reader(obj.get("metadata"), "metadata")
    spec = Reader(obj.get("spec"), "spec")
    return ResourceClaimTemplate(
        namespace=meta.string("namespace", "default"),
        name=meta.string("name"),
        spec=parse_claim_spec(spec.sub("spec")),
        raw=obj,
    )
