"""/metrics/resource: the series metrics-server reads (upstream pkg/kubelet/metrics/collectors/resource_metrics.go).

Each sample carries the time its value was measured (milliseconds), as upstream's collector does; the start time
and the scrape error carry none.
"""

from __future__ import annotations

from minikubelet.stats.exposition import Family, render
from minikubelet.stats.snapshot import Measured, Snapshot

_SWAP_NOTE = " Reported only on non-windows systems"


def _ms(t: float) -> int:
    return int(t * 1000)


def families(snap: Snapshot) -> list[Family]:
    node_cpu = Family("node_cpu_usage_seconds_total",
                      "[STABLE] Cumulative cpu time consumed by the node in core-seconds", "counter")
    node_mem = Family("node_memory_working_set_bytes", "[STABLE] Current working set of the node in bytes", "gauge")
    node_swap = Family("node_swap_usage_bytes", "[ALPHA] Current swap usage of the node in bytes." + _SWAP_NOTE,
                       "gauge")
    c_cpu = Family("container_cpu_usage_seconds_total",
                   "[STABLE] Cumulative cpu time consumed by the container in core-seconds", "counter")
    c_mem = Family("container_memory_working_set_bytes", "[STABLE] Current working set of the container in bytes",
                   "gauge")
    c_start = Family("container_start_time_seconds",
                     "[STABLE] Start time of the container since unix epoch in seconds", "gauge")
    c_swap = Family("container_swap_usage_bytes",
                    "[ALPHA] Current amount of the container swap usage in bytes." + _SWAP_NOTE, "gauge")
    p_cpu = Family("pod_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
                   "counter")
    p_mem = Family("pod_memory_working_set_bytes", "[STABLE] Current working set of the pod in bytes", "gauge")
    p_swap = Family("pod_swap_usage_bytes", "[ALPHA] Current amount of the pod swap usage in bytes." + _SWAP_NOTE,
                    "gauge")
    scrape = Family("resource_scrape_error",
                    "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", "gauge")

    def cgroup(m: Measured | None, labels: list[tuple[str, str]], cpu: Family, mem: Family, swap: Family) -> None:
        if m is None:
            return
        cpu.add(labels, m.sample.cpu_usage_ns / 1e9, _ms(m.time))
        mem.add(labels, m.sample.memory_working_set, _ms(m.time))
        swap.add(labels, m.sample.swap_usage, _ms(m.time))

    n = snap.node
    if n.root is not None:
        node_cpu.add([], n.root.sample.cpu_usage_ns / 1e9, _ms(n.root.time))
        node_mem.add([], n.root.sample.memory_working_set, _ms(n.root.time))
        node_swap.add([], n.swap_total - n.swap_free, _ms(n.root.time))
    for p in snap.pods:
        pod_labels = [("namespace", p.namespace), ("pod", p.name)]
        cgroup(p.cgroup, pod_labels, p_cpu, p_mem, p_swap)
        for c in p.containers:
            labels = [("container", c.name), *pod_labels]
            cgroup(c.cgroup, labels, c_cpu, c_mem, c_swap)
            if c.cgroup is not None:
                c_start.add(labels, c.start_time)
    scrape.add([], 1 if snap.errors else 0)
    return [node_cpu, node_mem, node_swap, c_cpu, c_mem, c_start, c_swap, p_cpu, p_mem, p_swap, scrape]


def text(snap: Snapshot) -> str:
    return render(families(snap))
