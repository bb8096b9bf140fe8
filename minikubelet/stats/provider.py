"""The stats provider: samples the node, pod and container cgroups, network namespaces and filesystems once per
housekeeping interval (upstream: cAdvisor's housekeeping and the CRI stats provider's cache), so that a scrape
only renders the last snapshot.

CPU rates (usageNanoCores) come from the last two samples of the same cgroup, timed with the injectable clock.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from cgroups.manager import CgroupManager
from cgroups.naming import kubepods_name, qos_cgroup_name
from cgroups.qos import BEST_EFFORT, BURSTABLE
from cgroups.systemd_driver import SystemdCgroupDriver
from cgroups.v1 import CgroupV1Driver
from cgroups.v2 import CgroupV2Driver
from cri.errors import RuntimeError_
from cri.runtime import Runtime
from cri.types import ContainerState, ContainerStats, ContainerStatus, ObjectSummary, PodSandboxStatus, SandboxState
from minikubelet.base.clock import Clock
from minikubelet.metrics import Metrics
from minikubelet.node import procfs
from minikubelet.stats.cgroup_reader import (
    CgroupSample,
    parse_meminfo,
    read_v1,
    read_v2,
    usage_nano_cores,
    v1_extras,
    v2_extras,
)
from minikubelet.stats.diskstats import DiskStats, block_devices, device_name, parse_diskstats
from minikubelet.stats.fs import DirUsage, DirWalk, FsCapacity, capacity
from minikubelet.stats.interfaces import InterfaceSample
from minikubelet.stats.machine import MachineInfo, read_machine_info
from minikubelet.stats.network import InterfaceReader
from minikubelet.stats.processes import ProcessStats, process_stats
from minikubelet.stats.snapshot import (
    ContainerEntry,
    Fs,
    Measured,
    Network,
    NodeEntry,
    PodEntry,
    Rlimit,
    Snapshot,
    Volume,
)

log = logging.getLogger("minikubelet.stats")

HOUSEKEEPING_INTERVAL = 10.0  # cAdvisor's default --housekeeping_interval, which the kubelet keeps
WALK_SLICE = 256  # directory entries per slice of a du walk between yields to the event loop
V1_CONTROLLERS = ("cpuacct", "cpu", "memory", "pids", "blkio")


class CgroupFiles:
    """Reads samples by literal cgroup path from the v1 hierarchies or the v2 tree."""

    def __init__(self, v1: Mapping[str, Path] | None = None, v2: Path | None = None,
                 proc: Path = Path("/proc")) -> None:
        if (v1 is None) == (v2 is None):
            raise ValueError("exactly one of v1 hierarchies or the v2 root")
        self.v1 = v1
        self.v2 = v2
        self.proc = proc
        self._v1_roots = {c: str(mount) for c, mount in v1.items()} if v1 is not None else {}

    @classmethod
    def of(cls, manager: CgroupManager, proc: Path = Path("/proc")) -> CgroupFiles:
        driver = manager.driver
        if isinstance(driver, SystemdCgroupDriver):
            # systemd makes the slices; the files under them are read as with cgroupfs
            driver = driver.files
        if isinstance(driver, CgroupV1Driver):
            return cls(v1={c: driver.hierarchies[c] for c in V1_CONTROLLERS if c in driver.hierarchies}, proc=proc)
        if isinstance(driver, CgroupV2Driver):
            return cls(v2=driver.root, proc=proc)
        raise ValueError(f"no stats for cgroup driver {type(driver).__name__}")

    def _parts(self, literal: str) -> list[str]:
        parts = [p for p in literal.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ValueError(f"invalid cgroup path {literal!r}")
        return parts

    def sample(self, literal: str, *, extras: bool = True, pids: bool = True) -> CgroupSample | None:
        """`extras=False`: only the files a pass's readers use; `extras()` adds the ones /metrics/cadvisor shows.
        `pids=False` leaves pids.current to `extras(pids=True)`."""
        parts = self._parts(literal)
        if self.v1 is not None:
            return read_v1(self._v1_dirs(parts), extras=extras, pids=pids)
        assert self.v2 is not None
        if not parts:
            return read_v2(self.v2, root=True, meminfo=self.meminfo(), extras=extras, pids=pids)
        return read_v2(self.v2.joinpath(*parts), extras=extras, pids=pids)

    def extras(self, literal: str, sample: CgroupSample, pids: bool = False) -> CgroupSample:
        parts = self._parts(literal)
        if self.v1 is not None:
            return v1_extras(self._v1_dirs(parts), sample, pids=pids)
        assert self.v2 is not None
        return v2_extras(self.v2.joinpath(*parts), sample, pids=pids)

    def _v1_dirs(self, parts: list[str]) -> dict[str, str]:
        tail = "".join(f"/{p}" for p in parts)
        return {c: f"{root}{tail}" for c, root in self._v1_roots.items()}

    def procs(self, literal: str, first_pid: int = 0) -> ProcessStats | None:
        """The cgroup's own processes (v1: in the cpu hierarchy, as cAdvisor reads them)."""
        if self.v1 is not None:
            base = self._v1_roots.get("cpu") or self._v1_roots["cpuacct"]
            directory = base + "".join(f"/{p}" for p in self._parts(literal))
        else:
            assert self.v2 is not None
            directory = str(self.v2.joinpath(*self._parts(literal)))
        return process_stats(f"{directory}/cgroup.procs", str(self.proc), first_pid)

    def created(self, literal: str) -> float:
        base = self.v1["cpuacct"] if self.v1 is not None else self.v2
        assert base is not None
        try:
            return base.joinpath(*self._parts(literal)).stat().st_ctime
        except OSError:
            return 0.0

    def meminfo(self) -> dict[str, int]:
        try:
            return parse_meminfo((self.proc / "meminfo").read_text())
        except OSError:
            return {}


