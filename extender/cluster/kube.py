"""Talking to a real API server: the official client for configuration and auth, and for the
transport of list/watch and leader election (threads); raw JSON for everything (its models
drop DRA fields and cost 5-30x; its ResourceClaim watch crashes; its binding reply parsing
fails: see reference/kubernetes-client.md). The bind path's requests are awaited on the
event loop through :mod:`extender.cluster.async_kube`.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from extender.cluster.api import ClusterAPIError, api_error
from extender.cluster.api_calls import NO_ANSWER, RequestObserver, describe
from extender.cluster.async_kube import AsyncKube
from extender.model import nesting
from extender.model.versions import claim_for_version

RESOURCE_GROUP = "resource.k8s.io"
#: Connections to the API server kept alive: list/watch threads (one each), leader election,
#: and the bind path's writes (binds write several claims each; 16 binds in flight).
API_CONNECTIONS = 32
PREFERRED_VERSIONS = ("v1", "v1beta2", "v1beta1")
#: PodGroups (DRAWorkloadResourceClaims): v1beta1 from 1.37 (kubernetes#140184), v1alpha2 in 1.36.
SCHEDULING_GROUP = "scheduling.k8s.io"
POD_GROUP_VERSIONS = ("v1beta1", "v1alpha2")


class KubeConfigError(Exception):
    """No usable cluster configuration."""


def load_configuration(kubeconfig: str | None) -> k8s.Configuration:
    """A fresh Configuration (never the client's global default) from a kubeconfig or in-cluster."""
    configuration = k8s.Configuration()
    try:
        if kubeconfig:
            k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)
    except (k8s_config.ConfigException, OSError, ValueError, TypeError) as exc:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster configuration"
        raise KubeConfigError(f"{where}: {exc}") from None
    return configuration


