"""Joining the cluster as two node services: the connection (TLS bootstrap, the client certificate; closed last of
the API's users) and the registration (the Node, then its status updates and the Lease). Between the two the agent
starts the event sink and the pod network, so the start-up events and the network's state go out with the first
Node, as upstream's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from minikubelet import __version__
from minikubelet.base.clock import Clock
from minikubelet.config.kubelet_config import KubeletConfig
from minikubelet.kubeapi.rest import user_agent
from minikubelet.metrics import NodeStartupLatency
from minikubelet.node.join import JoinSettings, NodeJoin
from minikubelet.node.status import NodeStatusInputs
from minikubelet.services.service import Loop, Service


def node_join(config: KubeletConfig, node_name: str, clock: Clock, inputs: Callable[[], Awaitable[NodeStatusInputs]],
              status_event: Callable[[str, str], None], startup: NodeStartupLatency | None = None) -> NodeJoin:
    """The join, as configured (imported only when joining: the API client, TLS and certificates are most of a
    standalone agent's RSS)."""
    return NodeJoin(JoinSettings(
        node_name=node_name, root_dir=config.root_dir, kubeconfig=config.kubeconfig,
        bootstrap_kubeconfig=config.bootstrap_kubeconfig, node_labels=config.node_labels,
        register_with_taints=config.register_with_taints, qps=config.kube_api_qps, burst=config.kube_api_burst,
        update_frequency=config.node_status_update_frequency, report_frequency=config.node_status_report_frequency,
        lease_duration=config.node_lease_duration_seconds, rotate_certificates=config.rotate_certificates,
        agent=user_agent(__version__),
    ), clock, inputs, status_event, startup)


class NodeConnection(Service):
    name = "node-connection"

    def __init__(self, join: NodeJoin) -> None:
        self.join = join

    async def start(self) -> None:
        await self.join.connect()  # bounded: see node/join.py

    async def stop(self) -> None:
        await self.join.close()


class NodeRegistration(Service):
    name = "node-registration"

    def __init__(self, join: NodeJoin) -> None:
        self.join = join

    async def start(self) -> None:
        await self.join.register()

    def loops(self) -> Sequence[Loop]:
        return self.join.tasks()
