"""Joining the cluster: the client (after a TLS bootstrap if needed), registration, status, lease, rotation.

`start()` runs before the pod loop: the TLS bootstrap (blocking, as upstream: without a certificate the
node cannot talk to the API server) and the first registration, waited for at most `register_wait`
seconds. A control plane node runs its API server as a static pod, so the pods must not wait for the
API server forever. `run()` then keeps the status, the lease and the certificate going.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from minikubelet.base.clock import Clock
from minikubelet.kubeapi.kubeconfig import ClientConfig, load_kubeconfig
from minikubelet.kubeapi.rest import RestClient
from minikubelet.metrics import NodeStartupLatency
from minikubelet.node.certificates import CertificateRotator, CertificateStore, bootstrap_client_certificate
from minikubelet.node.lease import NodeLease
from minikubelet.node.registration import NodeRegistration, initial_node
from minikubelet.node.status import NodeStatusInputs, set_node_status
from minikubelet.node.status_updater import NodeStatusUpdater

log = logging.getLogger("minikubelet.node.join")
Json = dict[str, Any]


@dataclass(frozen=True)
class JoinSettings:
    node_name: str
    root_dir: str
    kubeconfig: str  # where the node's kubeconfig is (or is written to, after a bootstrap)
    bootstrap_kubeconfig: str = ""
    node_labels: Mapping[str, str] | None = None
    register_with_taints: tuple[Mapping[str, str], ...] = ()
    qps: float = 50
    burst: int = 100
    update_frequency: float = 10.0
    report_frequency: float = 300.0
    lease_duration: int = 40
    rotate_certificates: bool = False
    register_wait: float = 10.0
    agent: str = "minikubelet"

    @property
    def cert_dir(self) -> str:
        return os.path.join(self.root_dir, "pki")

    @property
    def kubeconfig_path(self) -> str:
        return self.kubeconfig or os.path.join(self.root_dir, "kubelet.conf")


class NodeJoin:
    def __init__(self, settings: JoinSettings, clock: Clock,
                 inputs: Callable[[], Awaitable[NodeStatusInputs]],
                 record: Callable[[str, str], None] | None = None, startup: NodeStartupLatency | None = None) -> None:
        self.settings = settings
        self.startup = startup
        self.clock = clock
        self.inputs = inputs
        self.record = record  # node condition transitions, as events
        self.client: RestClient | None = None
        self.status: NodeStatusUpdater | None = None
        self.lease: NodeLease | None = None
        self.rotator: CertificateRotator | None = None

    def make_client(self, cfg: ClientConfig) -> RestClient:
        return RestClient(cfg, self.clock, qps=self.settings.qps, burst=self.settings.burst, agent=self.settings.agent)

    async def _build_node(self) -> Json:
        s = self.settings
        node = initial_node(s.node_name, s.node_labels or {}, s.register_with_taints)
        for kind, reason in set_node_status(node, await self.inputs(), self.clock.now()):
            if self.record is not None:
                self.record(kind, reason)
        return copy.deepcopy(node)

    async def start(self) -> None:
        await self.connect()
        await self.register()

    async def connect(self) -> None:
        """The TLS bootstrap when needed, then a client with the node's credentials."""
        s = self.settings
        if s.bootstrap_kubeconfig:
            await bootstrap_client_certificate(s.kubeconfig_path, s.bootstrap_kubeconfig, s.cert_dir, s.node_name,
                                               self.clock, self.make_client)
        self.client = self.make_client(load_kubeconfig(s.kubeconfig_path))

    async def register(self) -> None:
        """The Node registered (bounded wait), its status updater, lease and certificate rotation built."""
        s = self.settings
        client = self.client
        assert client is not None, "connect() first"
        registration = NodeRegistration(client, self.clock, s.node_name, self._build_node, self.startup)
        self.status = NodeStatusUpdater(client, self.clock, registration, self.inputs,
                                        update_frequency=s.update_frequency, report_frequency=s.report_frequency,
                                        record=self.record)
        self.lease = NodeLease(client, self.clock, s.node_name, s.lease_duration)
        cert_file = client.config.cert_file
        if s.rotate_certificates and not cert_file.endswith("-current.pem"):
            log.warning("rotateCertificates needs a client certificate from the TLS bootstrap "
                        "(<name>-current.pem); not rotating", extra={"kv": {"certificate": cert_file}})
        elif s.rotate_certificates:
            bootstrap = load_kubeconfig(s.bootstrap_kubeconfig) if s.bootstrap_kubeconfig else None
            store = CertificateStore(os.path.dirname(cert_file), os.path.basename(cert_file).removesuffix("-current.pem"))
            self.rotator = CertificateRotator(store, s.node_name, self.clock, client, client.reload, bootstrap,
                                              self.make_client)
        try:
            async with asyncio.timeout(s.register_wait):
                await self.status.sync()
        except TimeoutError:
            log.warning("node not registered yet; starting the pods, registration continues",
                        extra={"kv": {"node": s.node_name}})

    def tasks(self) -> list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]]:
        assert self.status is not None and self.lease is not None
        out: list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]] = [("node-status", self.status.run),
                                                                 ("node-lease", self.lease.run)]
        if self.rotator is not None:
            out.append(("certificate-rotation", self.rotator.run))
        return out

    async def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()
