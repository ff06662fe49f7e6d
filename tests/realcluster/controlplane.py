"""A real control plane on 127.0.0.1: etcd, kube-apiserver, kube-scheduler (and optionally
kube-controller-manager) as child processes, with certificates made here, for the tests.

There is no kubelet: Nodes are objects the tests create (status patched, the not-ready taint
removed). The extender and the scheduler act as the project's manifests make them act: the
sidecar ServiceAccount ``dra-extender/dra-extender`` with ``manifests/rbac.yaml`` applied, through
a token from the TokenRequest API, never as the admin.
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trustme
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests import zygote
from tests.realcluster.api import Api, ApiError, tls_context
from tests.realcluster.binaries import Binaries
from tests.realcluster.proxy import Proxy
from tests.realcluster.releases import HarnessRelease, gates_text

EXTENDER_NAMESPACE = "dra-extender"
EXTENDER_ACCOUNT = "dra-extender"
#: kube-scheduler's Lease identity starts with it (``<hostname>_<uuid>``).
HOSTNAME = socket.gethostname()
#: The sidecar pod this machine plays: named as its hostname where a pod can be (then the
#: sidecar's store fence is applied too); otherwise a name of ours, and no fence.
SIDECAR_POD = (
    HOSTNAME if re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", HOSTNAME) else "dra-extender-sidecar"
)
#: The standalone deployment's account (its tests apply what manifests/standalone/ makes).
STANDALONE_ACCOUNT = "dra-extender-standalone"
#: The standalone deployment's Lease: the shipped fence binding's paramRef (the extender's
#: default Lease name).
STANDALONE_LEASE = "dra-extender"
#: The objects `kubectl apply -k manifests/standalone/` makes that the standalone runs need.
STANDALONE_APPLIED = (
    "ServiceAccount",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)


#: The controllers kube-controller-manager runs unless a control plane asks for others: those DRA
#: relies on (the resourceclaim controller makes claims from templates and drops the
#: reservations of pods that are gone; the garbage collector removes a deleted pod's claims).
DRA_CONTROLLERS = ("resourceclaim-controller", "garbage-collector-controller")
#: What recreates and protects workloads: ReplicaSets and Jobs replace evicted pods, the
#: disruption controller keeps PodDisruptionBudgets' status (the Eviction API refuses past
#: ``disruptionsAllowed``). The make-room mover's runs need them (tests/realcluster/fragmented.py).
WORKLOAD_CONTROLLERS = ("replicaset-controller", "job-controller", "disruption-controller")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Certificates:
    folder: Path
    ca: trustme.CA = field(default_factory=trustme.CA)
    front_proxy_ca: trustme.CA = field(default_factory=trustme.CA)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ca.cert_pem.write_to_path(str(self.ca_file))
        self.front_proxy_ca.cert_pem.write_to_path(str(self.folder / "front-proxy-ca.crt"))
        self._leaf(self.ca, "server", "127.0.0.1", "localhost", common_name="kube-apiserver")
        self._leaf(self.ca, "admin", common_name="test-admin", organization="system:masters")
        self._leaf(self.front_proxy_ca, "proxy-client", common_name="front-proxy-client")
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (self.folder / "sa.key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        (self.folder / "sa.pub").write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.crt"

    def _leaf(
        self, ca: trustme.CA, name: str, *hosts: str, common_name: str, organization: str | None = None
    ) -> None:
        leaf = ca.issue_cert(
            *(hosts or (common_name,)),
            common_name=common_name,
            organization_name=organization,
            not_after=datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2),
        )
        leaf.cert_chain_pems[0].write_to_path(str(self.folder / f"{name}.crt"))
        leaf.private_key_pem.write_to_path(str(self.folder / f"{name}.key"))

    def pair(self, name: str) -> tuple[str, str]:
        return str(self.folder / f"{name}.crt"), str(self.folder / f"{name}.key")


class Process:
    """A child process whose output goes to a log file; stopped (TERM, then KILL) on exit."""

    def __init__(self, name: str, command: list[str], log: Path, env: dict[str, str] | None = None):
        self.name = name
        self.command = command
        self.log = log
        self.env = env
        self.proc: zygote.Process | None = None

    def start(self) -> None:
        """Forked from the zygote (tests/zygote.py) when it is the CLI, else a plain subprocess."""
        handle = self.log.open("ab")
        self.proc = zygote.popen(
            self.command,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(self.env or {})},
            start_new_session=True,
        )
        handle.close()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGCONT)  # a stopped process cannot handle TERM
            self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=timeout)

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def wait_http(url: str, *, timeout: float, process: Process, **kw: Any) -> None:
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not process.alive():
            raise RuntimeError(f"{process.name} exited:\n{process.tail()}")
        try:
            answer = httpx.get(url, timeout=2, **kw)
            if answer.status_code == 200:
                return
            last = f"{answer.status_code} {answer.text[:300]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.2)
    raise RuntimeError(
        f"{process.name} not ready at {url} within {timeout:.0f} s ({last}):\n{process.tail()}"
    )


class ControlPlane:
    """etcd and kube-apiserver, the project's RBAC applied, and the extender's identity."""

    def __init__(
        self,
        binaries: Binaries,
        folder: Path,
        *,
        feature_gates: str = "",
        controller_manager: bool = True,
        runtime_config: str = "",
        etcd_proxy: bool = False,
        controllers: Sequence[str] = DRA_CONTROLLERS,
    ) -> None:
        """``etcd_proxy``: kube-apiserver reaches etcd through :attr:`etcd_link`, a proxy the
        test can slow or hold (tests/realcluster/proxy.py). ``controllers``: what
        kube-controller-manager runs (its ``--controllers``); a test of the session's plane that
        needs more starts them beside it for its own run (:func:`more_controllers`)."""
        self.binaries = binaries
        #: What this release is started with (tests/realcluster/releases.py).
        self.release: HarnessRelease = binaries.release
        self.want_controller_manager = controller_manager
        self.controllers = tuple(controllers)
        self.folder = folder
        self.feature_gates = feature_gates
        #: More ``--runtime-config`` entries (``group/version=true``) for kube-apiserver.
        self.runtime_config = runtime_config
        self.certs = Certificates(folder / "pki")
        self.etcd_port = free_port()
        self.etcd_link: Proxy | None = Proxy(self.etcd_port) if etcd_proxy else None
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.audit_log = folder / "audit.log"
        self.etcd = Process(
            "etcd",
            [
                str(binaries.etcd),
                "--data-dir",
                str(folder / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{self.etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{self.etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{free_port()}",
                "--unsafe-no-fsync",
                "--quota-backend-bytes",
                str(2 * 1024**3),
            ],
            folder / "etcd.log",
            env={"ETCD_UNSUPPORTED_ARCH": ""},
        )
        self.apiserver = Process("kube-apiserver", self._apiserver_command(), folder / "kube-apiserver.log")
        self.admin: Api | None = None
        self.extender_token = ""
        #: kube-controller-manager with the controllers DRA relies on, when its binary is there:
        #: the resourceclaim controller (claims from templates, reservations of pods that are gone)
        #: and the garbage collector (a deleted pod's claims).
        self.controller_manager: Process | None = None

    def _apiserver_command(self) -> list[str]:
        pki = self.certs.folder
        policy = self.folder / "audit-policy.yaml"
        # Every request of the extender's identity, with its response code: the tests read it to
        # prove that the real API server accepted every write the extender made.
        policy.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "audit.k8s.io/v1",
                    "kind": "Policy",
                    "omitStages": ["RequestReceived"],
                    "rules": [
                        {
                            "level": "Metadata",
                            "users": [
                                f"system:serviceaccount:{EXTENDER_NAMESPACE}:{EXTENDER_ACCOUNT}",
                                f"system:serviceaccount:{EXTENDER_NAMESPACE}:{STANDALONE_ACCOUNT}",
                            ],
                            "verbs": ["create", "update", "patch", "delete"],
                        },
                        {"level": "None"},
                    ],
                }
            )
        )
        command = [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_link.port if self.etcd_link else self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--tls-cert-file={pki / 'server.crt'}",
            f"--tls-private-key-file={pki / 'server.key'}",
            f"--client-ca-file={self.certs.ca_file}",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC",
            "--endpoint-reconciler-type=none",
            # The request-header flags kube-scheduler's delegated authentication reads back from
            # kube-system/extension-apiserver-authentication.
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'proxy-client.key'}",
            f"--audit-policy-file={self.folder / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            # Batching off: each request's line is written when it ends.
            "--audit-log-mode=blocking",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
        ]
        # DeviceTaintRules are served wherever the release can (alpha in 1.34 and 1.35, beta and
        # off in 1.36: releases.py), so the taint-rule tests can turn them on in kube-scheduler
        # and the extender; components with the gate off (as every other test runs them) ignore
        # them.
        release = self.release
        runtime_config = ",".join(
            g for g in (release.device_taint_rules_runtime_config, self.runtime_config) if g
        )
        if runtime_config:
            command.append(f"--runtime-config={runtime_config}")
        gates = gates_text(release.suite_gates, release.device_taint_rules_gate, self.feature_gates)
        if gates:
            command.append(f"--feature-gates={gates}")
        return command

    def component_gates(self, extra: str = "") -> str:
        """``--feature-gates`` for kube-scheduler, kube-controller-manager and the extender: the
        gates the suite turns on for this release (releases.py), then ``extra``."""
        return gates_text(self.release.suite_gates, self.feature_gates, extra)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self.etcd.start()
        wait_http(f"http://127.0.0.1:{self.etcd_port}/health", timeout=30, process=self.etcd)
        if self.etcd_link is not None:
            self.etcd_link.__enter__()
        self.start_apiserver()
        self.admin = Api(
            self.url,
            ca=str(self.certs.ca_file),
            cert=self.certs.pair("admin"),
            versions=self.release.api_versions,
        )
        self._bootstrap()
        if self.want_controller_manager and self.binaries.kube_controller_manager is not None:
            self.start_controller_manager()

    def start_controller_manager(self) -> None:
        self.controller_manager = self.controller_manager_process(self.controllers)

    def controller_manager_process(
        self, controllers: Sequence[str], name: str = "kube-controller-manager"
    ) -> Process:
        """kube-controller-manager running ``controllers``, started and healthy (no leader
        election: two of them may run side by side with different controllers)."""
        assert self.binaries.kube_controller_manager is not None
        port = free_port()
        kubeconfig = self.kubeconfig("kube-controller-manager", cert="admin")
        process = Process(
            name,
            [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={kubeconfig}",
                f"--controllers={','.join(controllers)}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                *([f"--feature-gates={gates}"] if (gates := self.component_gates()) else []),
            ],
            self.folder / f"{name}.log",
        )
        process.start()
        wait_http(f"https://127.0.0.1:{port}/healthz", timeout=60, process=process, verify=False)
        return process

    def start_apiserver(self) -> None:
        self.apiserver.start()
        wait_http(
            f"{self.url}/readyz",
            timeout=90,
            process=self.apiserver,
            verify=tls_context(str(self.certs.ca_file), self.certs.pair("admin")),
        )

    def restart_apiserver(self, down_for: float = 0.0) -> None:
        self.apiserver.stop()
        time.sleep(down_for)
        self.start_apiserver()

    def stop(self) -> None:
        if self.admin is not None:
            self.admin.close()
        if self.controller_manager is not None:
            self.controller_manager.stop()
        self.apiserver.stop()
        if self.etcd_link is not None:
            self.etcd_link.__exit__(None, None, None)
        self.etcd.stop()

    def _bootstrap(self) -> None:
        from tests.deploy.test_rendered import rendered

        admin = self.api
        # The sidecar deployment's objects as `kubectl apply -k manifests/` applies them: the
        # namespace, the ServiceAccount, the extender's ClusterRole and the scheduler's bindings.
        for doc in rendered():
            if doc["kind"] in (
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "ConfigMap",
            ) or (doc["kind"].startswith("ValidatingAdmissionPolicy") and SIDECAR_POD == HOSTNAME):
                admin.create(dict(doc))
        self.extender_token = self.token(EXTENDER_NAMESPACE, EXTENDER_ACCOUNT, pod=self._sidecar_pod())
        # kube-controller-manager's serviceaccount controller would make it; the ServiceAccount
        # admission plugin refuses pods without it.
        admin.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": "default"},
            }
        )

    @property
    def api(self) -> Api:
        assert self.admin is not None, "control plane not started"
        return self.admin

    def token(self, namespace: str, account: str, *, pod: dict[str, Any] | None = None) -> str:
        """A token of ``account``; bound to ``pod``, as a pod's projected token is, if given."""
        spec: dict[str, Any] = {"expirationSeconds": 86400}
        if pod is not None:
            meta = pod["metadata"]
            spec["boundObjectRef"] = {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": meta["name"],
                "uid": meta["uid"],
            }
        answer = self.api.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        return str(answer["status"]["token"])

    def replica_pod(self, name: str, account: str) -> dict[str, Any]:
        """A Pod object a replica plays, in the extender's namespace, that a token of
        ``account`` can be bound to (:meth:`token`). Nothing runs it: no scheduler picks it up."""
        return self.api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": EXTENDER_NAMESPACE},
                "spec": {
                    "serviceAccountName": account,
                    "schedulerName": "nobody",
                    "containers": [{"name": "dra-extender", "image": "dra-extender"}],
                },
            }
        )

    def _sidecar_pod(self) -> dict[str, Any]:
        """The sidecar deployment's pod, which this machine's kube-scheduler and extender play.
        Its name is the hostname, which kube-scheduler's Lease identity starts with
        (``<hostname>_<uuid>``), so the sidecar's store fence (manifests/leader-fence.yaml,
        applied above as `kubectl apply -k manifests/` does) admits this pair's writes while its
        kube-scheduler leads or no Lease exists."""
        return self.replica_pod(SIDECAR_POD, EXTENDER_ACCOUNT)

    def kubeconfig(self, name: str, *, token: str | None = None, cert: str | None = None) -> Path:
        """A kubeconfig for this API server: a bearer token, or a client certificate of ours."""
        user: dict[str, str] = {}
        if token is not None:
            user["token"] = token
        elif cert is not None:
            crt, key = self.certs.pair(cert)
            user = {"client-certificate": crt, "client-key": key}
        target = self.folder / f"{name}.kubeconfig"
        target.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "real",
                            "cluster": {"server": self.url, "certificate-authority": str(self.certs.ca_file)},
                        }
                    ],
                    "users": [{"name": name, "user": user}],
                    "contexts": [{"name": "real", "context": {"cluster": "real", "user": name}}],
                    "current-context": "real",
                }
            )
        )
        return target

    @contextlib.contextmanager
    def person(
        self,
        name: str,
        cluster_role: str | None,
        namespace: str = "default",
        *,
        roles: Sequence[tuple[str, str]] = (),
    ) -> Iterator[Path]:
        """A kubeconfig of someone holding ``cluster_role`` (bound through RBAC; None: no role at
        all) and the namespaced ``roles`` ((namespace, Role) pairs, each bound by a RoleBinding):
        a ServiceAccount's token, removed again with its bindings afterwards."""
        api = self.api
        made: list[tuple[str, str, str | None]] = []
        account: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace},
        }
        subjects = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
        rbac = "rbac.authorization.k8s.io"
        made_here: list[tuple[dict[str, Any], str | None]] = [(account, namespace)]
        if cluster_role is not None:
            binding = {
                "apiVersion": f"{rbac}/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": cluster_role},
                "subjects": subjects,
            }
            made_here.append((binding, None))
        for role_namespace, role in roles:
            role_binding = {
                "apiVersion": f"{rbac}/v1",
                "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": role_namespace},
                "roleRef": {"apiGroup": rbac, "kind": "Role", "name": role},
                "subjects": subjects,
            }
            made_here.append((role_binding, role_namespace))
        try:
            for obj, where in made_here:
                try:
                    api.create(obj)
                except ApiError as exc:
                    if exc.code != 409:  # left from an earlier run of the session: use it
                        raise
                    continue
                made.append((obj["kind"], name, where))
            yield self.kubeconfig(name, token=self.token(namespace, name))
        finally:
            for kind, made_name, where in reversed(made):
                with contextlib.suppress(ApiError):
                    api.delete(kind, made_name, where)

    def extender_kubeconfig(self) -> Path:
        return self.kubeconfig("dra-extender", token=self.extender_token)

    # -- audit -------------------------------------------------------------------------------------

    def audit_events(self) -> list[dict[str, Any]]:
        import json

        if not self.audit_log.exists():
            return []
        out = []
        for line in self.audit_log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def refused_writes(self, since: int = 0, deleted_pods: Collection[str] = ()) -> list[str]:
        """The extender's writes the API server refused, other than conflicts (409) and deletes
        of what is already gone (404), from the audit log's line ``since`` on. kube-scheduler
        shares the sidecar's identity; its requests (user agent ``kube-scheduler/...``, e.g. an
        event series of a pod a previous test removed) are not the extender's.

        ``deleted_pods``: pods the test deleted while they were being scheduled. A binding of
        one of them refused with 404 is the race the test made (the pod went between the
        extender's last look and its write, and nothing can close that window), not a refusal."""
        return refused_in(self.audit_events()[since:], deleted_pods)

    # -- objects the tests need -------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        cpu: str = "64",
        memory: str = "256Gi",
        pods: str = "110",
        extra: dict[str, str] | None = None,
    ) -> None:
        """A Node as a kubelet would register it, Ready, with the not-ready taint gone."""
        admin = self.api
        node = admin.create(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            }
        )
        allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        admin.patch(
            "Node",
            name,
            None,
            {
                "status": {
                    "capacity": allocatable,
                    "allocatable": allocatable,
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "test node",
                            "lastHeartbeatTime": now,
                            "lastTransitionTime": now,
                        }
                    ],
                }
            },
            subresource="status",
        )
        # Admission (TaintNodesByCondition) adds node.kubernetes.io/not-ready on create; the node
        # lifecycle controller would remove it once Ready. There is none here.
        for _ in range(10):
            current = admin.get("Node", name)
            assert current is not None
            taints = [
                t
                for t in current["spec"].get("taints") or []
                if not t["key"].startswith("node.kubernetes.io/")
            ]
            if taints == (current["spec"].get("taints") or []):
                break
            current["spec"]["taints"] = taints
            try:
                admin.update(current)
                break
            except ApiError as exc:
                if exc.code != 409:
                    raise
        del node

    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        """A namespace with its ``default`` ServiceAccount (kube-controller-manager would make it;
        the ServiceAccount admission plugin refuses pods without it)."""
        self.api.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
        )
        self.api.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}}
        )


