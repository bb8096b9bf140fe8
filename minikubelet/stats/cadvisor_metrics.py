"""/metrics/cadvisor: the cAdvisor series dashboards use most, for the root cgroup, kubepods and the QoS cgroups,
each pod cgroup, each sandbox (pause) container and each running container.

Labels as the kubelet's cAdvisor collector sets them: `id` (the cgroup path), `name` (the runtime's container id,
"" for plain cgroups), `image`, `container`, `namespace`, `pod`; network series add `interface` and are reported
on the sandbox, which owns the pod's network namespace (and on `/` for the node).
"""

from __future__ import annotations

from dataclasses import dataclass

from minikubelet.stats.diskstats import DiskStats
from minikubelet.stats.exposition import Family, render
from minikubelet.stats.interfaces import InterfaceSample
from minikubelet.stats.machine import MachineInfo
from minikubelet.stats.snapshot import Fs, Measured, Network, NodeEntry, Snapshot


@dataclass(frozen=True)
class _Series:
    m: Measured
    container: str = ""
    image: str = ""
    name: str = ""
    namespace: str = ""
    pod: str = ""
    start: float | None = None
    network: Network | None = None
    fs: Fs | None = None
    device: str = ""

    def labels(self) -> list[tuple[str, str]]:
        return [("container", self.container), ("id", self.m.id), ("image", self.image), ("name", self.name),
                ("namespace", self.namespace), ("pod", self.pod)]


_NET = [
    ("container_network_receive_bytes_total", "Cumulative count of bytes received", "rx_bytes"),
    ("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", "rx_errors"),
    ("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving",
     "rx_dropped"),
    ("container_network_receive_packets_total", "Cumulative count of packets received", "rx_packets"),
    ("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", "tx_bytes"),
    ("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting",
     "tx_errors"),
    ("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting",
     "tx_dropped"),
    ("container_network_transmit_packets_total", "Cumulative count of packets transmitted", "tx_packets"),
]


