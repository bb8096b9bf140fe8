"""The agent's HTTP servers as node services: the read-only port and /healthz (up before the first relist, so a
health check answers during start-up), and the authenticated kubelet API on 10250 (up once the node is
registered)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from cri.runtime import Runtime
from cri.streaming import StreamingRuntime
from minikubelet.base.clock import Clock
from minikubelet.base.podview import Pod
from minikubelet.config.kubelet_config import KubeletConfig, read_only_endpoint
from minikubelet.server.app import KubeletServer
from minikubelet.services.service import Service

if TYPE_CHECKING:
    from minikubelet.kubeapi.rest import RestClient  # the API client only on a joined node


class PlainServers(Service):
    name = "servers"

    def __init__(self, config: KubeletConfig, server: KubeletServer) -> None:
        self._config = config
        self.server = server

    async def start(self) -> None:
        cfg = self._config
        read_only = read_only_endpoint(cfg)
        if read_only is not None:
            await self.server.serve(*read_only, self.server.routes(), "readonly")
        if cfg.healthz_port and (read_only is None or cfg.healthz_port != read_only[1]):
            await self.server.serve(cfg.healthz_bind_address, cfg.healthz_port, self.server.health_routes())

    async def stop(self) -> None:
        await self.server.close()  # every port of the server, 10250 included


class KubeletApiServer(Service):
    name = "kubelet-api"

    def __init__(self, config: KubeletConfig, server: KubeletServer, client: RestClient | None, node_name: str,
                 host_ip: str, pods: Callable[[], Iterable[Pod]], runtime: Runtime,
                 streaming: StreamingRuntime | None, clock: Clock) -> None:
        self._config = config
        self._server = server
        self._client = client
        self._node_name = node_name
        self._host_ip = host_ip
        self._pods = pods
        self._runtime = runtime
        self._streaming = streaming
        self._clock = clock

    async def start(self) -> None:
        cfg = self._config
        if cfg.port > 0 or (cfg.port < 0 and self._client is not None):
            from minikubelet.server.kubelet_api_wiring import start_kubelet_api  # only a node that serves it

            await start_kubelet_api(cfg, self._server, joined=self._client is not None, client=self._client,
                                    node_name=self._node_name, host_ip=self._host_ip, pods=self._pods,
                                    runtime=self._runtime, streaming=self._streaming, clock=self._clock)
