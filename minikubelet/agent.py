"""The composition root: builds the components and services (`minikubelet.services`), starts and stops them."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cri.conditions import ConditionsRuntime
from cri.instrumented import InstrumentedRuntime
from cri.network import PodNetworkRuntime
from cri.runtime import ContainerStatsRuntime, Runtime
from cri.streaming import StreamingRuntime
from cri.timeouts import RequestTimeoutRuntime
from minikubelet import __version__
from minikubelet.base import podview
from minikubelet.base.clock import Clock, RealClock
from minikubelet.base.podview import Pod
from minikubelet.base.prometheus import CollectorRegistry
from minikubelet.cm.pod_cgroups import PodCgroups, build_pod_cgroups
from minikubelet.config.kubelet_config import KubeletConfig, not_implemented_warnings
from minikubelet.events import EventRecorder
from minikubelet.eviction.filesystems import detect as detect_disk_layout
from minikubelet.node.capacity import node_allocatable, node_capacity
from minikubelet.node.info import host_ip, node_name
from minikubelet.node.labels import Node, initial_node
from minikubelet.pod.manager import PodManager
from minikubelet.pod.predicate import PredicateAdmitHandler
from minikubelet.pod.security_admission import admit_handlers
from minikubelet.runtime.pleg import PLEG
from minikubelet.server.app import KubeletServer
from minikubelet.server.stats import StatsHandlers
from minikubelet.services.eviction import EvictionService
from minikubelet.services.explain import explain_pods
from minikubelet.services.housekeeping import Housekeeping
from minikubelet.services.metrics import agent_metrics
from minikubelet.services.node_shutdown import node_shutdown, pods_written
from minikubelet.services.node_status_inputs import NodeStatusReader
from minikubelet.services.pod_resize import PodResizeService
from minikubelet.services.pod_sources import PodSources, ProcessParser
from minikubelet.services.pod_sync import PlegService, PodWorkersService
from minikubelet.services.runtime_health import RuntimeHealth
from minikubelet.services.servers import KubeletApiServer, PlainServers
from minikubelet.services.service import NodeService, ServiceGroup
from minikubelet.services.startup_events import birth_cry
from minikubelet.services.systemd import SystemdNotify
from minikubelet.sources.merge import PodConfig
from minikubelet.stats.provider import StatsProvider
from minikubelet.status.manager import StatusManager
from minikubelet.worker import backoff as bo
from minikubelet.worker.container_log_manager import LogReopener
from minikubelet.worker.containers import Containers
from minikubelet.worker.dependencies import CgroupSource, ProbeSource
from minikubelet.worker.dns import DNSSettings
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.lifecycle import PodLifecycle
from minikubelet.worker.probe_results import ManagerProbeSource
from minikubelet.worker.security_context import SecurityOptions
from minikubelet.worker.sync import PodSyncer
from minikubelet.worker.workers import PodWorker, PodWorkers
from probes.manager import ProbeManager

if TYPE_CHECKING:
    from minikubelet.node.join import NodeJoin
    from minikubelet.services.api_pods import ApiPods

log = logging.getLogger("minikubelet.agent")


class Agent:
    def __init__(self, config: KubeletConfig, runtime: Runtime, clock: Clock | None = None,
                 node_ip: str = "", probes: ProbeSource | None = None, cgroups: CgroupSource | None = None,
                 probe_registry: Any = None, parser: ProcessParser | None = None) -> None:
        self.config = config
        # The unwrapped runtime: interactive exec is an optional capability the wrappers do not forward.
        self.streaming = runtime if isinstance(runtime, StreamingRuntime) else None
        self.network_runtime = runtime if isinstance(runtime, PodNetworkRuntime) else None
        # A CRI runtime's own conditions (RuntimeReady, NetworkReady) feed the node's Ready condition.
        conditions = runtime if isinstance(runtime, ConditionsRuntime) else None
        reopener = runtime if isinstance(runtime, LogReopener) else None
        # ListContainerStats (Docker: one list with sizes) gives the containers' writable layers for the stats.
        self._cri_stats = runtime.list_container_stats if isinstance(runtime, ContainerStatsRuntime) else None
        self.clock = clock = clock or RealClock()
        self.node_name = node_name(config.hostname_override)
        node_ip = node_ip or config.node_ip
        self.host_ip = host_ip(node_ip)
        self.metrics = metrics = agent_metrics(self.node_name, config, lambda: self.stats, clock.now)
        # Every component gets the instrumented runtime, so probe and hook execs are counted too.
        self.runtime = runtime = InstrumentedRuntime(
            RequestTimeoutRuntime(runtime, config.runtime_request_timeout), metrics.runtime_operations,
            metrics.runtime_operations_duration, metrics.runtime_operations_errors)
        self.recorder = recorder = EventRecorder(clock, self.node_name)
        self.container_backoff = bo.Backoff(clock, bo.CONTAINER_BACKOFF_INITIAL, bo.CONTAINER_BACKOFF_MAX)
        self.image_backoff = bo.Backoff(clock, bo.IMAGE_BACKOFF_INITIAL, bo.IMAGE_BACKOFF_MAX)
        self.checkpoint = bo.BackoffCheckpoint(os.path.join(config.root_dir, "backoff.json"),
                                               {"container": self.container_backoff, "image": self.image_backoff})
        self.probe_registry = probe_registry or CollectorRegistry()
        if probes is None:
            probes = ManagerProbeSource(ProbeManager(runtime, clock, self.probe_registry, lambda uid: self.workers.wake(uid),
                                                     events=recorder.pod_event))
        self.probes, self.cgroups, self.statuses = probes, cgroups, StatusManager(metrics=metrics)
        self.images = ImagePuller(runtime, self.image_backoff, recorder, metrics, clock,
                                  serialize=config.serialize_image_pulls)
        allocatable = node_allocatable(config, node_capacity(config.root_dir, config.max_pods))
        self.node = initial_node(self.node_name, config.node_labels, config.register_with_taints, allocatable)
        self.containers = Containers(runtime, clock, recorder, metrics, self.container_backoff, self.images, cgroups,
                                     config.root_dir, config.pod_logs_dir, self.host_ip, allocatable,
                                     legacy_log_dir=config.legacy_container_logs_dir,
                                     security=SecurityOptions.of(config),
                                     dns=DNSSettings(config.cluster_dns, config.cluster_domain, config.resolv_conf,
                                                     (node_ip,) if node_ip else ()))
        self.syncer = PodSyncer(runtime, clock, recorder, metrics, self.containers, self.images,
                                self.container_backoff, self.statuses, probes, config.root_dir, self.host_ip)

        def make_worker(pod: Pod, adopted: bool) -> PodWorker:
            if self.api_pods is not None and podview.is_static(pod):
                self.api_pods.mirrors.wake()  # upstream makes the mirror pod in the static pod's sync
            return PodWorker(pod, self.syncer, clock, metrics, config.sync_frequency, adopted=adopted)

        self.workers = workers = PodWorkers(make_worker, on_finished=self._worker_finished)
        self.stats: StatsProvider | None = None  # once the runtime has said where its filesystems are (run)
        self.pleg = PLEG(runtime, clock, metrics, workers.wake, changed=workers.runtime_changed)
        self.housekeeping = hk = Housekeeping(config, runtime, clock, recorder, metrics, self.statuses, self.checkpoint,
                                              (self.container_backoff, self.image_backoff), self.containers.logs,
                                              reopener, self._stats, workers, self.pleg)
        self.eviction = EvictionService(config, clock, recorder, workers, hk.container_gc, hk.image_gc, self._stats,
                                        self._pod_terminated, metrics)
        self.api_pods: ApiPods | None = None  # built after the registration (needs the join's client)
        self.shutdown = node_shutdown(config, clock, recorder, workers, lambda pods: pods_written(
            self.api_pods.status_sync.written if self.api_pods is not None else None, pods), metrics)
        admit = PredicateAdmitHandler(self._admission_node, config.feature_gates, metrics)
        # upstream adds the eviction manager's admit handler before the others
        self.manager = PodManager(workers, self.statuses, [
            self.eviction.manager, *admit_handlers(config, admit),
            *([self.shutdown.manager] if self.shutdown is not None and self.shutdown.manager else [])], clock, recorder,
            metrics=metrics)
        self.resize = PodResizeService(config, runtime, clock, recorder, metrics, self.manager, workers, self.syncer,
                                       self._sources_seen)
        self.pod_config = PodConfig(self.manager.handle)
        self.health_check = RuntimeHealth(runtime, clock, self.pleg, lambda: workers.wake_all(urgent=True))
        self.sources = PodSources(config, self.node_name, clock, metrics, self._set_source_pods,
                                  hk.stop_orphans_once_sources_seen, parser)
        hk.manager, hk.cgroups, hk.sources_seen = self.manager, lambda: self.cgroups, self._sources_seen
        self.server = KubeletServer(self.statuses.pod_list, self.health_check.health, metrics.registry, recorder.list,
                                    self.probe_registry, pods_version=lambda: self.statuses.version, http=metrics.http)
        self.explainer = explain_pods(self)  # docs/explain.md: the deciders record, the servers answer
        self.pod_network_errors: Callable[[], tuple[str, ...]] = lambda: ()  # joined, host-gw: its errors
        self.status_inputs = NodeStatusReader(
            config, runtime, conditions, self.node_name, self.host_ip, self.health_check, self.eviction.manager,
            lambda: self.shutdown.errors() if self.shutdown is not None else (), lambda: self.pod_network_errors(),
            clock)
        self.join: NodeJoin | None = None
        if config.kubeconfig or config.bootstrap_kubeconfig:
            from minikubelet.services.node_join import node_join  # the API client only on a joined node

            self.join = node_join(config, self.node_name, clock, self.status_inputs, recorder.node_status_event,
                                  metrics.node_startup_latency)
        self.services, self._stop = ServiceGroup(), asyncio.Event()

    def _stats(self) -> StatsProvider:
        assert self.stats is not None, "stats are read only once the agent runs"
        return self.stats

    def _admission_node(self) -> Node:
        """Joined: the Node as the API server has it; standalone, or before the first list: the node built locally."""
        known = self.api_pods.admission_node() if self.api_pods is not None else None
        return known if known is not None else self.node

    def _worker_finished(self, uid: str, pod: Pod) -> None:
        self.manager.worker_finished(uid, pod)
        if self.api_pods is not None and podview.is_static(pod):
            self.api_pods.mirrors.wake()  # a static pod's mirror goes once the static pod has stopped
        self.housekeeping.trim_soon()

    def _set_source_pods(self, source: str, pods: list[Pod]) -> None:
        self.pod_config.set_source_pods(source, pods)
        if self.api_pods is not None and source in podview.STATIC_SOURCES:  # API pods' changes: set_mirror_pods
            self.api_pods.mirrors.wake()
        self.housekeeping.stop_orphans_once_sources_seen()

    def _sources_seen(self) -> bool:
        # as upstream's sourcesReady: a URL or API source's pods are not orphans until it has answered once
        return (self.sources.url is None or self.sources.url.seen) and (
            self.api_pods is None or self.api_pods.source.seen)

    def _pod_terminated(self, uid: str) -> bool:
        """Nothing of the pod can run any more (its worker terminated it, or it has none)."""
        w = self.workers.get(uid)
        return w is None or w.lifecycle is PodLifecycle.TERMINATED

    def _pod_network_ready(self) -> None:
        self.workers.wake_all()  # pods held back by NetworkNotReady start now
        if self.join is not None and self.join.status is not None:
            self.join.status.wake()  # Ready=True goes out now, not at the next update period

    async def health(self) -> list[tuple[str, str | None]]:
        return await self.health_check.health()

    def runtime_errors(self) -> tuple[str, ...]:
        return self.health_check.runtime_errors()

    async def _runtime_up(self) -> None:
        await self.health_check.run()

    async def _prepare(self) -> None:
        """What the runtime has to say before anything starts: its id scheme, cgroup driver and filesystems."""
        cfg = self.config
        os.makedirs(cfg.root_dir, exist_ok=True)
        self.checkpoint.restore()
        version = await self.runtime.version()
        self.syncer.container_id_scheme = version.container_id_scheme
        runtime_config = await self.runtime.runtime_config()
        if self.containers.cgroups is None:
            self.cgroups = build_pod_cgroups(cfg, runtime_config.cgroup_driver,
                                             lambda: list(self.manager.desired.values()), self.metrics.node)
            self.containers.cgroups = self.cgroups
        manager = self.cgroups.manager if isinstance(self.cgroups, PodCgroups) else None
        self.stats = StatsProvider(self.runtime, self.clock, self.node_name, cfg.root_dir, manager,
                                   sandbox_image=cfg.pod_infra_container_image, metrics=self.metrics,
                                   image_fs_path=runtime_config.image_fs_path, volume_period=cfg.volume_stats_agg_period,
                                   container_fs_path=runtime_config.container_fs_path, cri_stats=self._cri_stats)
        self.eviction.use_node(detect_disk_layout(cfg.root_dir, runtime_config.image_fs_path,
                                                  runtime_config.container_fs_path), self.cgroups)
        self.server.stats = StatsHandlers(self.stats)
        log.info("starting minikubelet", extra={"kv": {
            "version": __version__, "node": self.node_name, "nodeIP": self.host_ip,
            "runtime": f"{version.runtime_name} {version.runtime_version}", "staticPodPath": cfg.static_pod_path}})
        for warning in not_implemented_warnings(cfg):
            log.warning(warning)

    async def _start_joined(self, join: NodeJoin) -> None:
        """TLS bootstrap and registration before the pods; the start-up events and the pod network's state go out
        with the first Node, as upstream's."""
        from minikubelet.services.api_pods import ApiPods
        from minikubelet.services.event_sink import EventSinkService
        from minikubelet.services.node_join import NodeConnection, NodeRegistration
        from minikubelet.services.pod_network import pod_network

        await self.services.start(NodeConnection(join))
        assert join.client is not None
        await self.services.start(EventSinkService(join.client, self.clock, self.recorder))
        network = pod_network(join.client, self.node_name, self.clock, self.network_runtime,
                              self.config.non_masquerade_cidr, self._pod_network_ready) \
            if self.config.pod_network == "host-gw" else None
        if network is not None:
            self.syncer.network_errors = self.pod_network_errors = network.network.errors
            await self.services.start(network)
        birth_cry(self.recorder, self.config, self.cgroups)
        await self.services.start(NodeRegistration(join))
        if self.shutdown is not None:
            self.shutdown.node_status = lambda: join.status
        self.api_pods = ApiPods(join.client, self.node_name, self.clock, self.config.max_pods, self.manager,
                                self.workers, self.statuses, self.containers, self._set_source_pods,
                                self._pod_terminated, join.status,
                                network.network.own_node if network is not None else None, self.metrics)
        await self.services.start(self.api_pods)

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        await self._prepare()
        services = self.services
        try:
            # The read-only port and /healthz first: a health check answers while the node starts.
            await services.start(PlainServers(self.config, self.server), PlegService(self.pleg, self.syncer))
            if self.join is not None:
                await self._start_joined(self.join)
            else:
                if self.config.pod_network:
                    log.warning("--pod-network needs the API server (--kubeconfig); pods use the runtime's default "
                                "network")
                birth_cry(self.recorder, self.config, self.cgroups)
            # Stopped in reverse: the backoff checkpoint is saved after the workers have stopped, the API objects
            # are closed after that, and the servers go last.
            systemd = SystemdNotify(self.clock, self.node_name, self.health_check.watchdog_checks)
            late: list[NodeService] = [
                self.housekeeping, PodWorkersService(self.workers),
                KubeletApiServer(self.config, self.server, self.join.client if self.join is not None else None,
                                 self.node_name, self.host_ip, lambda: self.manager.desired.values(), self.runtime,
                                 self.streaming, self.clock),
                self.sources, self.health_check, self.eviction, *([self.shutdown] if self.shutdown is not None else []),
                self.resize, systemd]
            await services.start(*late)

            def stopping() -> None:
                log.info("stopping minikubelet (pods keep running)")
                systemd.stopping()

            await services.run(self._stop, on_stop=stopping)
        finally:
            await services.stop()

