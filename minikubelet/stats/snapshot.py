"""What one housekeeping pass measured: plain data, rendered by summary.py and the metrics modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from minikubelet.stats.cgroup_reader import CgroupSample
from minikubelet.stats.diskstats import DiskStats
from minikubelet.stats.fs import FsCapacity
from minikubelet.stats.interfaces import InterfaceSample
from minikubelet.stats.machine import MachineInfo
from minikubelet.stats.processes import ProcessStats


@dataclass(frozen=True)
class Measured:
    """A cgroup sample, when (wall clock) it was read, and the CPU rate since the previous sample."""

    id: str  # the cgroup's literal path, cAdvisor's `id`
    time: float
    sample: CgroupSample
    nano_cores: int | None = None
    read_procs: Callable[[], ProcessStats | None] | None = field(default=None, compare=False, repr=False)
    read_extras: Callable[[CgroupSample], CgroupSample] | None = field(default=None, compare=False, repr=False)

    @cached_property
    def full(self) -> CgroupSample:
        """`sample` with the files only /metrics/cadvisor shows (limits, failcnt, peak, OOM kills, CFS, blkio),
        read when first asked rather than in every pass: 14 of a v1 cgroup's 20 files, which nothing else reads.
        The pass's own values (CPU, memory, pids) stay as sampled; on a read error (the cgroup went since) the
        extras stay zero, as for a file the kernel lacks."""
        if self.read_extras is None:
            return self.sample
        try:
            return self.read_extras(self.sample)
        except (OSError, ValueError):
            return self.sample

    @cached_property
    def procs(self) -> ProcessStats | None:
        """The cgroup's process series, read when first asked (a /metrics/cadvisor render), not in every pass:
        listing each process's descriptors is most of a pass's cost and only that scrape uses it."""
        if self.read_procs is None:
            return None
        try:
            return self.read_procs()
        except (OSError, ValueError):
            return None


@dataclass(frozen=True)
class Network:
    time: float
    interfaces: tuple[InterfaceSample, ...]


@dataclass(frozen=True)
class Fs:
    time: float
    capacity: FsCapacity | None
    used: int | None = None
    inodes_used: int | None = None


@dataclass(frozen=True)
class Volume:
    name: str
    fs: Fs


@dataclass(frozen=True)
class ContainerEntry:
    name: str
    id: str
    image: str
    start_time: float
    cgroup: Measured | None
    logs: Fs | None = None
    rootfs: Fs | None = None  # the writable layer, from a CRI runtime's ListContainerStats


@dataclass(frozen=True)
class PodEntry:
    name: str
    namespace: str
    uid: str
    start_time: float
    sandbox_id: str
    sandbox_image: str
    cgroup: Measured | None
    read_sandbox_cgroup: Callable[[], Measured | None] | None = field(compare=False, repr=False)
    containers: tuple[ContainerEntry, ...]
    network: Network | None = None
    volumes: tuple[Volume, ...] = ()

    @cached_property
    def sandbox_cgroup(self) -> Measured | None:
        """The pause container's cgroup, read when first asked rather than in every pass: only /metrics/cadvisor
        shows it (the Summary, /metrics/resource and eviction read the pod's and its containers' cgroups), and it
        was a third of a pass's cgroup files. Read at that moment, so its `time` is the read's, not the pass's."""
        return self.read_sandbox_cgroup() if self.read_sandbox_cgroup is not None else None


@dataclass(frozen=True)
class Rlimit:
    time: float
    max_pid: int | None
    cur_proc: int | None


@dataclass(frozen=True)
class NodeEntry:
    name: str
    boot_time: float
    memory_capacity: int
    cpu_cores: int
    root: Measured | None
    pods_cgroup: Measured | None  # the "pods" system container (kubepods)
    pods_start_time: float
    other_cgroups: tuple[Measured, ...] = ()  # the QoS cgroups, for /metrics/cadvisor
    network: Network | None = None
    fs: Fs | None = None
    fs_device: str = ""  # the device holding the root dir (cAdvisor's `device` label)
    image_fs: Fs | None = None
    container_fs: Fs | None = None  # only when the runtime keeps writable layers apart from images
    rlimit: Rlimit | None = None
    swap_total: int = 0
    swap_free: int = 0
    machine: MachineInfo | None = None
    disk: DiskStats | None = None  # /proc/diskstats of fs_device
    block_devices: dict[tuple[int, int], str] = field(default_factory=dict)  # major:minor → /dev/<name>


@dataclass(frozen=True)
class Snapshot:
    time: float
    node: NodeEntry
    pods: tuple[PodEntry, ...] = field(default=())
    errors: int = 0  # reads that failed during the pass (resource_scrape_error, container_scrape_error)