@contextlib.contextmanager
def standalone_fence(plane: ControlPlane) -> Iterator[None]:
    """The standalone deployment's account, roles and fence, installed once and kept (they
    concern only that account, which only the standalone runs use); the Lease is removed afterwards.

    Not deleted and made again per test: on kube-apiserver v1.36.2 a binding made again under the
    same name was seen judging with a stale parameter (a Lease already gone: admitted, where the
    Lease as it was would have refused). A deployment applies the policy once.
    """
    from tests.deploy.test_rendered import STANDALONE, rendered

    for doc in rendered(STANDALONE):
        if doc["kind"] in STANDALONE_APPLIED:
            try:
                plane.api.create(copy.deepcopy(dict(doc)))
            except ApiError as exc:
                if exc.code != 409:
                    raise
    try:
        yield
    finally:
        plane.api.delete("Lease", STANDALONE_LEASE, EXTENDER_NAMESPACE)


@contextlib.contextmanager
def more_controllers(
    plane: ControlPlane, controllers: Sequence[str] = WORKLOAD_CONTROLLERS
) -> Iterator[Process | None]:
    """``controllers`` those of the plane's kube-controller-manager lacks, in a second
    kube-controller-manager for the block (the session's plane runs only the DRA ones, and the
    other tests rely on nothing more); None, nothing started, without the binary."""
    wanted = [c for c in controllers if c not in plane.controllers]
    if plane.binaries.kube_controller_manager is None or not plane.want_controller_manager:
        yield None
        return
    if not wanted:
        yield plane.controller_manager
        return
    process = plane.controller_manager_process(wanted, name="kube-controller-manager-workloads")
    try:
        yield process
    finally:
        process.stop()


@contextlib.contextmanager
def running(binaries: Binaries, folder: Path, **kw: Any) -> Iterator[ControlPlane]:
    plane = ControlPlane(binaries, folder, **kw)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()


def binding_of(event: dict[str, Any]) -> str | None:
    """The pod an audit event's binding create is of; None if it is no binding create."""
    ref = event.get("objectRef") or {}
    if (
        event.get("verb") == "create"
        and ref.get("resource") == "pods"
        and ref.get("subresource") == "binding"
    ):
        return str(ref.get("name"))
    return None


def refused_in(events: Iterable[dict[str, Any]], deleted_pods: Collection[str] = ()) -> list[str]:
    """:meth:`ControlPlane.refused_writes` over audit events read already."""
    refused = []
    for event in events:
        if str(event.get("userAgent", "")).startswith("kube-scheduler/"):
            continue
        code = (event.get("responseStatus") or {}).get("code", 0)
        if code < 400 or code == 409:
            continue
        if code == 404 and (event.get("verb") == "delete" or binding_of(event) in deleted_pods):
            continue
        refused.append(
            f"{event.get('verb')} {event.get('requestURI')}: {code} "
            f"{(event.get('responseStatus') or {}).get('message', '')}"
        )
    return refused
