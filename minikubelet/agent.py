"""The composition root: builds every component and runs them under one TaskGroup."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from cgroups.allocatable import hard_eviction_reservation, parse_resource_list
from cgroups.detect import detect_cgroup_version
from cri.conditions import ConditionsRuntime, condition_errors
from cri.instrumented import InstrumentedRuntime
from cri.network import PodNetworkRuntime
from cri.runtime import ContainerStatsRuntime, Runtime
from cri.streaming import StreamingRuntime
from cri.timeouts import RequestTimeoutRuntime
from minikubelet import KUBERNETES_VERSION, __version__
from minikubelet.base import podview
from minikubelet.base.clock import Clock, RealClock
from minikubelet.base.kubetime import rfc3339
from minikubelet.base.podview import Pod
from minikubelet.base.quantity import to_bytes
from minikubelet.cm.pod_cgroups import PodCgroups, build_pod_cgroups
from minikubelet.config.kubelet_config import KubeletConfig, feature_enabled, not_implemented_warnings
from minikubelet.events import (
    CGROUP_V1,
    CGROUP_V1_MESSAGE,
    NODE_ALLOCATABLE_ENFORCED,
    STARTING_KUBELET,
    EventRecorder,
)
from minikubelet.eviction.filesystems import detect as detect_disk_layout
from minikubelet.eviction.manager import EvictionManager, Settings
from minikubelet.eviction.thresholds import (
    CONTAINERFS_AVAILABLE,
    CONTAINERFS_INODES_FREE,
    IMAGEFS_AVAILABLE,
    IMAGEFS_INODES_FREE,
    NODEFS_AVAILABLE,
    NODEFS_INODES_FREE,
    parse_thresholds,
)
from minikubelet.metrics import Metrics
from minikubelet.node.capacity import node_allocatable, node_capacity
from minikubelet.node.info import host_ip, node_name
from minikubelet.node.labels import Node, initial_node
from minikubelet.node.machine import hugepages_capacity, machine_info
from minikubelet.node.sd_notify import Notifier, watchdog_interval
from minikubelet.node.status import KUBELET_PORT, NodeStatusInputs, declared_features, runtime_errors
from minikubelet.node.watchdog import Watchdog
from minikubelet.pod.manager import PodManager
from minikubelet.pod.predicate import PredicateAdmitHandler
from minikubelet.pod.preemption import PREEMPT_MESSAGE, PREEMPT_REASON, preempted_status_fn
from minikubelet.pod.security_admission import admit_handlers
from minikubelet.runtime.pleg import PLEG
from minikubelet.server.app import KubeletServer
from minikubelet.server.stats import StatsHandlers
from minikubelet.sources.file import StaticPodSource, release_memory
from minikubelet.sources.manifest_worker import ProcessParser
from minikubelet.sources.merge import PodConfig
from minikubelet.stats.provider import StatsProvider
from minikubelet.stats.summary import summary as render_summary
from minikubelet.status.manager import StatusManager
from minikubelet.volumes.manager import cleanup_orphaned_pod_dirs
from minikubelet.worker.backoff import (
    CONTAINER_BACKOFF_INITIAL,
    CONTAINER_BACKOFF_MAX,
    IMAGE_BACKOFF_INITIAL,
    IMAGE_BACKOFF_MAX,
    Backoff,
    BackoffCheckpoint,
)
from minikubelet.worker.container_log_manager import ContainerLogManager, LogReopener, LogRotatePolicy
from minikubelet.worker.containers import Containers
from minikubelet.worker.dependencies import CgroupSource, ProbeSource
from minikubelet.worker.dns import DNSSettings
from minikubelet.worker.gc import ContainerGC
from minikubelet.worker.image_gc import ImageGC, ImageGCPolicy
from minikubelet.worker.images import ImagePuller
from minikubelet.worker.lifecycle import KillPodOptions, PodLifecycle, PodStatusFn
from minikubelet.worker.probe_results import ManagerProbeSource
from minikubelet.worker.security_context import SecurityOptions
from minikubelet.worker.sync import PodSyncer
from minikubelet.worker.workers import PodWorker, PodWorkers
from probes.manager import ProbeManager

if TYPE_CHECKING:
    from minikubelet.events.api_sink import ApiEventSink
    from minikubelet.kubeapi.informer import Informer
    from minikubelet.network.pod_network import PodNetwork
    from minikubelet.node.join import NodeJoin
    from minikubelet.node.lister import NodeLister
    from minikubelet.nodeshutdown.manager import NodeShutdownManager
    from minikubelet.pod.mirror import MirrorPods, StaticPod
    from minikubelet.sources.apiserver import ApiserverPodSource
    from minikubelet.sources.url import URLPodSource
    from minikubelet.status.api_sync import PodStatusSync

log = logging.getLogger("minikubelet.agent")

RUNTIME_UP_PERIOD = 5.0  # upstream updateRuntimeUp's period
SYNC_LOOP_HEALTH_WINDOW = 300.0  # upstream SyncLoopHealthCheck: max(2 × resyncInterval (1 m), 5 m)
CHECKPOINT_PERIOD = 2.0
ORPHAN_SWEEP_PERIOD = 60.0


class Agent:
    def __init__(self, config: KubeletConfig, runtime: Runtime, clock: Clock | None = None,
                 node_ip: str = "", probes: ProbeSource | None = None, cgroups: CgroupSource | None = None,
                 probe_registry: Any = None) -> None:
        self.config = config
        # The unwrapped runtime: interactive exec is an optional capability the wrappers do not forward.
        self.streaming = runtime if isinstance(runtime, StreamingRuntime) else None
        self.network_runtime = runtime if isinstance(runtime, PodNetworkRuntime) else None
        # A CRI runtime's own conditions (RuntimeReady, NetworkReady) feed the node's Ready condition.
        self.conditions = runtime if isinstance(runtime, ConditionsRuntime) else None
        # A CRI runtime's log files are the kubelet's to rotate (Docker rotates its own json-file logs).
        reopener = runtime if isinstance(runtime, LogReopener) else None
        # ListContainerStats (Docker: one list with sizes) gives the containers' writable layers for the stats.
        self._cri_stats = runtime.list_container_stats if isinstance(runtime, ContainerStatsRuntime) else None
        runtime = RequestTimeoutRuntime(runtime, config.runtime_request_timeout)
        self.clock = clock or RealClock()
        self.node_name = node_name(config.hostname_override)
        node_ip = node_ip or config.node_ip
        self.host_ip = host_ip(node_ip)
        self.metrics = Metrics()
        # Every component gets the instrumented runtime, so probe and hook execs are counted too.
        self.runtime = runtime = InstrumentedRuntime(
            runtime, self.metrics.runtime_operations, self.metrics.runtime_operations_duration,
            self.metrics.runtime_operations_errors,
        )
        self.recorder = EventRecorder(self.clock, self.node_name)
        self.container_backoff = Backoff(self.clock, CONTAINER_BACKOFF_INITIAL, CONTAINER_BACKOFF_MAX)
        self.image_backoff = Backoff(self.clock, IMAGE_BACKOFF_INITIAL, IMAGE_BACKOFF_MAX)
        self.checkpoint = BackoffCheckpoint(
            os.path.join(config.root_dir, "backoff.json"),
            {"container": self.container_backoff, "image": self.image_backoff},
        )
        self.probe_registry = probe_registry or CollectorRegistry()
        if probes is None:
            manager = ProbeManager(runtime, self.clock, self.probe_registry, self._probe_changed,
                                   events=self.recorder.pod_event)
            probes = ManagerProbeSource(manager)
        self.probes = probes
        self.cgroups = cgroups

        self.statuses = StatusManager()
        self.images = ImagePuller(runtime, self.image_backoff, self.recorder, self.metrics, self.clock,
                                  serialize=config.serialize_image_pulls)
        allocatable = node_allocatable(config, node_capacity(config.root_dir, config.max_pods))
        self.node = initial_node(self.node_name, config.node_labels, config.register_with_taints, allocatable)
        self.containers = Containers(runtime, self.clock, self.recorder, self.metrics, self.container_backoff,
                                     self.images, cgroups, config.root_dir, config.pod_logs_dir, self.host_ip,
                                     allocatable, legacy_log_dir=config.legacy_container_logs_dir,
                                     security=SecurityOptions.of(config),
                                     dns=DNSSettings(config.cluster_dns, config.cluster_domain, config.resolv_conf,
                                                     (node_ip,) if node_ip else ()))
        self.syncer = PodSyncer(runtime, self.clock, self.recorder, self.metrics, self.containers, self.images,
                                self.container_backoff, self.statuses, probes, config.root_dir, self.host_ip)

        def make_worker(pod: Pod, adopted: bool) -> PodWorker:
            return PodWorker(pod, self.syncer, self.clock, self.metrics, config.sync_frequency, adopted=adopted)

        self.workers = PodWorkers(make_worker, on_finished=self._worker_finished)
        self.container_gc = ContainerGC(runtime, self.clock, self.containers.logs, self.workers.uids)
        self.log_rotation = None if reopener is None else ContainerLogManager(
            runtime, reopener.reopen_container_log, self.clock,
            LogRotatePolicy(to_bytes(config.container_log_max_size), config.container_log_max_files),
            config.container_log_max_workers, config.container_log_monitor_interval)
        admit = PredicateAdmitHandler(self._admission_node, self._preempt, config.feature_gates)
        self.image_gc = ImageGC(runtime, self.clock, ImageGCPolicy(
            config.image_gc_high_threshold_percent, config.image_gc_low_threshold_percent,
            config.image_minimum_gc_age, config.image_maximum_gc_age), config.pod_infra_container_image,
            self._image_fs, self.recorder.node_event)
        self.eviction = self._eviction_manager()
        # upstream adds the eviction manager's admit handler before the others
        self.shutdown = self._node_shutdown()
        self.manager = PodManager(self.workers, self.statuses, [
            self.eviction, *admit_handlers(config, admit), *([self.shutdown] if self.shutdown is not None else [])],
            self.clock, self.recorder)
        self.pod_config = PodConfig(self.manager.handle)
        self.pleg = PLEG(runtime, self.clock, self.metrics, self.workers.wake)
        parser = ProcessParser()  # one parser process for both sources
        self.static = StaticPodSource(
            config.static_pod_path, self.node_name, self.clock, self.metrics, self._set_source_pods,
            check_frequency=config.file_check_frequency, parser=parser,
        )
        self.url_source: URLPodSource | None = None
        if config.static_pod_url:
            # yarl and multidict (~2 MiB) only for an agent with a manifest URL.
            from minikubelet.sources.url import URLPodSource

            self.url_source = URLPodSource(
                config.static_pod_url, config.static_pod_url_header, self.node_name, self.clock, self.metrics,
                self._set_source_pods, parser, check_frequency=config.http_check_frequency,
            )
        self._orphans_pending = True
        self.api_source: ApiserverPodSource | None = None  # built after the join (needs its client)
        self.node_lister: NodeLister | None = None
        self.pod_network: PodNetwork | None = None  # joined with --pod-network=host-gw
        self._refetches: set[asyncio.Task[None]] = set()
        self._trim: asyncio.TimerHandle | None = None
        self.status_sync: PodStatusSync | None = None
        self.services: Informer | None = None
        self.mirrors: MirrorPods | None = None
        self.event_sink: ApiEventSink | None = None
        self._event_task: asyncio.Task[None] | None = None
        self.server = KubeletServer(self.statuses.pod_list, self.health, self.metrics.registry,
                                    self.recorder.list, self.probe_registry,
                                    pods_version=lambda: self.statuses.version)
        self._runtime_error: str | None = None
        self._runtime_ok: float | None = None  # monotonic time of the last answer of the runtime
        # monotonic time the sync loop last ran; as upstream's syncLoop it does not while the runtime is down
        self._sync_loop_entry: float | None = None
        self._stop = asyncio.Event()
        self.join: NodeJoin | None = self._node_join() if config.kubeconfig or config.bootstrap_kubeconfig else None

    def _node_join(self) -> NodeJoin:
        # Imported only when joining: the API client, TLS and certificates are most of a standalone agent's RSS.
        from minikubelet.kubeapi.rest import user_agent
        from minikubelet.node.join import JoinSettings, NodeJoin

        config = self.config
        return NodeJoin(JoinSettings(
            node_name=self.node_name, root_dir=config.root_dir, kubeconfig=config.kubeconfig,
            bootstrap_kubeconfig=config.bootstrap_kubeconfig, node_labels=config.node_labels,
            register_with_taints=config.register_with_taints, qps=config.kube_api_qps, burst=config.kube_api_burst,
            update_frequency=config.node_status_update_frequency,
            report_frequency=config.node_status_report_frequency,
            lease_duration=config.node_lease_duration_seconds, rotate_certificates=config.rotate_certificates,
            agent=user_agent(__version__),
        ), self.clock, self._node_status_inputs, self.recorder.node_status_event)

    def _eviction_manager(self) -> EvictionManager:
        cfg = self.config
        thresholds = parse_thresholds(cfg.eviction_hard, cfg.eviction_soft, cfg.eviction_soft_grace_period,
                                      cfg.eviction_minimum_reclaim, cfg.enforce_node_allocatable)
        # upstream buildSignalToNodeReclaimFuncs (one filesystem): dead containers, then unused images
        disk = (self.container_gc.collect, self.image_gc.delete_unused_images)
        reclaim = {s: disk for s in (NODEFS_AVAILABLE, NODEFS_INODES_FREE, IMAGEFS_AVAILABLE, IMAGEFS_INODES_FREE,
                                     CONTAINERFS_AVAILABLE, CONTAINERFS_INODES_FREE)}
        return EvictionManager(
            Settings(thresholds, cfg.eviction_max_pod_grace_period, cfg.eviction_pressure_transition_period,
                     reclaim=reclaim),
            self.clock, self._eviction_summary, self.workers.active_pods, self._evict_pod, self.recorder.pod_event,
            self.recorder.node_event, lambda pod: self._pod_terminated(podview.uid(pod)),
            comparison_operators=cfg.feature_gates.get("TaintTolerationComparisonOperators", False))

    async def _eviction_summary(self, fresh: bool) -> dict[str, Any]:
        """The Summary as `/stats/summary` serves it: the housekeeping pass's, or a pass taken now when the eviction
        manager needs current numbers (a memcg notification, after a node-level reclaim). Extra passes are kept to
        those: each one also shortens the window of the CPU rates the Summary reports."""
        snap = self.stats.snapshot
        if fresh or snap is None:
            snap = await self.stats.update()
        return render_summary(snap)

    async def _image_fs(self) -> tuple[int, int]:
        snap = self.stats.snapshot or await self.stats.update()
        fs = snap.node.image_fs.capacity if snap.node.image_fs is not None else None
        return (fs.capacity, fs.available) if fs is not None else (0, 0)

    def _evict_pod(self, pod: Pod, grace: int, status_fn: PodStatusFn) -> None:
        self.workers.update_pod(pod, kill=KillPodOptions(grace_override=grace, status_fn=status_fn))

    def _start_memcg_notifiers(self) -> None:
        """kernelMemcgNotification: watch the agent's own kubepods memory cgroup (v1: a usage threshold; v2:
        PSI and memory.events)."""
        from cgroups.naming import kubepods_name
        from cgroups.systemd_driver import SystemdCgroupDriver
        from cgroups.v1 import CgroupV1Driver
        from cgroups.v2 import CgroupV2Driver
        from minikubelet.eviction.memcg_notifier import ThresholdNotifier
        from minikubelet.eviction.thresholds import ALLOCATABLE_MEMORY_AVAILABLE

        manager = self.cgroups.manager if isinstance(self.cgroups, PodCgroups) else None
        if not self.config.kernel_memcg_notification or manager is None:
            return
        literal = manager.literal(kubepods_name(manager.root))
        # systemd makes the slices; their files are watched as with cgroupfs
        driver = manager.driver.files if isinstance(manager.driver, SystemdCgroupDriver) else manager.driver
        if isinstance(driver, CgroupV2Driver):
            self._start_pressure_notifier(driver.root.joinpath(*[p for p in literal.split("/") if p]))
            return
        if not isinstance(driver, CgroupV1Driver) or "memory" not in driver.hierarchies:
            log.info("kernelMemcgNotification: needs the cgroup v1 memory controller; the 10 s monitoring stays")
            return
        path = Path(driver.hierarchies["memory"]).joinpath(*[p for p in literal.split("/") if p])
        for t in self.eviction.settings.thresholds:
            if t.signal == ALLOCATABLE_MEMORY_AVAILABLE:
                self.eviction.notifiers.append(ThresholdNotifier(path, t, self.eviction.notify))

    def _start_pressure_notifier(self, kubepods: Path) -> None:
        """cgroup v2 (beyond upstream, which has no notifier there): PSI and memory.events of kubepods."""
        from minikubelet.eviction.pressure_notifier import PressureNotifier
        from minikubelet.eviction.thresholds import ALLOCATABLE_MEMORY_AVAILABLE, MEMORY_AVAILABLE

        if not any(t.signal in (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE)
                   for t in self.eviction.settings.thresholds):
            return
        notifier = PressureNotifier(kubepods, self.eviction.notify, self.clock)
        try:
            notifier.start()
        except OSError as e:
            log.info("kernelMemcgNotification: no memory pressure notification on cgroup v2; the 10 s monitoring "
                     "stays", extra={"kv": {"cgroup": str(kubepods), "err": str(e)}})
            return
        self.eviction.notifiers.append(notifier)

    def _node_shutdown(self) -> NodeShutdownManager | None:
        """The graceful node shutdown manager; None when off (the gate, or no grace configured: the default)."""
        from minikubelet.nodeshutdown.groups import shutdown_periods

        cfg = self.config
        periods = shutdown_periods(cfg, feature_enabled(cfg, "GracefulNodeShutdownBasedOnPodPriority"))
        if not feature_enabled(cfg, "GracefulNodeShutdown") or not periods:
            return None
        # dbus-fast only when the manager runs (off by default, as upstream)
        from minikubelet.nodeshutdown.logind import LOGIND_CONF_DIR, Logind
        from minikubelet.nodeshutdown.manager import NodeShutdownManager

        # MKL_LOGIND_CONF_DIR: where the InhibitDelayMaxSec drop-in goes when logind is a test's double
        conf_dir = os.environ.get("MKL_LOGIND_CONF_DIR") or LOGIND_CONF_DIR
        return NodeShutdownManager(
            periods, self.clock, self._shutdown_pods, self._kill_for_shutdown, self.recorder.node_event,
            self.recorder.pod_event, self._sync_node_status_now, lambda: Logind.connect(conf_dir),
            self._statuses_written)

    def _statuses_written(self, pods: Sequence[Pod]) -> bool:
        return self.status_sync is None or all(self.status_sync.written(podview.uid(p)) for p in pods)

    def _shutdown_pods(self) -> list[Pod]:
        """Pods not yet terminated (upstream GetActivePods, as the shutdown manager sees them)."""
        return [w.pod for uid in self.workers.uids()
                if (w := self.workers.get(uid)) is not None and w.lifecycle is not PodLifecycle.TERMINATED]

    def _kill_for_shutdown(self, pod: Pod, grace: int, status_fn: PodStatusFn) -> asyncio.Event:
        done = asyncio.Event()
        self.workers.update_pod(pod, kill=KillPodOptions(grace_override=grace, status_fn=status_fn, completed=done))
        return done

    def _sync_node_status_now(self) -> None:
        if self.join is None or self.join.status is None:
            return
        task = asyncio.get_running_loop().create_task(self.join.status.sync(), name="node-status-shutdown")
        self._refetches.add(task)
        task.add_done_callback(self._refetches.discard)

    def _admission_node(self) -> Node:
        """Joined: the Node as the API server has it (labels and taints changed later included, the
        allocatable it reports); standalone, or before the first list: the node built locally."""
        known = self.node_lister.get() if self.node_lister is not None else None
        return known if known is not None else self.node

    def _refetch_node(self, uid: str) -> None:
        task = asyncio.get_running_loop().create_task(self._refetch_node_then_readmit(uid), name="node-refetch")
        self._refetches.add(task)
        task.add_done_callback(self._refetches.discard)

    async def _refetch_node_then_readmit(self, uid: str) -> None:
        assert self.node_lister is not None
        try:
            await self.node_lister.refresh()
        except Exception as e:  # upstream: the failure stands as it was
            log.warning("reading the node for admission failed", extra={"kv": {"err": str(e) or type(e).__name__}})
        self.manager.readmit(uid)

    async def _run_api_pods(self) -> None:
        # As upstream's apiserver source: the pods are watched once the node's own object has synced, so
        # the first pods are admitted against the Node's real labels and taints.
        assert self.api_source is not None and self.node_lister is not None
        await self.node_lister.synced.wait()
        await self.api_source.run()

    def _object_changed(self, uid: str) -> None:
        # a pod waiting for the object starts now, not at the end of its sync back-off
        self.workers.wake(uid, urgent=True)

    def _probe_changed(self, uid: str) -> None:
        self.workers.wake(uid)

    def _preempt(self, pod: Pod) -> None:
        """Evict a pod so that a critical pod fits (upstream CriticalPodAdmissionHandler's killPodFunc)."""
        self.recorder.pod_event(pod, "Warning", PREEMPT_REASON, PREEMPT_MESSAGE)
        self.workers.update_pod(pod, kill=KillPodOptions(status_fn=preempted_status_fn(rfc3339(self.clock.now()))))

    def _worker_finished(self, uid: str, pod: Pod) -> None:
        self.manager.worker_finished(uid, pod)
        if self.mirrors is not None:
            self.mirrors.wake()  # a static pod's mirror goes once the static pod has stopped
        if self._trim is None:
            # once the last reference to the pod is gone: glibc keeps a removed pod's freed heap otherwise
            # (52 MiB after a 3 MB manifest); one trim for the pods that finish within the second
            self._trim = asyncio.get_running_loop().call_later(1.0, self._release_memory)

    def _release_memory(self) -> None:
        self._trim = None
        release_memory()

    def _set_source_pods(self, source: str, pods: list[Pod]) -> None:
        self.pod_config.set_source_pods(source, pods)
        if self.mirrors is not None:
            self.mirrors.wake()
        self._update_gauges()
        self._stop_orphans_once_sources_seen()

    def _stop_orphans_once_sources_seen(self) -> None:
        # As upstream's sourcesReady: until the manifest URL answered once, its pods are not orphans.
        if not self._orphans_pending or (self.url_source is not None and not self.url_source.seen) or (
                self.api_source is not None and not self.api_source.seen):
            return
        self._orphans_pending = False
        self.manager.adopt_orphans(self.pleg.runtime_uids)
        self._sweep_orphans()

    def _pod_terminated(self, uid: str) -> bool:
        """Nothing of the pod can run any more (its worker terminated it, or it has none)."""
        w = self.workers.get(uid)
        return w is None or w.lifecycle is PodLifecycle.TERMINATED

    def _start_api_pods(self) -> None:
        """Joined: pods bound to the node come from the API server and their statuses go back there."""
        # Imported only when joined, as the join itself (the API client is heavy for a standalone agent).
        from minikubelet.kubeapi.informer import Informer
        from minikubelet.kubeapi.object_cache import ObjectCache
        from minikubelet.kubeapi.token_manager import TokenManager
        from minikubelet.node.lister import NodeLister
        from minikubelet.pod.mirror import MirrorPods
        from minikubelet.sources.apiserver import ApiserverPodSource
        from minikubelet.status.api_sync import PodStatusSync
        from minikubelet.worker.pod_objects import CONFIGMAP, SECRET, PodObjectSource, waker

        assert self.join is not None and self.join.client is not None
        client = self.join.client
        self.node_lister = NodeLister(client, self.node_name, self.clock)
        if self.pod_network is not None:
            self.node_lister.on_object = self.pod_network.own_node
        if self.join.status is not None:
            self.join.status.cached = self.node_lister.current_object  # the status update's first read (as upstream)
        self.manager.refetch_node = self._refetch_node
        # the kubelet's service informer: every Service with a cluster IP, for the pods' service env
        self.services = Informer(client, "/api/v1/services", self.clock, field_selector="spec.clusterIP!=None")
        objects = PodObjectSource(
            ObjectCache(client, "configmaps", CONFIGMAP, self.clock,
                        on_change=waker(lambda: self.containers.objects, self._object_changed, CONFIGMAP)),
            ObjectCache(client, "secrets", SECRET, self.clock,
                        on_change=waker(lambda: self.containers.objects, self._object_changed, SECRET)),
            self.services, TokenManager(client, self.clock))
        self.containers.objects = objects
        self.mirrors = MirrorPods(client, self.clock, self.node_name, self._static_pods)
        self.api_source = ApiserverPodSource(client, self.node_name, self.clock, self._set_source_pods,
                                             max_pods=10 * max(self.config.max_pods, 1),
                                             mirrors=self.mirrors.set_mirror_pods)
        self.status_sync = PodStatusSync(client, self.clock, self.statuses, self._pod_terminated,
                                         source_pod=self._source_api_pod)

    def _source_api_pod(self, pod: Pod) -> Pod | None:
        """The API object of a pod as the API source last received it; a static pod's is its mirror pod."""
        from minikubelet.pod.mirror import is_mirror_of, is_static_pod

        if is_static_pod(pod):
            mirror = self.mirrors.mirrors.get(podview.full_name(pod)) if self.mirrors is not None else None
            return mirror if mirror is not None and is_mirror_of(mirror, pod) else None
        return self.api_source.pod(podview.uid(pod)) if self.api_source is not None else None

    def _start_pod_network(self) -> None:
        """Before the registration, so the first Ready condition already carries the network's state."""
        from minikubelet.network.pod_network import PodNetwork

        assert self.join is not None and self.join.client is not None
        if self.network_runtime is None:
            log.error("--pod-network=host-gw: the container runtime cannot set up a pod network; pods use its default")
            return
        self.pod_network = PodNetwork(self.join.client, self.node_name, self.clock, self.network_runtime,
                                      self.config.non_masquerade_cidr, on_ready=self._pod_network_ready)
        self.syncer.network_errors = self.pod_network.errors

    def _pod_network_ready(self) -> None:
        self.workers.wake_all()  # pods held back by NetworkNotReady start now
        if self.join is not None and self.join.status is not None:
            self.join.status.wake()  # Ready=True goes out now, not at the next update period

    def _start_event_sink(self) -> None:
        from minikubelet.events.api_sink import ApiEventSink
        from minikubelet.kubeapi.rest import RestClient

        assert self.join is not None and self.join.client is not None
        client = self.join.client
        # Events get a client of their own, as upstream's kubelet: limited by the sink's bucket (eventRecordQPS
        # 50 / eventBurst 100) only, so a burst of events never takes the node's kubeAPIQPS from its status.
        self.event_sink = ApiEventSink(RestClient(client.config, self.clock, qps=0, agent=client.agent), self.clock)
        self.recorder.add_sink(self.event_sink)
        # Running from now on, so the start-up events are written while the Node registers, as upstream's.
        self._event_task = asyncio.get_running_loop().create_task(self.event_sink.run(), name="event-sink")

    def _birth_cry(self) -> None:
        """The node's start-up events, in upstream's order (kubelet-flows/kubelet-startup-sequence.json)."""
        self.recorder.node_event("Normal", STARTING_KUBELET, "Starting kubelet.")
        if detect_cgroup_version() == 1:
            self.recorder.node_event("Warning", CGROUP_V1, CGROUP_V1_MESSAGE)
        if self.config.cgroups_per_qos and "pods" in self.config.enforce_node_allocatable and isinstance(
                self.cgroups, PodCgroups) and self.cgroups.manager is not None:
            self.recorder.node_event("Normal", NODE_ALLOCATABLE_ENFORCED, "Updated Node Allocatable limit across pods")

    def _static_pods(self) -> list[StaticPod]:
        """Static pods wanted or still stopping, for their mirror pods."""
        from minikubelet.pod.mirror import StaticPod, is_static_pod

        out: dict[str, StaticPod] = {}
        for uid, pod in [*self.manager.desired.items(), *((w, p) for w, p in zip(
                self.workers.uids(), self.workers.pods(), strict=True))]:
            if uid in out or not is_static_pod(pod):
                continue
            w = self.workers.get(uid)
            out[uid] = StaticPod(pod, terminating=w is not None and w.terminating)
        return list(out.values())

    def _known_uids(self) -> set[str]:
        """Every pod that has, or may still get, a cgroup or a pod directory."""
        return set(self.pleg.runtime_uids) | set(self.manager.desired) | set(self.workers.uids())

    def _sweep_orphans(self) -> None:
        """Pod cgroups (every hierarchy) and pod directories of pods nothing knows any more (upstream
        cleanupOrphanedPodCgroups / cleanupOrphanedPodDirs): what a crash or a busy cgroup left behind."""
        known = self._known_uids()
        if isinstance(self.cgroups, PodCgroups):
            self.cgroups.cleanup_orphans(known)
        cleanup_orphaned_pod_dirs(self.config.root_dir, known)

    async def _orphan_sweep(self) -> None:
        while True:
            await self.clock.sleep(ORPHAN_SWEEP_PERIOD)
            if not self._orphans_pending:
                self._sweep_orphans()

    def _update_gauges(self) -> None:
        running = 0
        containers = 0
        for entry in self.statuses.statuses():
            status = entry.status
            if status.get("phase") == "Running":
                running += 1
            containers += sum(1 for s in status.get("containerStatuses", []) if "running" in s.get("state", {}))
            containers += sum(1 for s in status.get("initContainerStatuses", []) if "running" in s.get("state", {}))
        self.metrics.running_pods.set(running)
        self.metrics.running_containers.labels("running").set(containers)

    async def _node_status_inputs(self) -> NodeStatusInputs:
        """What the node status setters need, read now (upstream: cAdvisor, the runtime, the PLEG)."""
        cfg = self.config
        runtime_type, runtime_version = "docker", ""
        condition_errs: tuple[str, ...] = ()
        try:
            version = await asyncio.wait_for(self.runtime.version(), timeout=5.0)
            runtime_type, runtime_version = version.runtime_name, version.runtime_version
            runtime_ready = True
            if self.conditions is not None:
                runtime_ready, condition_errs = condition_errors(
                    await asyncio.wait_for(self.conditions.status(), timeout=5.0))
            if runtime_ready:
                self._runtime_ok = self.clock.monotonic()
        except Exception as e:
            log.warning("container runtime version failed", extra={"kv": {"err": str(e) or type(e).__name__}})
        try:
            images = await asyncio.wait_for(self.runtime.list_images(), timeout=10.0)
        except Exception:
            images = []
        capacity = {**node_capacity(cfg.root_dir, cfg.max_pods), **hugepages_capacity()}
        reservation: dict[str, Fraction] = {}
        for part in (parse_resource_list(cfg.kube_reserved), parse_resource_list(cfg.system_reserved),
                     hard_eviction_reservation(cfg.eviction_hard, capacity)):
            for k, v in part.items():
                reservation[k] = reservation.get(k, Fraction(0)) + v
        return NodeStatusInputs(
            hostname=self.node_name, node_ip=self.host_ip, machine=machine_info(), capacity=capacity,
            reservation=reservation, runtime_type=runtime_type, runtime_version=runtime_version,
            kubelet_version=KUBERNETES_VERSION, images=images,
            kubelet_port=self.config.port if self.config.port > 0 else KUBELET_PORT,
            declared_features=declared_features(self.config.feature_gates),
            runtime_errors=(*self.runtime_errors(), *condition_errs,
                            *(self.shutdown.errors() if self.shutdown is not None else ())),
            network_errors=self.pod_network.errors() if self.pod_network is not None else (),
            memory_pressure=self.eviction.memory_pressure, disk_pressure=self.eviction.disk_pressure,
            pid_pressure=self.eviction.pid_pressure,
        )

    def runtime_errors(self) -> tuple[str, ...]:
        return runtime_errors(self.clock.monotonic(), self._runtime_ok, self.pleg.last_relist or None)

    async def _runtime_up(self) -> None:
        """Upstream updateRuntimeUp + the gate of its syncLoop: the runtime asked every 5 s; the sync loop counts
        as run only while the runtime state has no errors (so /healthz fails after 5 minutes of a dead runtime)."""
        down = False
        while True:
            try:
                await asyncio.wait_for(self.runtime.version(), timeout=RUNTIME_UP_PERIOD)
                self._runtime_ok = self.clock.monotonic()
                if down:
                    log.info("container runtime answers again")
                    # as upstream's syncLoop resuming: the pods whose syncs failed meanwhile sync now, not at the
                    # end of their back-off
                    self.workers.wake_all(urgent=True)
                down = False
            except Exception as e:
                if not down:
                    log.warning("container runtime sanity check failed", extra={"kv": {"err": str(e) or type(e).__name__}})
                down = True
            errors = self.runtime_errors()
            if not errors:
                self._sync_loop_entry = self.clock.monotonic()
            elif down:
                log.debug("skipping pod synchronization", extra={"kv": {"err": "; ".join(errors)}})
            await self.clock.sleep(RUNTIME_UP_PERIOD)

    async def health(self) -> list[tuple[str, str | None]]:
        """Upstream's /healthz checkers (ping, syncloop); the runtime is not asked here: a runtime that is down
        shows on the Node's Ready condition, and on /healthz only once the sync loop stalled for 5 minutes."""
        return [("ping", None), ("syncloop", self._sync_loop_error())]

    def _sync_loop_error(self) -> str | None:
        entry = self._sync_loop_entry
        if entry is None:
            return "sync loop has not run yet"
        if self.clock.monotonic() - entry > SYNC_LOOP_HEALTH_WINDOW:
            return "sync Loop took longer than expected"
        return None

    async def _watchdog_checks(self) -> list[tuple[str, str | None]]:
        # upstream's watchdog runs the sync loop check, not the runtime's (a restart does not bring Docker back)
        return [("syncloop", self._sync_loop_error())]

    async def _housekeeping(self) -> None:
        while True:
            await self.clock.sleep(CHECKPOINT_PERIOD)
            try:
                self.checkpoint.save()
            except OSError as e:
                log.warning("backoff checkpoint failed", extra={"kv": {"err": str(e)}})
            self.container_backoff.gc()
            self.image_backoff.gc()
            self._update_gauges()
            self.metrics.sync_loop_last.set(self.clock.now())

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        cfg = self.config
        os.makedirs(cfg.root_dir, exist_ok=True)
        self.checkpoint.restore()
        version = await self.runtime.version()
        self.syncer.container_id_scheme = version.container_id_scheme
        if self.containers.cgroups is None:
            self.cgroups = build_pod_cgroups(cfg, (await self.runtime.runtime_config()).cgroup_driver,
                                             lambda: list(self.manager.desired.values()))
            self.containers.cgroups = self.cgroups
        runtime_config = await self.runtime.runtime_config()
        self.stats = StatsProvider(self.runtime, self.clock, self.node_name, cfg.root_dir,
                                   self.cgroups.manager if isinstance(self.cgroups, PodCgroups) else None,
                                   sandbox_image=cfg.pod_infra_container_image,
                                   image_fs_path=runtime_config.image_fs_path,
                                   container_fs_path=runtime_config.container_fs_path, cri_stats=self._cri_stats)
        self.eviction.use_disk_layout(
            detect_disk_layout(cfg.root_dir, runtime_config.image_fs_path, runtime_config.container_fs_path),
            self.container_gc.collect, self.image_gc.delete_unused_images)
        self._start_memcg_notifiers()
        self.server.stats = StatsHandlers(self.stats)
        log.info("starting minikubelet", extra={"kv": {
            "version": __version__, "node": self.node_name, "nodeIP": self.host_ip, "runtime": f"{version.runtime_name} {version.runtime_version}",
            "staticPodPath": cfg.static_pod_path}})
        for warning in not_implemented_warnings(cfg):
            log.warning(warning)
        if cfg.read_only_port:
            await self.server.serve(cfg.address, cfg.read_only_port, self.server.routes())
        if cfg.healthz_port and cfg.healthz_port != cfg.read_only_port:
            await self.server.serve(cfg.healthz_bind_address, cfg.healthz_port, self.server.health_routes())
        # First learn what already runs, then what is wanted, then stop what is no longer wanted.
        await self.pleg.relist()
        if self.join is not None:
            # TLS bootstrap and registration before the pods (bounded: see node/join.py); the start-up events
            # go out before the registration, as upstream's.
            await self.join.connect()
            self._start_event_sink()
            if cfg.pod_network == "host-gw":
                self._start_pod_network()
            self._birth_cry()
            await self.join.register()
            self._start_api_pods()
        else:
            if cfg.pod_network:
                log.warning("--pod-network needs the API server (--kubeconfig); pods use the runtime's default network")
            self._birth_cry()
        if cfg.port > 0 or (cfg.port < 0 and self.join is not None):
            from minikubelet.server.kubelet_api_wiring import start_kubelet_api  # only a node that serves it

            await start_kubelet_api(cfg, self.server, joined=self.join is not None,
                                    client=self.join.client if self.join is not None else None,
                                    node_name=self.node_name, host_ip=self.host_ip,
                                    pods=lambda: self.manager.desired.values(), runtime=self.runtime,
                                    streaming=self.streaming, clock=self.clock)
        await self.static.sync()
        if self.url_source is not None:
            await self.url_source.sync()
        self._stop_orphans_once_sources_seen()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        # systemd (Type=notify): started once the first sync is done; the watchdog is fed from this loop
        notifier = Notifier()
        watchdog = Watchdog(notifier, watchdog_interval(), self.clock, self._watchdog_checks)
        notifier.notify("READY=1", f"STATUS=running, node {self.node_name}")
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(watchdog.run(), name="systemd-watchdog"),
                    tg.create_task(self.pleg.run_relist(), name="pleg-relist"),
                    tg.create_task(self.pleg.run_events(), name="pleg-events"),
                    tg.create_task(self._runtime_up(), name="runtime-up"),
                    tg.create_task(self.static.run(), name="static-pods"),
                    *([tg.create_task(self.url_source.run(), name="url-pods")] if self.url_source else []),
                    tg.create_task(self._housekeeping(), name="housekeeping"),
                    tg.create_task(self.container_gc.run(), name="container-gc"),
                    *([tg.create_task(self.log_rotation.run(), name="container-log-manager")]
                      if self.log_rotation else []),
                    tg.create_task(self._orphan_sweep(), name="orphan-sweep"),
                    tg.create_task(self.stats.run(), name="stats-housekeeping"),
                    tg.create_task(self.eviction.run(), name="eviction-manager"),
                    tg.create_task(self.image_gc.run(), name="image-gc"),
                    *[tg.create_task(run(), name=name) for name, run in (self.join.tasks() if self.join else [])],
                    *([tg.create_task(self.node_lister.run(), name="node-lister")] if self.node_lister else []),
                    *([tg.create_task(self.pod_network.run(), name="pod-network")] if self.pod_network else []),
                    *([tg.create_task(self._run_api_pods(), name="api-pods")] if self.api_source else []),
                    *([tg.create_task(self.services.run(), name="services")] if self.services else []),
                    *([tg.create_task(self.status_sync.run(), name="pod-status-sync")] if self.status_sync else []),
                    *([tg.create_task(self.mirrors.run(), name="mirror-pods")] if self.mirrors else []),
                    *([tg.create_task(self.shutdown.run(), name="node-shutdown")] if self.shutdown else []),
                ]
                await self._stop.wait()
                log.info("stopping minikubelet (pods keep running)")
                notifier.notify("STOPPING=1")
                for t in tasks:
                    t.cancel()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            for task in list(self._refetches):
                task.cancel()
            await asyncio.gather(*self._refetches, return_exceptions=True)
            self.eviction.close()
            await self.workers.shutdown()
            try:
                self.checkpoint.save()
            except OSError:
                pass
            await self.server.close()
            if self.join is not None:
                await self.join.close()
            if self._event_task is not None:
                self._event_task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._event_task
            if self.event_sink is not None:
                await self.event_sink.client.close()
            if self.containers.objects is not None:
                self.containers.objects.close()