_FAMILIES = [
    ("cadvisor_version_info", "A metric with a constant '1' value labeled by kernel version, OS version, docker "
     "version, cadvisor version & cadvisor revision.", "gauge"),
    ("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", "counter"),
    ("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", "counter"),
    ("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", "counter"),
    ("container_cpu_load_average_10s", "Value of container cpu load average over the last 10 seconds.", "gauge"),
    ("container_cpu_load_d_average_10s", "Value of container cpu load.d average over the last 10 seconds.", "gauge"),
    ("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", "counter"),
    ("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", "counter"),
    ("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", "counter"),
    ("container_file_descriptors", "Number of open file descriptors for the container.", "gauge"),
    ("container_health_state", "The result of the container's health check", "gauge"),
    ("container_memory_usage_bytes",
     "Current memory usage in bytes, including all memory regardless of when it was accessed", "gauge"),
    ("container_memory_working_set_bytes", "Current working set in bytes.", "gauge"),
    ("container_memory_rss", "Size of RSS in bytes.", "gauge"),
    ("container_memory_cache", "Number of bytes of page cache memory.", "gauge"),
    ("container_memory_mapped_file", "Size of memory mapped files in bytes.", "gauge"),
    ("container_memory_swap", "Container swap usage in bytes.", "gauge"),
    ("container_memory_failcnt", "Number of memory usage hits limits", "counter"),
    ("container_memory_failures_total", "Cumulative count of memory allocation failures.", "counter"),
    ("container_memory_kernel_usage", "Size of kernel memory allocated in bytes.", "gauge"),
    ("container_memory_max_usage_bytes", "Maximum memory usage recorded in bytes", "gauge"),
    ("container_memory_total_active_file_bytes", "Current total active file in bytes.", "gauge"),
    ("container_memory_total_inactive_file_bytes", "Current total inactive file in bytes.", "gauge"),
    ("container_oom_events_total", "Count of out of memory events observed for the container", "counter"),
    ("container_processes", "Number of processes running inside the container.", "gauge"),
    ("container_sockets", "Number of open sockets for the container.", "gauge"),
    ("container_spec_cpu_period", "CPU period of the container.", "gauge"),
    ("container_spec_cpu_quota", "CPU quota of the container.", "gauge"),
    ("container_spec_cpu_shares", "CPU share of the container.", "gauge"),
    ("container_spec_memory_limit_bytes", "Memory limit for the container.", "gauge"),
    ("container_spec_memory_reservation_limit_bytes", "Memory reservation limit for the container.", "gauge"),
    ("container_spec_memory_swap_limit_bytes", "Memory swap limit for the container.", "gauge"),
    ("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", "gauge"),
    ("container_tasks_state", "Number of tasks in given state", "gauge"),
    ("container_threads", "Number of threads running inside the container", "gauge"),
    ("container_threads_max", "Maximum number of threads allowed inside the container, infinity if value is zero",
     "gauge"),
    ("container_ulimits_soft", "Soft ulimit values for the container root process. Unlimited if -1, except "
     "priority and nice", "gauge"),
    ("container_last_seen", "Last time a container was seen by the exporter", "gauge"),
    ("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.", "gauge"),
    ("container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.",
     "gauge"),
    ("container_fs_inodes_free", "Number of available Inodes", "gauge"),
    ("container_fs_inodes_total", "Number of Inodes", "gauge"),
    ("container_fs_io_current", "Number of I/Os currently in progress", "gauge"),
    ("container_fs_io_time_seconds_total", "Cumulative count of seconds spent doing I/Os", "counter"),
    ("container_fs_io_time_weighted_seconds_total", "Cumulative weighted I/O time in seconds", "counter"),
    ("container_fs_read_seconds_total", "Cumulative count of seconds spent reading", "counter"),
    ("container_fs_reads_merged_total", "Cumulative count of reads merged", "counter"),
    ("container_fs_reads_total", "Cumulative count of reads completed", "counter"),
    ("container_fs_reads_bytes_total", "Cumulative count of bytes read", "counter"),
    ("container_fs_writes_bytes_total", "Cumulative count of bytes written", "counter"),
    ("container_fs_sector_reads_total", "Cumulative count of sector reads completed", "counter"),
    ("container_fs_sector_writes_total", "Cumulative count of sector writes completed", "counter"),
    ("container_fs_write_seconds_total", "Cumulative count of seconds spent writing", "counter"),
    ("container_fs_writes_merged_total", "Cumulative count of writes merged", "counter"),
    ("container_fs_writes_total", "Cumulative count of writes completed", "counter"),
    ("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", "gauge"),
    ("machine_cpu_books", "Number of CPU books.", "gauge"),
    ("machine_cpu_cores", "Number of logical CPU cores.", "gauge"),
    ("machine_cpu_drawers", "Number of CPU drawers.", "gauge"),
    ("machine_cpu_physical_cores", "Number of physical CPU cores.", "gauge"),
    ("machine_cpu_sockets", "Number of CPU sockets.", "gauge"),
    ("machine_memory_bytes", "Amount of memory installed on the machine.", "gauge"),
    ("machine_nvm_avg_power_budget_watts", "NVM power budget.", "gauge"),
    ("machine_nvm_capacity", "NVM capacity value labeled by NVM mode (memory mode or app direct mode).", "gauge"),
    ("machine_scrape_error", "1 if there was an error while getting machine metrics, 0 otherwise.", "gauge"),
    ("machine_swap_bytes", "Amount of swap memory available on the machine.", "gauge"),
    *[(name, help_, "counter") for name, help_, _ in _NET],
]

# cAdvisor's task-state and load series come from its load reader, which the kubelet leaves off
# (--enable_load_reader defaults to false): the kubelet serves them as constant zeros, and so do we.
TASK_STATES = ("iowaiting", "running", "sleeping", "stopped", "uninterruptible")
# No health checks run through cAdvisor for CRI containers: -1, "unknown", on every series.
HEALTH_UNKNOWN = -1.0


def _series(snap: Snapshot) -> list[_Series]:
    series: list[_Series] = []
    n = snap.node
    if n.root is not None:
        series.append(_Series(n.root, start=n.boot_time, network=n.network, fs=n.fs, device=n.fs_device))
    if n.pods_cgroup is not None:
        series.append(_Series(n.pods_cgroup, start=n.pods_start_time))
    series += [_Series(m) for m in n.other_cgroups]
    for p in snap.pods:
        if p.cgroup is not None:
            series.append(_Series(p.cgroup, namespace=p.namespace, pod=p.name, start=p.start_time))
        if p.sandbox_cgroup is not None:
            series.append(_Series(p.sandbox_cgroup, image=p.sandbox_image, name=p.sandbox_id,
                                  namespace=p.namespace, pod=p.name, start=p.start_time, network=p.network))
        for c in p.containers:
            if c.cgroup is not None:
                series.append(_Series(c.cgroup, container=c.name, image=c.image, name=c.id, namespace=p.namespace,
                                      pod=p.name, start=c.start_time))
    return series


