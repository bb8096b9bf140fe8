"""Snapshots for the rendering tests (this module holds no tests itself)."""

from __future__ import annotations

from minikubelet.stats.cgroup_reader import PSI, CgroupSample, CgroupSpec, PSIData
from minikubelet.stats.diskstats import DiskStats
from minikubelet.stats.fs import FsCapacity
from minikubelet.stats.interfaces import InterfaceSample
from minikubelet.stats.machine import MachineInfo
from minikubelet.stats.processes import ProcessStats
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

T = 1_795_388_304.238  # 2026-11-22T22:58:24Z, as in the recording
DISK = FsCapacity(capacity=270553174016, available=77773656064, inodes=16777216, inodes_free=16241960,
                  used=31170637824)
TMPFS = FsCapacity(capacity=25171656704, available=25171644416, inodes=3085512, inodes_free=3085503, used=12288)
PSI_ZERO = PSI(some=PSIData(), full=PSIData())


def sample(cpu_ns: int, working_set: int, *, limit: int | None = None, psi: bool = True, pids: int = 1,
           swap: int = 0) -> CgroupSample:
    p = PSI_ZERO if psi else None
    return CgroupSample(cpu_usage_ns=cpu_ns, cpu_user_ns=cpu_ns // 2, cpu_system_ns=cpu_ns // 4,
                        memory_usage=working_set + 4096, memory_working_set=working_set, memory_rss=working_set // 2,
                        memory_cache=4096, page_faults=3142, major_page_faults=0, memory_limit=limit, pids=pids,
                        swap_usage=swap, cpu_psi=p, memory_psi=p, io_psi=p, memory_max_usage=working_set * 2,
                        spec=CgroupSpec(cpu_period=100000, cpu_shares=2))


def procs(n: int = 1, open_files: int | None = 1048576) -> ProcessStats:
    return ProcessStats(processes=n, fds=3 * n, sockets=n, max_open_files=open_files)


def eth0(rx: int = 7706, tx: int = 962) -> InterfaceSample:
    return InterfaceSample("eth0", rx, 91, 0, 0, tx, 13, 0, 0)


def snapshot(psi: bool = True, rate: int | None = 2875368) -> Snapshot:
    pod_cg = "/kubepods/besteffort/podbd6bca9f-38b7-4a32-a9ba-4d6ae254cb00"
    container = ContainerEntry(
        name="shell", id="a3e3cc", image="docker.io/library/busybox:1.35", start_time=T - 700,
        cgroup=Measured(f"{pod_cg}/a3e3cc", T, sample(77571374, 286720, psi=psi), rate, procs),
        logs=Fs(T, DISK, 0, 1), rootfs=Fs(T, DISK, 49152, 15),
    )
    pod = PodEntry(
        name="shell", namespace="fixtures", uid="bd6bca9f-38b7-4a32-a9ba-4d6ae254cb00", start_time=T - 710,
        sandbox_id="fd4379", sandbox_image="registry.k8s.io/pause:3.10",
        cgroup=Measured(pod_cg, T, sample(106383250, 528384, psi=psi), rate),
        read_sandbox_cgroup=lambda: Measured(f"{pod_cg}/fd4379", T, sample(28811876, 40960, psi=psi), rate, procs),
        containers=(container,), network=Network(T, (eth0(),)),
        volumes=(Volume("kube-api-access-xz47d", Fs(T, TMPFS, 12288, 9)), Volume("scratch", Fs(T, DISK, 8192, 2))),
    )
    node = NodeEntry(
        name="k8slab-kubelet", boot_time=T - 14000, memory_capacity=25276514304, cpu_cores=2,
        root=Measured("/", T, sample(5825326157231, 4161925120, psi=psi), 1332630310),
        pods_cgroup=Measured("/kubepods", T, sample(2090924930, 4812800, limit=25271701504, psi=psi), rate),
        pods_start_time=T - 740,
        other_cgroups=(Measured("/kubepods/besteffort", T, sample(2102169130, 4000000, psi=psi), rate),),
        network=Network(T, (InterfaceSample("ifb0", 0, 0, 0, 0, 0, 0, 0, 0), eth0(524394916, 709889))),
        fs=Fs(T, DISK, DISK.used, DISK.inodes - DISK.inodes_free), fs_device="/dev/vda", image_fs=Fs(T, DISK, 3375104),
        rlimit=Rlimit(T, 32768, 472),
        machine=MachineInfo(boot_id="f7594652-4fa4-42b0-9c55-405465827b52", machine_id="3d1219c7c4c5404aaa1f6d2a48adfda4",
                            system_uuid="3d1219c7c4c5404aaa1f6d2a48adfda4", cpu_cores=2, physical_cores=2, sockets=1,
                            kernel_version="6.18.44-fc-v595", os_version="Debian GNU/Linux 12 (bookworm)"),
        disk=DiskStats(321998, 29679, 14697882, 897193, 805249, 463753, 37205920, 643661, 0, 184064, 1638840),
    )
    return Snapshot(time=T, node=node, pods=(pod,))
