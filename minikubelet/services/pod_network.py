"""The joined node's pod network (`--pod-network=host-gw`) as a node service: started before the registration, so
the first Ready condition already carries the network's state."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from cri.network import PodNetworkRuntime
from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import RestClient
from minikubelet.network.pod_network import PodNetwork
from minikubelet.services.service import Loop, Service

log = logging.getLogger("minikubelet.agent")


class PodNetworkService(Service):
    name = "pod-network"

    def __init__(self, network: PodNetwork) -> None:
        self.network = network

    def loops(self) -> Sequence[Loop]:
        return [("pod-network", self.network.run)]


def pod_network(client: RestClient, node_name: str, clock: Clock, runtime: PodNetworkRuntime | None,
                non_masquerade_cidr: str, on_ready: Callable[[], None]) -> PodNetworkService | None:
    if runtime is None:
        log.error("--pod-network=host-gw: the container runtime cannot set up a pod network; pods use its default")
        return None
    return PodNetworkService(PodNetwork(client, node_name, clock, runtime, non_masquerade_cidr, on_ready=on_ready))
