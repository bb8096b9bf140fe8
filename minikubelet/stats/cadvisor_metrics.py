"""/metrics/cadvisor: the cAdvisor series dashboards use most, for the root cgroup, kubepods and the QoS cgroups,
each pod cgroup, each sandbox (pause) container and each running container.

Labels as the kubelet's cAdvisor collector sets them: `id` (the cgroup path), `name` (the runtime's container id,
"" for plain cgroups), `image`, `container`, `namespace`, `pod`; network series add `interface` and are reported
on the sandbox, which owns the pod's network namespace (and on `/` for the node).
"""

from __future__ import annotations

from dataclasses import dataclass

from minikubelet.stats.exposition import Family, render
from minikubelet.stats.interfaces import InterfaceSample
from minikubelet.stats.snapshot import Fs, Measured, Network, Snapshot


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


def families(snap: Snapshot) -> list[Family]:
    f = {name: Family(name, help_, kind) for name, help_, kind in [
        ("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", "counter"),
        ("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", "counter"),
        ("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", "counter"),
        ("container_memory_usage_bytes",
         "Current memory usage in bytes, including all memory regardless of when it was accessed", "gauge"),
        ("container_memory_working_set_bytes", "Current working set in bytes.", "gauge"),
        ("container_memory_rss", "Size of RSS in bytes.", "gauge"),
        ("container_memory_cache", "Number of bytes of page cache memory.", "gauge"),
        ("container_memory_mapped_file", "Size of memory mapped files in bytes.", "gauge"),
        ("container_memory_swap", "Container swap usage in bytes.", "gauge"),
        ("container_processes", "Number of processes running inside the container.", "gauge"),
        ("container_spec_memory_limit_bytes", "Memory limit for the container.", "gauge"),
        ("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", "gauge"),
        ("container_last_seen", "Last time a container was seen by the exporter", "gauge"),
        ("container_fs_usage_bytes", "Number of bytes that are consumed by the container on this filesystem.",
         "gauge"),
        ("container_fs_limit_bytes", "Number of bytes that can be consumed by the container on this filesystem.",
         "gauge"),
        ("container_fs_inodes_free", "Number of available Inodes", "gauge"),
        ("container_fs_inodes_total", "Number of Inodes", "gauge"),
        ("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", "gauge"),
        ("machine_memory_bytes", "Amount of memory installed on the machine.", "gauge"),
        ("machine_cpu_cores", "Number of logical CPU cores.", "gauge"),
        *[(name, help_, "counter") for name, help_, _ in _NET],
    ]}
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
    for s in series:
        labels, sample, ms = s.labels(), s.m.sample, int(s.m.time * 1000)
        f["container_cpu_usage_seconds_total"].add([*labels, ("cpu", "total")], sample.cpu_usage_ns / 1e9, ms)
        f["container_cpu_user_seconds_total"].add(labels, sample.cpu_user_ns / 1e9, ms)
        f["container_cpu_system_seconds_total"].add(labels, sample.cpu_system_ns / 1e9, ms)
        for name, value in (("container_memory_usage_bytes", sample.memory_usage),
                            ("container_memory_working_set_bytes", sample.memory_working_set),
                            ("container_memory_rss", sample.memory_rss),
                            ("container_memory_cache", sample.memory_cache),
                            ("container_memory_mapped_file", sample.memory_mapped_file),
                            ("container_memory_swap", sample.swap_usage),
                            ("container_processes", sample.pids)):
            f[name].add(labels, value, ms)
        f["container_spec_memory_limit_bytes"].add(labels, sample.memory_limit or 0)
        if s.start is not None:
            f["container_start_time_seconds"].add(labels, float(int(s.start)))
        f["container_last_seen"].add(labels, float(int(s.m.time)), ms)
        if s.network is not None:
            _network(f, labels, s.network.interfaces, int(s.network.time * 1000))
        if s.fs is not None and s.fs.capacity is not None:
            fs_labels = [*labels, ("device", s.device)]
            fs_ms = int(s.fs.time * 1000)
            f["container_fs_usage_bytes"].add(fs_labels, s.fs.used or 0, fs_ms)
            f["container_fs_limit_bytes"].add(fs_labels, s.fs.capacity.capacity, fs_ms)
            f["container_fs_inodes_free"].add(fs_labels, s.fs.capacity.inodes_free, fs_ms)
            f["container_fs_inodes_total"].add(fs_labels, s.fs.capacity.inodes, fs_ms)
    f["container_scrape_error"].add([], 1 if snap.errors else 0)
    f["machine_memory_bytes"].add([], n.memory_capacity)
    f["machine_cpu_cores"].add([], n.cpu_cores)
    return list(f.values())


def _network(f: dict[str, Family], labels: list[tuple[str, str]], interfaces: tuple[InterfaceSample, ...],
             ms: int) -> None:
    for i in interfaces:
        with_iface = [*labels, ("interface", i.name)]
        for name, _, attr in _NET:
            f[name].add(with_iface, getattr(i, attr), ms)


def text(snap: Snapshot) -> str:
    return render(families(snap))
