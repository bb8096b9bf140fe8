"""The joined node's pod network, host-gw style: what kubenet, the route controller and flannel's host-gw
backend do together on a real cluster, built into the agent (docs/cluster.md#pod-networking).

- The node's own `spec.podCIDRs` (from the own-Node lister, which the Node authorizer always allows) go to
  the runtime (`UpdateRuntimeConfig`, as upstream's updatePodCIDR): a bridge on those CIDRs for new pod
  sandboxes; then the masquerade and forward rules. Until that is done the runtime network is not ready:
  the Ready condition says so, and pods that do not use the host network wait (upstream's runtimeState
  networkErrors).
- Every other Node's podCIDRs are routed via its InternalIP. That needs list/watch of all Nodes, which the
  Node authorizer does not give a node: a ClusterRole bound to the node (a network add-on's grant) does.
  Without it the watch retries and logs the 403; the local network still works.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from cri.errors import RuntimeError_
from cri.network import PodNetworkRuntime
from minikubelet.base.clock import Clock
from minikubelet.kubeapi.rest import RestClient
from minikubelet.kubeapi.watch import LIST, ListWatch, WatchEvent
from minikubelet.network import host_gw
from minikubelet.network.masquerade import IptablesError, enable_forwarding, ensure_rules
from minikubelet.network.routes import Route, node_name, pod_cidrs, wanted_routes

log = logging.getLogger("minikubelet.network")
Json = dict[str, Any]

NODES_PATH = "/api/v1/nodes"
SETUP_TIMEOUT = 120.0  # as runtimeRequestTimeout's default
RESYNC_PERIOD = 30.0  # routes and rules are checked again (someone may have flushed them)
# upstream's runtime condition as the kubelet prints it; the message is kubenet's (cri-dockerd) own
NOT_READY = "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: "
NO_POD_CIDR = "Kubenet does not have netConfig. This is most likely due to lack of PodCIDR"


class PodNetwork:
    def __init__(self, client: RestClient, node: str, clock: Clock, runtime: PodNetworkRuntime,
                 non_masquerade_cidr: str, on_ready: Callable[[], None], *,
                 sync_routes: Callable[[Sequence[Route]], Awaitable[list[str]]] = host_gw.sync_routes,
                 ensure_rules: Callable[[tuple[str, ...], str], Awaitable[None]] = ensure_rules,
                 enable_forwarding: Callable[[tuple[str, ...]], None] = enable_forwarding) -> None:
        """The netlink, iptables and sysctl steps are parameters so the unit tests can record them."""
        self.node = node
        self.clock = clock
        self.runtime = runtime
        self.non_masquerade_cidr = non_masquerade_cidr
        self.on_ready = on_ready
        self._sync_routes = sync_routes
        self._ensure_rules = ensure_rules
        self._enable_forwarding = enable_forwarding
        self.watch = ListWatch(client, NODES_PATH, clock)
        self.pod_cidrs: tuple[str, ...] = ()  # set up on the runtime
        self._wanted_cidrs: tuple[str, ...] = ()  # from the own Node
        self._nodes: dict[str, Json] = {}
        self._error = NO_POD_CIDR
        self.routes: list[Route] = []
        self.route_errors: list[str] = []
        self._dirty = asyncio.Event()

    def errors(self) -> tuple[str, ...]:
        """The Ready condition's network error, as upstream's runtimeState.networkErrors."""
        return (NOT_READY + self._error,) if self._error else ()

    @property
    def ready(self) -> bool:
        return not self._error

    def own_node(self, obj: Mapping[str, Any]) -> None:
        """The own Node as the lister saw it (its podCIDRs may have just been allocated)."""
        cidrs = pod_cidrs(obj)
        if cidrs and cidrs != self._wanted_cidrs:
            self._wanted_cidrs = cidrs
            self._nodes[self.node] = dict(obj)
            self._dirty.set()

    def apply(self, event: WatchEvent) -> None:
        if event.type == LIST:
            self._nodes = {node_name(o): o for o in event.items if node_name(o)}
        elif event.type == "DELETED":
            self._nodes.pop(node_name(event.object), None)
        elif node_name(event.object):
            self._nodes[node_name(event.object)] = event.object
        own = self._nodes.get(self.node)
        if own is not None:
            self.own_node(own)
        self._dirty.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._watch_nodes(), name="pod-network-nodes")
            tg.create_task(self._resync(), name="pod-network-resync")
            while True:
                await self._dirty.wait()
                self._dirty.clear()
                await self.reconcile()

    async def _watch_nodes(self) -> None:
        async for event in self.watch.events():
            self.apply(event)

    async def _resync(self) -> None:
        while True:
            await self.clock.sleep(RESYNC_PERIOD)
            self._dirty.set()

    async def reconcile(self) -> None:
        await self._setup_local()
        routes = wanted_routes(self._nodes.values(), self.node)
        try:
            errors = await self._sync_routes(routes)
        except Exception as e:  # netlink trouble must not stop the agent; the next resync tries again
            errors = [f"netlink: {e or type(e).__name__}"]
        if errors != self.route_errors:
            for err in errors:
                log.warning("route to a node's pod CIDR not set", extra={"kv": {"err": err}})
        self.routes, self.route_errors = routes, errors

    async def _setup_local(self) -> None:
        cidrs = self._wanted_cidrs
        if not cidrs:
            return
        try:
            if cidrs != self.pod_cidrs:
                async with asyncio.timeout(SETUP_TIMEOUT):  # the unwrapped runtime has no request timeout
                    await self.runtime.update_pod_cidrs(cidrs)
                log.info("Updating Pod CIDR", extra={"kv": {"originalPodCIDR": ",".join(self.pod_cidrs),
                                                            "newPodCIDR": ",".join(cidrs)}})
                self.pod_cidrs = cidrs
            await self._ensure_rules(cidrs, self.non_masquerade_cidr)
            self._enable_forwarding(cidrs)
        except (RuntimeError_, IptablesError, OSError, TimeoutError) as e:
            if self._error != str(e):
                log.error("pod network setup failed", extra={"kv": {"podCIDRs": ",".join(cidrs), "err": str(e)}})
            self._error = str(e) or type(e).__name__
            return
        if self._error:
            self._error = ""
            log.info("pod network ready", extra={"kv": {"podCIDRs": ",".join(cidrs)}})
            self.on_ready()