def load_user_configuration(kubeconfig: str | None, context: str | None = None) -> k8s.Configuration:
    """A fresh Configuration as kubectl finds its own: ``kubeconfig``, else $KUBECONFIG, else
    ~/.kube/config; ``context``, else the file's current one."""
    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
    except (k8s_config.ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "kubeconfig ($KUBECONFIG or ~/.kube/config)"
        raise KubeConfigError(f"{where}: {exc}") from None
    return configuration


def bounded_retries(configuration: k8s.Configuration) -> k8s.Configuration:
    """Let urllib3 retry only requests that never reached the API server (connect errors).

    A request whose answer timed out or was lost is not sent again behind our back: the claim
    writer reads the claim back and decides, and one ``--api-timeout`` bounds each call.
    """
    configuration.retries = urllib3.util.Retry(total=3, connect=3, read=0, status=0, other=0, redirect=0)
    # The client's default pool (5 x CPUs) would make many watches open and discard connections.
    configuration.connection_pool_maxsize = API_CONNECTIONS
    return configuration


def running_in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def _error(exc: ApiException) -> ClusterAPIError:
    return api_error(exc.status or 0, str(exc.reason or ""), exc.body)


@dataclass(frozen=True)
class Paths:
    """URL paths of the resources we read and write, for the served resource.k8s.io version."""

    dra_version: str
    #: resource.k8s.io resources served only at another version: resource -> version (1.36
    #: serves DeviceTaintRules at v1beta2 alone, behind its beta gate and runtime-config).
    elsewhere: Mapping[str, str] = field(default_factory=dict)
    #: The scheduling.k8s.io version PodGroups are read at (None: not read).
    pod_groups: str | None = None

    def collection(self, resource: str) -> str:
        if resource in ("nodes", "pods", "events"):
            return f"/api/v1/{resource}"
        if resource == "leases":
            return "/apis/coordination.k8s.io/v1/leases"
        if resource == "poddisruptionbudgets":
            return "/apis/policy/v1/poddisruptionbudgets"
        if resource == "podgroups":
            return f"/apis/{SCHEDULING_GROUP}/{self.pod_groups}/podgroups"
        return f"/apis/{RESOURCE_GROUP}/{self.version_of(resource)}/{resource}"

    def version_of(self, resource: str) -> str:
        """The resource.k8s.io version ``resource`` is read at."""
        return self.elsewhere.get(resource, self.dra_version)

    def claim(self, namespace: str, name: str) -> str:
        return f"/apis/{RESOURCE_GROUP}/{self.dra_version}/namespaces/{namespace}/resourceclaims/{name}"


class OpenAnswer:
    """An answer whose headers have arrived: read its JSON body, or close it unread."""

    def __init__(self, what: str, response: Any) -> None:
        self.what = what
        self.response = response
        self.headers = {str(k).lower(): str(v) for k, v in (response.headers or {}).items()}

    def json(self) -> Any:
        """The decoded body; ClusterAPIError when it breaks off or is not JSON (``malformed``)."""
        try:
            data = self.response.data
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterAPIError(f"{self.what}: the answer broke off: {exc}") from None
        finally:
            self.response.release_conn()
        try:
            return nesting.loads(data or b"null")
        except orjson.JSONDecodeError as exc:
            raise ClusterAPIError(f"{self.what}: malformed answer: {exc}") from None

    def close(self) -> None:
        """Give the answer up unread (its connection is not reused)."""
        self.response.close()


class RawKube:
    """Synchronous raw-JSON requests over the official client's ApiClient (run in threads)."""

    def __init__(
        self, api_client: k8s.ApiClient, timeout: float = 30.0, observe: RequestObserver | None = None
    ) -> None:
        self.api_client = api_client
        self.timeout = timeout
        #: Told of every request once answered (a watch: once its answer's headers arrived).
        self.observe = observe

    def open_get(self, path: str, *, query: dict[str, Any] | None = None) -> OpenAnswer:
        """A GET answered 2xx, its headers read and its body not yet: :class:`OpenAnswer`."""
        response = self.request("GET", path, query=query, stream=True)
        return OpenAnswer(f"GET {path}", response)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
        stream: bool = False,
    ) -> Any:
        started = time.perf_counter()
        code = NO_ANSWER
        try:
            response = self.api_client.call_api(
                path,
                method,
                query_params=list((query or {}).items()),
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout if timeout is not None else self.timeout,
            )
            if stream:  # a watch: counted once its answer's headers arrived
                code = str(response.status)
                return response
            data = response.data  # read here, so that latency covers the whole answer
            code = str(response.status)
        except ApiException as exc:
            code = str(exc.status) if exc.status else NO_ANSWER
            raise _error(exc) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ClusterAPIError(f"{method} {path}: {exc}") from None
        finally:
            if self.observe is not None:
                self.observe(*describe(method, path, query), code, time.perf_counter() - started)
        try:
            return nesting.loads(data or b"null")
        except orjson.JSONDecodeError as exc:
            raise ClusterAPIError(f"{method} {path}: malformed answer from the API server: {exc}") from None

    def server_version(self) -> tuple[int, int] | None:
        """(major, minor) of the API server (``/version``; a minor such as "37+" reads 37), or
        None when it does not say."""
        answer = self.request("GET", "/version")
        try:
            major = int("".join(c for c in str(answer.get("major", "")) if c.isdigit()))
            minor = int("".join(c for c in str(answer.get("minor", "")) if c.isdigit()))
        except (AttributeError, ValueError):
            return None
        return major, minor

    def served_dra_versions(self) -> list[str]:
        """The resource.k8s.io versions the API server serves that we read, preferred first."""
        group = self.request("GET", f"/apis/{RESOURCE_GROUP}")
        served = {v.get("version") for v in (group or {}).get("versions", []) if isinstance(v, dict)}
        found = [version for version in PREFERRED_VERSIONS if version in served]
        if not found:
            raise ClusterAPIError(
                f"the API server serves none of {RESOURCE_GROUP}/{', '.join(PREFERRED_VERSIONS)}"
            )
        return found

    def served_resources(self, version: str, group: str = RESOURCE_GROUP) -> set[str]:
        """The resources of ``group``/``version`` (discovery)."""
        listing = self.request("GET", f"/apis/{group}/{version}")
        return {str(r.get("name")) for r in (listing or {}).get("resources", []) if isinstance(r, dict)}

    def pod_group_version(self) -> str | None:
        """The scheduling.k8s.io version serving podgroups, preferred first (None: none does)."""
        try:
            group = self.request("GET", f"/apis/{SCHEDULING_GROUP}")
        except ClusterAPIError as exc:
            if exc.code == 404:
                return None
            raise
        served = {v.get("version") for v in (group or {}).get("versions", []) if isinstance(v, dict)}
        for version in POD_GROUP_VERSIONS:
            if version in served and "podgroups" in self.served_resources(version, SCHEDULING_GROUP):
                return version
        return None

    def watch_lines(
        self,
        path: str,
        query: dict[str, Any],
        timeout: float,
        on_open: Callable[[], None] = lambda: None,
    ) -> Iterator[dict[str, Any]]:
        response = self.request("GET", path, query={**query, "watch": "true"}, timeout=timeout, stream=True)
        on_open()
        try:
            buffer = b""
            for chunk in response.stream(amt=65536, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield nesting.loads(line)
        finally:
            response.release_conn()


def api_object(answer: Any, what: str) -> dict[str, Any]:
    """``answer`` if it is an API object (a JSON object with metadata), without its
    ``managedFields`` (:func:`without_managed_fields`); else ClusterAPIError."""
    if not isinstance(answer, dict) or not isinstance(answer.get("metadata"), dict):
        raise ClusterAPIError(f"{what}: malformed answer from the API server (not an object with metadata)")
    return without_managed_fields(answer)


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (an object the API server sent, decoded for us alone) without the server's
    ``metadata.managedFields``, removed in place: nothing decides on them (kube-scheduler's
    informers drop them too), every write of ours sends the object back without them (an update
    without managedFields leaves the server's as they are), and kept they were objects of every
    cached pod and claim for the garbage collector to look at (issue 54: 9 young-generation
    passes per 500 x 8 run instead of 11)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


class KubeAPI:
    """:class:`~extender.cluster.api.ClusterAPI` against the API server, awaited on the loop.

    ``paths`` is None until API discovery has found the served resource.k8s.io version.
    """

    def __init__(self, http: AsyncKube, paths: Paths | None, field_manager: str = "dra-extender") -> None:
        self.http = http
        self._paths = paths
        self.field_manager = field_manager

    @property
    def paths(self) -> Paths:
        if self._paths is None:
            raise ClusterAPIError("the API server's resource.k8s.io version is not discovered yet")
        return self._paths

    @paths.setter
    def paths(self, paths: Paths) -> None:
        self._paths = paths

    async def _call(self, method: str, path: str, **kw: Any) -> Any:
        return await self.http.request(method, path, **kw)

    async def close(self) -> None:
        await self.http.close()

    async def _object(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        return api_object(await self._call(method, path, **kw), f"{method} {path}")

    async def get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._object("GET", self.paths.claim(namespace, name))

    async def create_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        namespace = claim["metadata"]["namespace"]
        path = f"/apis/{RESOURCE_GROUP}/{self.paths.dra_version}/namespaces/{namespace}/resourceclaims"
        body = claim_for_version(claim, self.paths.dra_version)
        return await self._object("POST", path, body=body, query={"fieldManager": self.field_manager})

    async def delete_claim(self, namespace: str, name: str, uid: str) -> None:
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        await self._call("DELETE", self.paths.claim(namespace, name), body=options)

    async def update_claim(self, claim: dict[str, Any]) -> dict[str, Any]:
        meta = claim["metadata"]
        return await self._object(
            "PUT",
            self.paths.claim(meta["namespace"], meta["name"]),
            body=claim,
            query={"fieldManager": self.field_manager},
        )

    async def update_claim_status(self, claim: dict[str, Any]) -> dict[str, Any]:
        meta = claim["metadata"]
        return await self._object(
            "PUT",
            self.paths.claim(meta["namespace"], meta["name"]) + "/status",
            body=claim,
            query={"fieldManager": self.field_manager},
        )

    async def unreserve_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> dict[str, Any]:
        # The in-tree Unreserve's patch: metadata.uid acts as a precondition.
        patch = {
            "metadata": {"uid": claim_uid},
            "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]},
        }
        return await self._object(
            "PATCH",
            self.paths.claim(namespace, name) + "/status",
            body=patch,
            content_type="application/strategic-merge-patch+json",
        )

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return await self._object("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        listing = await self._object("GET", f"/api/v1/namespaces/{namespace}/pods")
        items = listing.get("items")
        if not isinstance(items, list):
            raise ClusterAPIError(f"GET pods of {namespace}: malformed list (no items)")
        return [i for i in items if isinstance(i, dict)]

    async def patch_pod_status(
        self, namespace: str, name: str, uid: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        # As schedutil.PatchPodStatus (a strategic merge patch); metadata.uid is a precondition.
        return await self._object(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            body={"metadata": {"uid": uid}, "status": status},
            content_type="application/strategic-merge-patch+json",
            query={"fieldManager": self.field_manager},
        )

    async def bind_pod(self, namespace: str, name: str, uid: str, node: str) -> None:
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self._call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body=binding)

    async def evict_pod(self, namespace: str, name: str, uid: str) -> None:
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            # The uid precondition: never the same-named pod a controller made since.
            "deleteOptions": {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}},
        }
        await self._call("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body=eviction)

    async def record_event(
        self, pod: dict[str, Any], reason: str, message: str, warning: bool = True
    ) -> None:
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": namespace,
                "name": meta.get("name"),
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": "dra-extender"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self._call("POST", f"/api/v1/namespaces/{namespace}/events", body=event)
