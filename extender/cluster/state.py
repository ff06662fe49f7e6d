"""Cluster state: the objects DRA scheduling reads, parsed once, keyed like the API server keys them.

Fed by state files (the embedded default) or by informers. Objects that cannot be read are
kept as problems (claims by key, so a pod using a broken claim gets a precise error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from extender.model import nesting
from extender.model.core import Node, Pod, parse_node, parse_pod
from extender.model.dra import (
    DELETE_PROTECTION_FINALIZER,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from extender.model.errors import ObjectError, TooDeep
from extender.model.json_form import as_json
from extender.model.policy import PodDisruptionBudget, parse_pod_disruption_budget
from extender.model.scheduling import SCHEDULING_GROUP, PodGroup, parse_pod_group
from extender.model.taint_rules import DeviceTaintRule, parse_device_taint_rule
from extender.model.versions import resource_version_of, supported_versions
from extender.tally import tally

Key = tuple[str, str]  # (namespace, name); namespace '' for cluster-scoped objects

NAMESPACED = {"Pod", "ResourceClaim", "ResourceClaimTemplate", "PodDisruptionBudget", "PodGroup"}
_PARSERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "Node": parse_node,
    "Pod": parse_pod,
    "ResourceSlice": parse_resource_slice,
    "DeviceClass": parse_device_class,
    "ResourceClaim": parse_resource_claim,
    "ResourceClaimTemplate": parse_resource_claim_template,
    "DeviceTaintRule": parse_device_taint_rule,
    "PodDisruptionBudget": parse_pod_disruption_budget,
    "PodGroup": parse_pod_group,
}
#: The kinds a cluster state is made of (state files holding none of them are an error).
KINDS = frozenset(_PARSERS)
_DRA_KINDS = {"ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"}


def object_key(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    kind = str(obj.get("kind", ""))
    namespace = str(meta.get("namespace") or "default") if kind in NAMESPACED else ""
    return (namespace, str(meta.get("name", "")))


#: How many deleted pods :attr:`ClusterState.deleted_pods` remembers.
DELETED_PODS_KEPT = 1024
#: How many answered claims :attr:`ClusterState.answers` keeps waiting for their watch events.
ANSWERS_KEPT = 4096


def protects_nothing(claim: ResourceClaim) -> bool:
    """The claim's delete protection protects nothing: the finalizer is there, but it is not
    allocated and reserved for nobody (a bind deposed between its two writes left it)."""
    return (
        DELETE_PROTECTION_FINALIZER in claim.finalizers
        and claim.allocation is None
        and not claim.reserved_for
    )


@dataclass
class ClusterState:
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[Key, Pod] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[Key, ResourceClaim] = field(default_factory=dict)
    templates: dict[Key, ResourceClaimTemplate] = field(default_factory=dict)
    taint_rules: dict[str, DeviceTaintRule] = field(default_factory=dict)
    #: policy/v1 PodDisruptionBudgets (preemption spares the pods they protect where it can).
    pdbs: dict[Key, PodDisruptionBudget] = field(default_factory=dict)
    #: scheduling.k8s.io PodGroups (DRAWorkloadResourceClaims: claims shared by a group's pods).
    pod_groups: dict[Key, PodGroup] = field(default_factory=dict)
    #: Indexes of ``pods`` kept with it: bound pods by node; pods not bound yet by the node an
    #: earlier preemption nominated; how many bound, running pods have each priority.
    pods_by_node: dict[str, dict[Key, Pod]] = field(default_factory=dict)
    nominated: dict[str, dict[Key, Pod]] = field(default_factory=dict)
    bound_priorities: dict[int, int] = field(default_factory=dict)
    #: Pods removed from the cache, newest last: UID -> (node or '', priority), the last
    #: :data:`DELETED_PODS_KEPT` of them (the claims they held may not be released yet; a bind
    #: of one must not go on).
    deleted_pods: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: Claims that exist but cannot be read: key -> why.
    broken_claims: dict[Key, str] = field(default_factory=dict)
    #: Claims whose delete protection protects nothing (``ResourceClaim.protects_nothing``),
    #: kept as claims are stored and removed: the stale-finalizer sweep reads these, not every claim.
    unprotecting: set[Key] = field(default_factory=set)
    #: Human-readable problems met while loading (skipped objects, unknown kinds).
    problems: list[str] = field(default_factory=list)
    #: Bumped on every change; ``inventory_version`` only when slices, classes or taint rules
    #: change, ``claims_version`` only when claims do (what decision snapshots depend on).
    version: int = 0
    inventory_version: int = 0
    claims_version: int = 0
    #: The newest resourceVersion the claims cache has seen (a list, an event or a bookmark):
    #: a claim created at or before it and not cached is gone.
    claims_seen_rv: str = ""
    #: Claims changed (stored, replaced, removed) since the consumer last drained this.
    changed_claims: set[Key] = field(default_factory=set)
    #: Node names stored or removed since the consumer last drained this.
    changed_nodes: set[str] = field(default_factory=set)
    #: ResourceSlice name -> the inventory_version of its last change, oldest first; and the
    #: inventory_version of the last change that was not a slice's (a class, a taint rule) or
    #: of forgetting old slice changes. See :meth:`slices_changed_since`.
    slice_changes: dict[str, int] = field(default_factory=dict, repr=False)
    inventory_rebuilt: int = 0
    #: Claims as this process's own writes were answered, by key (:meth:`answered`), oldest first.
    answers: dict[Key, ResourceClaim] = field(default_factory=dict, repr=False)
    #: Answers whose wait an earlier event of their claim ended (the finalizer update's event
    #: arriving after the status write was answered): stored for the next event only if that
    #: is exactly the answered object (:meth:`_echo`).
    overtaken: dict[Key, ResourceClaim] = field(default_factory=dict, repr=False)

    @classmethod
    def from_objects(cls, objects: Iterable[dict[str, Any]]) -> ClusterState:
        state = cls()
        for obj in objects:
            state.apply(obj)
        return state

    def tables(self) -> dict[str, Any]:
        """The object tables, each copied (a dict copy in C: no Python code runs, so it is
        consistent with the others when taken in one go on the thread that changes them), for
        :meth:`from_tables` on another thread."""
        return {
            "nodes": self.nodes.copy(),
            "pods": self.pods.copy(),
            "slices": self.slices.copy(),
            "classes": self.classes.copy(),
            "claims": self.claims.copy(),
            "templates": self.templates.copy(),
            "taint_rules": self.taint_rules.copy(),
            "pdbs": self.pdbs.copy(),
            "pod_groups": self.pod_groups.copy(),
            "deleted_pods": self.deleted_pods.copy(),
            "broken_claims": self.broken_claims.copy(),
            "version": self.version,
            "inventory_version": self.inventory_version,
            "claims_version": self.claims_version,
        }

    @classmethod
    def from_tables(cls, tables: dict[str, Any], pause: Callable[[], object] = lambda: None) -> ClusterState:
        """A state of its own over :meth:`tables` (its pod indexes built here, ``pause`` called
        every 256 pods): records are immutable, so it shares them with the state the tables
        were copied from."""
        pods = tables["pods"]
        state = cls(**{k: v for k, v in tables.items() if k != "pods"})
        for i, pod in enumerate(pods.values()):
            state._index_pod(None, pod)
            if not i % 256:
                pause()
        state.pods = pods
        return state

    def held(self) -> list[dict[str, Any] | bytes]:
        """Every object held, as it was read (what a state file of this cache would hold), kind
        by kind in the order decisions depend on them: dicts, and ResourceSlices as the compact
        JSON they are kept in (:func:`as_list_json` joins them without decoding a slice). Only
        references: cheap on the engine's loop."""
        out: list[dict[str, Any] | bytes] = [n.raw for n in self.nodes.values()]
        out += [s.source for s in self.slices.values() if s.source]
        for records in (self.classes, self.taint_rules, self.templates, self.claims):
            out += [r.raw for r in records.values()]
        out += [p.raw for p in self.pods.values()]
        out += [b.raw for b in self.pdbs.values()]
        out += [g.raw for g in self.pod_groups.values()]
        return out

    def devices_of(self, pod: Pod) -> dict[str, list[str]]:
        """The devices each of the pod's claims holds (driver/pool/device), by claim name: what a
        bound pod runs with (claims not in the cache are left out)."""
        out: dict[str, list[str]] = {}
        for ref in pod.claims:
            name = ref.resource_claim_name or pod.claim_statuses.get(ref.name)
            claim = self.claims.get((pod.namespace, name)) if name else None
            if name and claim is not None:
                allocation = claim.allocation
                out[name] = [str(r.id) for r in allocation.devices] if allocation is not None else []
        return out

    def apply(self, obj: dict[str, Any]) -> None:
        """Add or replace one object (raw API dict)."""
        kind = str(obj.get("kind", ""))
        namespace, name = object_key(obj)
        label = f"{kind} {namespace + '/' if namespace else ''}{name}"
        if len(self.problems) > 1000:
            del self.problems[:500]  # a long-running cache keeps the recent ones
        parser = _PARSERS.get(kind)
        if kind == "PodGroup" and not str(obj.get("apiVersion", "")).startswith(f"{SCHEDULING_GROUP}/"):
            parser = None  # another project's PodGroup (Volcano, coscheduling)
        if parser is None:
            self.problems.append(f"{label}: kind not used for DRA scheduling, ignored")
            return
        if kind in _DRA_KINDS and resource_version_of(obj) not in supported_versions(kind):
            self.problems.append(f"{label}: unsupported apiVersion {obj.get('apiVersion')!r}, ignored")
            return
        if not name:
            self.problems.append(f"{kind} without metadata.name, ignored")
            return
        record: Any
        try:
            if kind == "ResourceClaim":
                record = self._echo(namespace, name, obj) or parse_resource_claim(
                    obj, self.claims.get((namespace, name))
                )
            elif kind == "Pod":
                record = parse_pod(obj, self.pods.get((namespace, name)))
            elif kind == "ResourceSlice":
                previous = self.slices.get(name)
                record = parse_resource_slice(obj, previous)
                if previous is not None and previous.same_content(record):
                    # Read again with nothing allocation reads changed (a relist, a write of
                    # other fields): the inventory stays as it is.
                    self.slices[name] = record
                    self.version += 1
                    return
            else:
                record = parser(obj)
        except ObjectError as exc:
            self.problems.append(f"{label}: cannot be read: {exc}")
            if kind == "ResourceClaim" and isinstance(exc, TooDeep) and self._keep_holding(obj, str(exc)):
                return
            if kind == "ResourceClaim":
                self.claims.pop((namespace, name), None)
                self.unprotecting.discard((namespace, name))
                self.broken_claims[(namespace, name)] = str(exc)
                self.changed_claims.add((namespace, name))
                self._changed(kind)
            return
        self._store(kind, namespace, name, record)
        if kind == "ResourceClaim":
            self.observed(kind, str((obj.get("metadata") or {}).get("resourceVersion") or ""))

    def answered(self, claim: ResourceClaim) -> None:
        """``claim`` is what the API server answered a write of this process with (parsed): the
        watch event that brings the claim at that resourceVersion is the same object (one
        resourceVersion, one stored object), so it is stored without being read again. Most
        claim events under load are such echoes (a bind writes each claim twice); reading each
        twice was 1.4% of the extender's CPU at 500 x 8 (issue 54). At most
        :data:`ANSWERS_KEPT`: an echo a watch never delivers (a relist came first) is forgotten."""
        self.answers.pop(claim.key, None)
        self.answers[claim.key] = claim
        if len(self.answers) > ANSWERS_KEPT:
            del self.answers[next(iter(self.answers))]

    def _echo(self, namespace: str, name: str, obj: dict[str, Any]) -> ResourceClaim | None:
        """The answered claim ``obj`` is the echo of, if it is one (any event of the claim
        ends the wait for its echo: a later one moved past it)."""
        key = (namespace, name)
        overtaken = self.overtaken.pop(key, None) if self.overtaken else None
        answer = self.answers.pop(key, None)
        meta = obj.get("metadata")
        if answer is None or not isinstance(meta, dict):
            # Only the very object answered is that answer (equal input, equal record).
            return overtaken if overtaken is not None and overtaken.raw == obj else None
        if (
            meta.get("resourceVersion") == answer.resource_version
            and meta.get("uid") == answer.uid
            and obj.get("apiVersion") == answer.raw.get("apiVersion")
        ):
            return answer
        rv = meta.get("resourceVersion")
        if meta.get("uid") == answer.uid and isinstance(rv, str) and is_newer(answer.resource_version, rv):
            self.overtaken[key] = answer  # an earlier event (the finalizer update's) came late
            if len(self.overtaken) > ANSWERS_KEPT:
                del self.overtaken[next(iter(self.overtaken))]
        return None

    def observed(self, kind: str, resource_version: str) -> None:
        """The cache of ``kind`` has seen ``resource_version`` (only claims' is tracked)."""
        if kind != "ResourceClaim" or not resource_version:
            return
        current = self.claims_seen_rv
        if not current or is_newer(resource_version, current):
            self.claims_seen_rv = resource_version

    def remove(self, obj: dict[str, Any]) -> None:
        """Forget one object (a watch DELETED event)."""
        kind = str(obj.get("kind", ""))
        namespace, name = object_key(obj)
        if kind not in _PARSERS:
            return
        table = self._table(kind)
        key: Any = (namespace, name) if kind in NAMESPACED else name
        gone = table.pop(key, None)
        if kind == "Pod":
            self._index_pod(gone, None)
            if gone is not None:
                self.deleted_pods[gone.uid] = (gone.node_name, gone.priority)
                if len(self.deleted_pods) > DELETED_PODS_KEPT:
                    del self.deleted_pods[next(iter(self.deleted_pods))]
        if kind == "ResourceClaim":
            self.answers.pop((namespace, name), None)
            self.overtaken.pop((namespace, name), None)
            self.broken_claims.pop((namespace, name), None)
            self.unprotecting.discard((namespace, name))
            self.changed_claims.add((namespace, name))
            self.observed(kind, str((obj.get("metadata") or {}).get("resourceVersion") or ""))
        self._changed(kind, name)

    def _changed(self, kind: str, name: str = "") -> None:
        self.version += 1
        if kind == "Node":
            self.changed_nodes.add(name)
        if kind in ("ResourceSlice", "DeviceClass", "DeviceTaintRule"):
            self.inventory_version += 1
            if kind == "ResourceSlice":
                self._slice_changed(name)
            else:
                self.inventory_rebuilt = self.inventory_version
        elif kind == "ResourceClaim":
            self.claims_version += 1

    def _slice_changed(self, name: str) -> None:
        changes = self.slice_changes
        changes.pop(name, None)
        changes[name] = self.inventory_version  # last: the table stays ordered by version
        if len(changes) > 2 * len(self.slices) + 1024:
            # Names of deleted slices pile up: forget them all (older snapshots then rebuild).
            changes.clear()
            self.inventory_rebuilt = self.inventory_version

    def slices_changed_since(self, inventory_version: int) -> set[str] | None:
        """Names of the ResourceSlices stored, replaced or removed since ``inventory_version``;
        None when more than slices changed since (a DeviceClass, a DeviceTaintRule), or when
        it is too long ago to tell."""
        if inventory_version < self.inventory_rebuilt:
            return None
        out = set()
        for name, version in reversed(self.slice_changes.items()):
            if version <= inventory_version:
                break
            out.add(name)
        return out

    def replace_kind(self, kind: str, objects: Iterable[dict[str, Any]], resource_version: str = "") -> None:
        """A relist (at ``resource_version``): apply every object and forget those that are gone."""
        objects = list(objects)
        keep = {object_key(o) for o in objects}
        current = self._table(kind)
        for key in list(current):
            k = key if isinstance(key, tuple) else ("", key)
            if k not in keep:
                self.remove({"kind": kind, "metadata": {"namespace": k[0], "name": k[1]}})
        for obj in objects:
            self.apply(obj)
        self.observed(kind, resource_version)

    def _table(self, kind: str) -> dict[Any, Any]:
        tables: dict[str, dict[Any, Any]] = {
            "Node": self.nodes,
            "Pod": self.pods,
            "ResourceSlice": self.slices,
            "DeviceClass": self.classes,
            "ResourceClaim": self.claims,
            "ResourceClaimTemplate": self.templates,
            "DeviceTaintRule": self.taint_rules,
            "PodDisruptionBudget": self.pdbs,
            "PodGroup": self.pod_groups,
        }
        return tables.get(kind, {})

    def counts(self) -> dict[str, int]:
        return {kind: len(self._table(kind)) for kind in _PARSERS}

    def _store(self, kind: str, namespace: str, name: str, record: Any) -> None:
        if kind == "ResourceClaim":
            self.changed_claims.add((namespace, name))
        self._changed(kind, name)
        table = self._table(kind)
        key = (namespace, name) if kind in NAMESPACED else name
        if kind == "Pod":
            self._index_pod(table.get(key), record)
        table[key] = record
        if kind == "ResourceClaim":
            self.broken_claims.pop((namespace, name), None)
            if protects_nothing(record):
                self.unprotecting.add((namespace, name))
            else:
                self.unprotecting.discard((namespace, name))

    def _keep_holding(self, obj: dict[str, Any], why: str) -> bool:
        """A claim too deep to read still holds its devices (the in-tree plugin, written in Go,
        may have allocated it; a driver may have written deep status data after allocation):
        kept as read without its free-form parts, for accounting, and broken for its pods."""
        try:
            record = parse_resource_claim(nesting.without_free_form(obj))
        except ObjectError:
            return False
        namespace, name = record.namespace, record.name
        self._store("ResourceClaim", namespace, name, record)
        self.broken_claims[(namespace, name)] = why
        self.observed("ResourceClaim", str((obj.get("metadata") or {}).get("resourceVersion") or ""))
        return True

    def lowest_bound_priority(self) -> int | None:
        """The lowest priority of a bound, running pod (None: there is none)."""
        return min(self.bound_priorities, default=None)

    def _index_pod(self, old: Pod | None, new: Pod | None) -> None:
        """Move a pod's entries from its old record (None: added) to its new one (None: removed)."""
        for pod, sign in ((old, -1), (new, 1)):
            if pod is None:
                continue
            if pod.node_name:
                index, node = self.pods_by_node, pod.node_name
            else:
                index, node = self.nominated, pod.nominated_node_name
            if node and sign > 0:
                index.setdefault(node, {})[pod.key] = pod
            elif node:
                entries = index.get(node, {})
                entries.pop(pod.key, None)
                if not entries:
                    index.pop(node, None)
            if pod.node_name and not pod.terminal:
                tally(self.bound_priorities, pod.priority, sign)