def families(snap: Snapshot) -> list[Family]:
    f = {name: Family(name, help_, kind) for name, help_, kind in _FAMILIES}
    n = snap.node
    for s in _series(snap):
        _cgroup(f, s, n.block_devices)
        if s.fs is not None and s.fs.capacity is not None:
            _node_fs(f, s, s.fs, n.disk)
    f["container_scrape_error"].add([], 1 if snap.errors else 0)
    _machine(f, n)
    return list(f.values())


def _cgroup(f: dict[str, Family], s: _Series, devices: dict[tuple[int, int], str]) -> None:
    labels, sample, ms = s.labels(), s.m.full, int(s.m.time * 1000)
    f["container_cpu_usage_seconds_total"].add([*labels, ("cpu", "total")], sample.cpu_usage_ns / 1e9, ms)
    f["container_cpu_user_seconds_total"].add(labels, sample.cpu_user_ns / 1e9, ms)
    f["container_cpu_system_seconds_total"].add(labels, sample.cpu_system_ns / 1e9, ms)
    f["container_cpu_load_average_10s"].add(labels, 0, ms)
    f["container_cpu_load_d_average_10s"].add(labels, 0, ms)
    procs = s.m.procs
    for name, value in (("container_memory_usage_bytes", sample.memory_usage),
                        ("container_memory_working_set_bytes", sample.memory_working_set),
                        ("container_memory_rss", sample.memory_rss),
                        ("container_memory_cache", sample.memory_cache),
                        ("container_memory_mapped_file", sample.memory_mapped_file),
                        ("container_memory_swap", sample.swap_usage),
                        ("container_memory_failcnt", sample.memory_failcnt),
                        ("container_memory_kernel_usage", sample.memory_kernel),
                        ("container_memory_max_usage_bytes", sample.memory_max_usage),
                        ("container_memory_total_active_file_bytes", sample.active_file),
                        ("container_memory_total_inactive_file_bytes", sample.inactive_file),
                        ("container_oom_events_total", sample.oom_kills),
                        ("container_threads", sample.pids),
                        ("container_threads_max", sample.threads_max),
                        ("container_processes", procs.processes if procs else 0),
                        ("container_file_descriptors", procs.fds if procs else 0),
                        ("container_sockets", procs.sockets if procs else 0),
                        ("container_health_state", HEALTH_UNKNOWN)):
        f[name].add(labels, value, ms)
    for kind, hierarchy, local in (("pgfault", sample.page_faults, sample.local_page_faults),
                                   ("pgmajfault", sample.major_page_faults, sample.local_major_page_faults)):
        f["container_memory_failures_total"].add([*labels, ("failure_type", kind), ("scope", "container")], local, ms)
        f["container_memory_failures_total"].add([*labels, ("failure_type", kind), ("scope", "hierarchy")],
                                                 hierarchy, ms)
    for state in TASK_STATES:
        f["container_tasks_state"].add([*labels, ("state", state)], 0, ms)
    if procs is not None and procs.max_open_files is not None:
        f["container_ulimits_soft"].add([*labels, ("ulimit", "max_open_files")], procs.max_open_files, ms)
    f["container_spec_memory_limit_bytes"].add(labels, sample.memory_limit or 0)
    if sample.spec is not None:
        f["container_spec_cpu_period"].add(labels, sample.spec.cpu_period)
        f["container_spec_cpu_shares"].add(labels, sample.spec.cpu_shares)
        if sample.spec.cpu_quota:  # cAdvisor's quota and CFS series exist only for a cgroup with a quota
            f["container_spec_cpu_quota"].add(labels, sample.spec.cpu_quota)
            f["container_cpu_cfs_periods_total"].add(labels, sample.cfs_periods, ms)
            f["container_cpu_cfs_throttled_periods_total"].add(labels, sample.cfs_throttled_periods, ms)
            f["container_cpu_cfs_throttled_seconds_total"].add(labels, sample.cfs_throttled_ns / 1e9, ms)
        f["container_spec_memory_reservation_limit_bytes"].add(labels, sample.spec.memory_reservation)
        f["container_spec_memory_swap_limit_bytes"].add(labels, sample.spec.memory_swap_limit)
    if s.start is not None:
        f["container_start_time_seconds"].add(labels, float(int(s.start)))
    f["container_last_seen"].add(labels, float(int(s.m.time)), ms)
    for io in sample.io:
        device = devices.get((io.major, io.minor))
        if device is None:
            continue
        with_device = [*labels, ("device", device)]
        f["container_fs_reads_total"].add(with_device, io.reads, ms)
        f["container_fs_writes_total"].add(with_device, io.writes, ms)
        f["container_fs_reads_bytes_total"].add(with_device, io.read_bytes, ms)
        f["container_fs_writes_bytes_total"].add(with_device, io.write_bytes, ms)
    if s.network is not None:
        _network(f, labels, s.network.interfaces, int(s.network.time * 1000))