def _read_first_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def device_of(path: str, mounts: list[tuple[str, str]]) -> str:
    """The device of the deepest mount (device, mount point) holding `path`."""
    best, depth = "", -1
    for device, point in mounts:
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > depth:
            best, depth = device, len(point)
    return best


def _netns_pid(netns: str) -> int:
    """The pause process of a sandbox from its /proc/<pid>/ns/net path; 0 when the path names no pid."""
    parts = netns.split("/")
    return int(parts[2]) if len(parts) > 3 and parts[1] == "proc" and parts[2].isdigit() else 0


def _running_tasks(proc: Path) -> int | None:
    """The kernel's task count (sysinfo's procs, what upstream reports as curproc): /proc/loadavg's 4th field."""
    try:
        return int((proc / "loadavg").read_text().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return None


# The runtime's default request timeout (2 m): a hung runtime must not stall the housekeeping pass for good.
LIST_STATS_TIMEOUT = 120.0


class StatsProvider:
    def __init__(self, runtime: Runtime, clock: Clock, node_name: str, root_dir: str,
                 cgroups: CgroupManager | None, files: CgroupFiles | None = None, *,
                 sandbox_image: str = "", interval: float = HOUSEKEEPING_INTERVAL,
                 interfaces: Callable[[str | None], list[InterfaceSample]] | None = None,
                 proc: Path = Path("/proc"), image_fs_path: str = "", container_fs_path: str = "",
                 cri_stats: Callable[[], Awaitable[list[ContainerStats]]] | None = None,
                 metrics: Metrics | None = None, volume_period: float = 60.0) -> None:
        """`metrics`: where the volume walks' durations go. `cri_stats`: a CRI runtime's ListContainerStats, the source of each container's `rootfs` (its writable
        layer). CPU and memory come from the cgroups either way, as upstream's CRI stats provider overrides the
        runtime's figures with cAdvisor's (docs/decisions.md)."""
        self.runtime = runtime
        self._metrics = metrics
        self._cri_stats = cri_stats
        self.image_fs_path = image_fs_path
        self.container_fs_path = container_fs_path
        self.clock = clock
        self.node_name = node_name
        self.root_dir = root_dir
        self.manager = cgroups
        self.files = files if files is not None else (CgroupFiles.of(cgroups, proc) if cgroups is not None else None)
        self.sandbox_image = sandbox_image
        self.interval = interval
        self._interfaces = interfaces if interfaces is not None else InterfaceReader()
        self.proc = proc
        self._previous: dict[str, tuple[float, int]] = {}  # cgroup -> (monotonic time, cpu usage ns)
        self._status_cache: dict[str, tuple[str, PodSandboxStatus | ContainerStatus]] = {}  # id -> (state word, status)
        self._boot_time = procfs.boot_time()
        try:
            mounts = procfs.mounts()
        except OSError:
            mounts = []
        self._fs_device = device_of(os.path.realpath(root_dir), mounts)
        self._own_netns = self._netns_inode(str(proc / "self/ns/net"))
        self.machine: MachineInfo = read_machine_info(proc)
        self._block_devices: dict[tuple[int, int], str] = {}
        self.snapshot: Snapshot | None = None
        self.passes = 0
        self._lock = asyncio.Lock()
        self._layers: dict[str, Fs] = {}
        # upstream's volume stats calculators (volumeStatsAggPeriod): each pod's volumes are walked once per period
        # (jittered by up to one more), and the passes between report that walk; <= 0: never walked
        self.volume_period = volume_period
        self._volume_cache: dict[str, tuple[float, tuple[Volume, ...]]] = {}  # pod uid -> (next walk, volumes)
        self._log_real: dict[str, str] = {}  # a running container's log path -> where it leads
        self._netns_inodes: dict[str, int | None] = {}  # a ready sandbox's netns path -> its inode
        self._pass_capacities: dict[int, FsCapacity | None] = {}  # st_dev -> statvfs, within one pass

    async def run(self) -> None:
        """Housekeeping: a snapshot now, then one per interval, forever."""
        while True:
            try:
                await self.update()
            except Exception:
                log.exception("stats housekeeping failed")
            await self.clock.sleep(self.interval)

    async def _statuses(self) -> tuple[list[PodSandboxStatus], list[ContainerStatus]]:
        """Sandboxes and containers from one cheap listing; each is inspected only when new or its state word
        changed (a status is otherwise fixed while the state holds), so a pass costs one list, not N inspects."""
        summaries = await self.runtime.list_summaries()
        wanted = {s.id: s for s in summaries}
        for gone in set(self._status_cache) - set(wanted):
            del self._status_cache[gone]
        stale = [s for s in summaries
                 if s.id not in self._status_cache or self._status_cache[s.id][0] != s.state]

        async def fetch(summary: ObjectSummary) -> None:
            try:
                status: PodSandboxStatus | ContainerStatus = (
                    await self.runtime.pod_sandbox_status(summary.id) if summary.is_sandbox
                    else await self.runtime.container_status(summary.id))
            except RuntimeError_:
                self._status_cache.pop(summary.id, None)  # removed since the listing
                return
            self._status_cache[summary.id] = (summary.state, status)

        await asyncio.gather(*(fetch(s) for s in stale))
        sandboxes = [st for _, st in self._status_cache.values() if isinstance(st, PodSandboxStatus)]
        containers = [st for _, st in self._status_cache.values() if isinstance(st, ContainerStatus)]
        return sandboxes, containers

    async def update(self) -> Snapshot:
        async with self._lock:
            sandboxes, containers = await self._statuses()
            images = await self.runtime.list_images()
            image_bytes = sum(i.size for i in images)
            self._layers = await self._writable_layers()
            snap = await self._collect(sandboxes, containers, image_bytes)
            self.snapshot = snap
            self.passes += 1
            return snap

    # The sampling runs on the event loop in small slices with a yield between them, not in a worker thread: it
    # is CPU-bound Python, and a thread holding the GIL made the loop wait for it on every syscall (/healthz
    # stalled 100+ ms per pass even with a 1 ms switch interval). A slice is one cgroup, one interface table or
    # WALK_SLICE directory entries: well under a millisecond each.
    async def _walk(self, path: str, *, follow_file_links: bool = False) -> DirUsage | None:
        walk = DirWalk(path, follow_file_links=follow_file_links)
        for _ in range(walk.max_entries // WALK_SLICE + 1):
            if walk.step(WALK_SLICE):
                break
            await asyncio.sleep(0)
        return walk.usage

    def _measure(self, literal: str, now: float, mono: float, seen: set[str], errors: list[str],
                 first_pid: int = 0, *, pids: bool = True) -> Measured | None:
        """`pids=False` (a container: only /metrics/cadvisor shows its task count) reads pids.current with the
        extras, when a render first asks."""
        if self.files is None:
            return None
        try:
            sample = self.files.sample(literal, extras=False, pids=pids)
        except (OSError, ValueError) as e:
            errors.append(f"{literal}: {e}")
            return None
        if sample is None:
            return None
        seen.add(literal)
        rate = None
        prev = self._previous.get(literal)
        if prev is not None:
            rate = usage_nano_cores(prev[1], prev[0], sample.cpu_usage_ns, mono)
        self._previous[literal] = (mono, sample.cpu_usage_ns)
        return Measured(id=literal, time=now, sample=sample, nano_cores=rate,
                        read_procs=functools.partial(self.files.procs, literal, first_pid),
                        read_extras=functools.partial(self._extras, literal, pids=not pids))

    def _measure_later(self, literal: str, first_pid: int) -> Measured | None:
        """A cgroup only /metrics/cadvisor shows, sampled when a render first asks for it: no CPU rate (nothing
        reads one for it) and no error counted in the pass (gone since: no series, as when a pass misses it)."""
        if self.files is None:
            return None
        try:
            sample = self.files.sample(literal, extras=False)
        except (OSError, ValueError):
            return None
        if sample is None:
            return None
        return Measured(id=literal, time=self.clock.now(), sample=sample,
                        read_procs=functools.partial(self.files.procs, literal, first_pid),
                        read_extras=functools.partial(self._extras, literal))

    def _extras(self, literal: str, sample: CgroupSample, pids: bool = False) -> CgroupSample:
        assert self.files is not None
        full = self.files.extras(literal, sample, pids)
        if any((io.major, io.minor) not in self._block_devices for io in full.io):
            # in place: the snapshots' NodeEntry holds this table, and a render looks its devices up there
            self._block_devices.update(block_devices())
        return full

    async def _writable_layers(self) -> dict[str, Fs]:
        if self._cri_stats is None:
            return {}
        try:
            stats = await asyncio.wait_for(self._cri_stats(), LIST_STATS_TIMEOUT)
        except (RuntimeError_, TimeoutError) as e:
            log.debug("ListContainerStats failed", extra={"kv": {"err": str(e)}})
            return {}
        capacities: dict[str, FsCapacity | None] = {}
        layers: dict[str, Fs] = {}
        for s in stats:
            if s.writable_layer_used_bytes is None and s.writable_layer_inodes_used is None:
                continue
            where = s.writable_layer_mountpoint or self.container_fs_path or self.image_fs_path or self.root_dir
            if where not in capacities:
                capacities[where] = capacity(where)
            layers[s.container_id] = Fs(s.writable_layer_timestamp or self.clock.now(), capacities.get(where),
                                        s.writable_layer_used_bytes, s.writable_layer_inodes_used)
        return layers

    def _netns_inode(self, path: str) -> int | None:
        try:
            return os.stat(path).st_ino
        except OSError:
            return None

    def _sandbox_netns(self, path: str) -> int | None:
        """The namespace behind a ready sandbox's /proc/<pause pid>/ns/net, looked up once while the sandbox is
        listed ready (the path names its pause process, whose namespace does not change)."""
        if path not in self._netns_inodes:
            self._netns_inodes[path] = self._netns_inode(path)
        return self._netns_inodes[path]

    def _network(self, netns: str | None, now: float, errors: list[str]) -> Network | None:
        try:
            return Network(now, tuple(self._interfaces(netns)))
        except Exception as e:
            errors.append(f"network {netns or 'host'}: {e}")
            return None

    def _container_leaf(self, container_id: str) -> str:
        return f"docker-{container_id}.scope" if self.manager is not None and self.manager.naming == "systemd" \
            else container_id

    async def _collect(self, sandboxes: list[PodSandboxStatus], containers: list[ContainerStatus],
                       image_bytes: int) -> Snapshot:
        now, mono = self.clock.now(), self.clock.monotonic()
        seen: set[str] = set()
        errors: list[str] = []
        self._pass_capacities = {}
        pod_cgroups = self.manager.pod_cgroups() if self.manager is not None else {}
        running: dict[str, list[ContainerStatus]] = {}
        for c in containers:
            if c.state is ContainerState.RUNNING:
                running.setdefault(c.sandbox_id, []).append(c)
        pods: list[PodEntry] = []
        for sb in sorted(sandboxes, key=lambda s: (s.metadata.namespace, s.metadata.name, -s.created_at)):
            if sb.state is not SandboxState.READY:
                continue
            pods.append(await self._pod(sb, running.get(sb.id, []), pod_cgroups.get(sb.metadata.uid), now, mono,
                                        seen, errors))
            await asyncio.sleep(0)
        layers = sum(c.rootfs.used or 0 for p in pods for c in p.containers if c.rootfs is not None)
        node = self._node(image_bytes, now, mono, seen, errors, layers)
        for gone in set(self._previous) - seen:
            del self._previous[gone]
        for gone in set(self._volume_cache) - {p.uid for p in pods}:
            del self._volume_cache[gone]
        for gone in set(self._log_real) - {c.log_path for c in containers if c.state is ContainerState.RUNNING}:
            del self._log_real[gone]
        for gone in set(self._netns_inodes) - {sb.network_namespace for sb in sandboxes
                                               if sb.state is SandboxState.READY}:
            del self._netns_inodes[gone]
        if errors:
            log.debug("stats pass had errors", extra={"kv": {"errors": errors[:5], "count": len(errors)}})
        return Snapshot(time=now, node=node, pods=tuple(pods), errors=len(errors))

    async def _pod(self, sb: PodSandboxStatus, running: list[ContainerStatus], pod_literal: str | None, now: float, mono: float, seen: set[str], errors: list[str]) -> PodEntry:
        base = pod_literal.rstrip("/") if pod_literal else None
        entries: list[ContainerEntry] = []
        for c in sorted(running, key=lambda c: c.metadata.name):
            logs = None
            if c.log_path:
                usage = await self._walk(os.path.dirname(c.log_path), follow_file_links=True)
                if usage is not None:
                    logs = Fs(now, self._log_capacity(c.log_path), usage.bytes, usage.inodes)
            entries.append(ContainerEntry(
                name=c.metadata.name, id=c.id, image=c.image, start_time=c.created_at,
                cgroup=self._measure(f"{base}/{self._container_leaf(c.id)}", now, mono, seen, errors, c.pid,
                                     pids=False) if base else None,
                logs=logs, rootfs=self._layers.get(c.id),
            ))
        network = None
        if sb.network_namespace and self._sandbox_netns(sb.network_namespace) != self._own_netns:
            network = self._network(sb.network_namespace, now, errors)
        return PodEntry(
            name=sb.metadata.name, namespace=sb.metadata.namespace, uid=sb.metadata.uid, start_time=sb.created_at,
            sandbox_id=sb.id, sandbox_image=self.sandbox_image,
            cgroup=self._measure(base, now, mono, seen, errors) if base else None,
            read_sandbox_cgroup=functools.partial(self._measure_later, f"{base}/{self._container_leaf(sb.id)}",
                                                  _netns_pid(sb.network_namespace)) if base else None,
            containers=tuple(entries), network=network, volumes=await self._volumes(sb.metadata.uid, now),
        )

    def _log_capacity(self, log_path: str) -> FsCapacity | None:
        """The capacity of the filesystem a container's log is on (with cri-dockerd the log path is a link to the
        Engine's json-file log). Where a log path leads is fixed for the container's life, so it is resolved once
        (os.path.realpath was the largest part of a log's share of a pass); statvfs runs once per filesystem per
        pass, as upstream takes the log stats' capacity from one filesystem info per summary."""
        real = self._log_real.get(log_path)
        if real is None:
            real = self._log_real[log_path] = os.path.realpath(log_path)
        try:
            device = os.stat(real).st_dev
        except OSError:
            return None
        if device not in self._pass_capacities:
            self._pass_capacities[device] = capacity(real)
        return self._pass_capacities[device]

    async def _volumes(self, uid: str, now: float) -> tuple[Volume, ...]:
        """The pod's volumes as last walked, walked again once the period has passed."""
        if self.volume_period <= 0:
            return ()
        mono = self.clock.monotonic()
        cached = self._volume_cache.get(uid)
        if cached is not None and mono < cached[0]:
            return cached[1]
        volumes = await self._walk_volumes(uid, now)
        self._volume_cache[uid] = (mono + self.volume_period * (1 + random.random()), volumes)
        return volumes

    async def _walk_volumes(self, uid: str, now: float) -> tuple[Volume, ...]:
        """Every volume directory the agent set up for the pod (<rootDir>/pods/<uid>/volumes/<plugin>/<name>)."""
        if not uid or "/" in uid or uid in (".", ".."):
            return ()
        base = Path(self.root_dir, "pods", uid, "volumes")
        result: list[Volume] = []
        try:
            plugins = sorted(p for p in base.iterdir() if p.is_dir())
        except OSError:
            return ()
        for plugin in plugins:
            try:
                dirs = sorted(d for d in plugin.iterdir() if d.is_dir())
            except OSError:
                continue
            for d in dirs:
                t0 = time.monotonic()
                usage = await self._walk(str(d))
                if self._metrics is not None:  # upstream times each volume's du walk
                    self._metrics.http.volume_stat_duration.labels("du").observe(time.monotonic() - t0)
                if usage is not None:
                    result.append(Volume(d.name, Fs(now, capacity(str(d)), usage.bytes, usage.inodes)))
        return tuple(sorted(result, key=lambda v: v.name))

    def _node(self, image_bytes: int, now: float, mono: float, seen: set[str],
              errors: list[str], layers: int = 0) -> NodeEntry:
        try:
            meminfo = parse_meminfo((self.proc / "meminfo").read_text())
        except OSError:
            meminfo = {}
        pods_cgroup = None
        pods_start = 0.0
        others: list[Measured] = []
        if self.manager is not None and self.files is not None:
            kubepods = self.manager.literal(kubepods_name(self.manager.root))
            pods_cgroup = self._measure(kubepods, now, mono, seen, errors)
            pods_start = self.files.created(kubepods)
            for qos in (BURSTABLE, BEST_EFFORT):
                m = self._measure(self.manager.literal(qos_cgroup_name(qos, self.manager.root)), now, mono, seen,
                                  errors)
                if m is not None:
                    others.append(m)
        fs = capacity(self.root_dir)
        return NodeEntry(
            name=self.node_name, boot_time=self._boot_time, memory_capacity=meminfo.get("MemTotal", 0),
            cpu_cores=os.cpu_count() or 1,
            root=self._measure("/", now, mono, seen, errors, 1),
            pods_cgroup=pods_cgroup, pods_start_time=pods_start, other_cgroups=tuple(others),
            network=self._network(None, now, errors),
            fs=Fs(now, fs, fs.used if fs else None, (fs.inodes - fs.inodes_free) if fs else None),
            fs_device=self._fs_device,
            image_fs=Fs(now, (capacity(self.image_fs_path) if self.image_fs_path else None) or fs, image_bytes),
            container_fs=Fs(now, capacity(self.container_fs_path), layers) if self.container_fs_path else None,
            rlimit=Rlimit(now, _read_first_int(self.proc / "sys/kernel/pid_max"), _running_tasks(self.proc)),
            swap_total=meminfo.get("SwapTotal", 0), swap_free=meminfo.get("SwapFree", 0),
            machine=self.machine, disk=self._disk(), block_devices=self._block_devices,
        )

    def _disk(self) -> DiskStats | None:
        try:
            stats = parse_diskstats((self.proc / "diskstats").read_text())
        except OSError:
            return None
        return stats.get(device_name(self._fs_device))