def is_newer(cached: str, reference: str) -> bool:
    """``cached`` > ``reference`` (resourceVersions are etcd revisions; otherwise: just differs)."""
    try:
        return int(cached) > int(reference)
    except ValueError:
        return cached != reference


#: What a snapshot shows of a Pod: what scheduling decisions read, and nothing that may hold
#: secrets or application output. Per part: which of its keys stay, the lists of containers in
#: it, and which of a container's keys stay. Everything not named in the status is left out;
#: in the metadata and spec, only what is named.
POD_METADATA_LEFT_OUT = frozenset({"annotations", "managedFields"})
POD_SPEC_LEFT_OUT = frozenset({"volumes", "imagePullSecrets", "hostAliases"})
CONTAINER_FIELDS_LEFT_OUT = frozenset(
    {
        "env",
        "envFrom",
        "command",
        "args",
        "workingDir",
        "volumeMounts",
        "volumeDevices",
        "lifecycle",
        "livenessProbe",
        "readinessProbe",
        "startupProbe",
    }
)
POD_STATUS_KEPT = frozenset(
    {
        "phase",
        "conditions",
        "nominatedNodeName",
        "startTime",
        "resourceClaimStatuses",
        "extendedResourceClaimStatus",
        "nodeAllocatableResourceClaimStatuses",
        "resources",
        "allocatedResources",
    }
)
CONTAINER_STATUS_KEPT = frozenset({"name", "resources", "allocatedResources"})
_POD_SHOWN: tuple[tuple[str, Callable[[str], bool], tuple[str, ...], Callable[[str], bool]], ...] = (
    ("metadata", lambda k: k not in POD_METADATA_LEFT_OUT, (), lambda k: True),
    (
        "spec",
        lambda k: k not in POD_SPEC_LEFT_OUT,
        ("initContainers", "containers", "ephemeralContainers"),
        lambda k: k not in CONTAINER_FIELDS_LEFT_OUT,
    ),
    (
        "status",
        lambda k: k in POD_STATUS_KEPT,
        ("initContainerStatuses", "containerStatuses"),
        lambda k: k in CONTAINER_STATUS_KEPT,
    ),
)