def _node_fs(f: dict[str, Family], s: _Series, fs: Fs, disk: DiskStats | None) -> None:
    assert fs.capacity is not None
    fs_labels = [*s.labels(), ("device", s.device)]
    fs_ms = int(fs.time * 1000)
    f["container_fs_usage_bytes"].add(fs_labels, fs.used or 0, fs_ms)
    f["container_fs_limit_bytes"].add(fs_labels, fs.capacity.capacity, fs_ms)
    f["container_fs_inodes_free"].add(fs_labels, fs.capacity.inodes_free, fs_ms)
    f["container_fs_inodes_total"].add(fs_labels, fs.capacity.inodes, fs_ms)
    if disk is None:
        return
    ms_scale = 1e9  # cAdvisor's scale for the kernel's milliseconds (diskstats.py)
    for name, value in (("container_fs_reads_total", disk.reads), ("container_fs_reads_merged_total", disk.reads_merged),
                        ("container_fs_sector_reads_total", disk.sectors_read),
                        ("container_fs_read_seconds_total", disk.read_ms / ms_scale),
                        ("container_fs_writes_total", disk.writes),
                        ("container_fs_writes_merged_total", disk.writes_merged),
                        ("container_fs_sector_writes_total", disk.sectors_written),
                        ("container_fs_write_seconds_total", disk.write_ms / ms_scale),
                        ("container_fs_io_current", disk.io_in_progress),
                        ("container_fs_io_time_seconds_total", disk.io_ms / ms_scale),
                        ("container_fs_io_time_weighted_seconds_total", disk.weighted_io_ms / ms_scale)):
        f[name].add(fs_labels, value, fs_ms)


def _machine(f: dict[str, Family], n: NodeEntry) -> None:
    m = n.machine if n.machine is not None else MachineInfo(cpu_cores=n.cpu_cores)
    labels = m.labels()
    f["cadvisor_version_info"].add([("cadvisorRevision", ""), ("cadvisorVersion", ""), ("dockerVersion", ""),
                                    ("kernelVersion", m.kernel_version), ("osVersion", m.os_version)], 1)
    for name, value in (("machine_memory_bytes", n.memory_capacity), ("machine_cpu_cores", m.cpu_cores or n.cpu_cores),
                        ("machine_cpu_physical_cores", m.physical_cores), ("machine_cpu_sockets", m.sockets),
                        ("machine_cpu_books", m.books), ("machine_cpu_drawers", m.drawers),
                        ("machine_swap_bytes", n.swap_total),
                        # no NVM (Optane) support is built into the kubelet's cAdvisor: zeros, as it serves
                        ("machine_nvm_avg_power_budget_watts", 0)):
        f[name].add(labels, value)
    for mode in ("app_direct_mode", "memory_mode"):
        f["machine_nvm_capacity"].add([*labels, ("mode", mode)], 0)
    f["machine_scrape_error"].add([], 1 if m.error else 0)


def _network(f: dict[str, Family], labels: list[tuple[str, str]], interfaces: tuple[InterfaceSample, ...],
             ms: int) -> None:
    for i in interfaces:
        with_iface = [*labels, ("interface", i.name)]
        for name, _, attr in _NET:
            f[name].add(with_iface, getattr(i, attr), ms)


def text(snap: Snapshot) -> str:
    return render(families(snap))