def _kept(value: Any, keep: Callable[[str], bool]) -> Any:
    return {k: v for k, v in value.items() if keep(k)} if isinstance(value, dict) else value


def without_secrets(pod: dict[str, Any]) -> dict[str, Any]:
    """A Pod as scheduling reads it: without annotations, managed fields, volumes, its
    containers' environment, commands, mounts and probes, and of its status only what decisions
    read (a copy; ``pod`` is not changed)."""
    out = dict(pod)
    for part, keep, lists, keep_in_list in _POD_SHOWN:
        section = pod.get(part)
        if not isinstance(section, dict):
            continue
        shown = _kept(section, keep)
        for key in lists:
            if isinstance(section.get(key), list):
                shown[key] = [_kept(c, keep_in_list) for c in section[key]]
        out[part] = shown
    return out


def as_list_json(held: list[dict[str, Any] | bytes]) -> bytes:
    """:meth:`ClusterState.held` as one ``kind: List`` in JSON (a state file), Pods
    :func:`without_secrets`."""
    parts = [
        o if isinstance(o, bytes) else as_json(without_secrets(o) if o.get("kind") == "Pod" else o)
        for o in held
    ]
    return b"".join([b'{"apiVersion":"v1","kind":"List","items":[', b",".join(parts), b"]}"])
