"""The component-level families every Kubernetes binary exports (component-base legacyregistry): process_*,
kubernetes_build_info and kubernetes_feature_enabled. The process figures are read
from /proc for this agent's own process, as client_golang's process collector reads them for the kubelet's."""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Iterable, Mapping

from minikubelet import KUBERNETES_VERSION, __version__
from minikubelet.base.prometheus import Collector, CounterMetricFamily, GaugeMetricFamily, Metric

# The gates this node reads, with their 1.36 stage ("" = GA, as upstream labels it) and default.
FEATURE_GATES: Mapping[str, tuple[str, bool]] = {
    "ExtendWebSocketsToKubelet": ("BETA", True),
    "GracefulNodeShutdown": ("BETA", True),
    "GracefulNodeShutdownBasedOnPodPriority": ("BETA", True),
    "TaintTolerationComparisonOperators": ("ALPHA", False),
}
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE = resource.getpagesize()


def _limit(limits: str, name: str) -> float:
    """A soft limit of /proc/<pid>/limits ("unlimited" is client_golang's -1 as an unsigned max: +Inf here)."""
    for line in limits.splitlines():
        if line.startswith(name):
            soft = line[len(name):].split()[0]
            return float("inf") if soft == "unlimited" else float(soft)
    return float("nan")


def net_dev_totals(text: str) -> tuple[float, float]:
    """Received and transmitted bytes summed over every interface of /proc/<pid>/net/dev (procfs NetDev.Total)."""
    rx = tx = 0.0
    for line in text.splitlines()[2:]:
        if ":" not in line:
            continue
        fields = line.split(":", 1)[1].split()
        if len(fields) >= 9:
            rx += float(fields[0])
            tx += float(fields[8])
    return rx, tx


def boot_time(stat: str) -> float:
    for line in stat.splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise ValueError("no btime in /proc/stat")


class ProcessCollector(Collector):
    """process_* of client_golang's Linux process collector, for `pid` read through `proc`."""

    def __init__(self, pid: int | None = None, proc: str = "/proc") -> None:
        self._pid = pid
        self._proc = proc

    def _read(self, *parts: str) -> str:
        with open(os.path.join(self._proc, *parts), encoding="ascii", errors="replace") as f:
            return f.read()

    def collect(self) -> Iterable[Metric]:
        pid = str(self._pid if self._pid is not None else os.getpid())
        try:
            stat = self._read(pid, "stat")
        except OSError:
            return
        # fields after the command (which may hold spaces and parentheses)
        f = stat.rsplit(")", 1)[1].split()
        utime, stime, start_ticks, vsize, rss = float(f[11]), float(f[12]), float(f[19]), float(f[20]), float(f[21])
        yield CounterMetricFamily("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                                  value=(utime + stime) / _TICKS)
        try:
            fds = len(os.listdir(os.path.join(self._proc, pid, "fd")))
            yield GaugeMetricFamily("process_open_fds", "Number of open file descriptors.", value=fds)
        except OSError:
            pass
        try:
            limits = self._read(pid, "limits")
            yield GaugeMetricFamily("process_max_fds", "Maximum number of open file descriptors.",
                                    value=_limit(limits, "Max open files"))
            yield GaugeMetricFamily("process_virtual_memory_max_bytes",
                                    "Maximum amount of virtual memory available in bytes.",
                                    value=_limit(limits, "Max address space"))
        except OSError:
            pass
        yield GaugeMetricFamily("process_virtual_memory_bytes", "Virtual memory size in bytes.", value=vsize)
        yield GaugeMetricFamily("process_resident_memory_bytes", "Resident memory size in bytes.", value=rss * _PAGE)
        try:
            start = boot_time(self._read("stat")) + start_ticks / _TICKS
            yield GaugeMetricFamily("process_start_time_seconds",
                                    "Start time of the process since unix epoch in seconds.", value=start)
        except (OSError, ValueError):
            pass
        try:
            rx, tx = net_dev_totals(self._read(pid, "net", "dev"))
            yield CounterMetricFamily("process_network_receive_bytes_total",
                                      "Number of bytes received by the process over the network.", value=rx)
            yield CounterMetricFamily("process_network_transmit_bytes_total",
                                      "Number of bytes sent by the process over the network.", value=tx)
        except OSError:
            pass


def _platform() -> str:
    machine = os.uname().machine.lower()
    return f"linux/{ {'x86_64': 'amd64', 'aarch64': 'arm64'}.get(machine, machine) }"


class ComponentCollector(Collector):
    """kubernetes_build_info and kubernetes_feature_enabled."""

    def __init__(self, feature_gates: Mapping[str, bool], build_date: float | None = None) -> None:
        self._gates = dict(feature_gates)
        self._build_date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(build_date)) if build_date else ""

    def collect(self) -> Iterable[Metric]:
        major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
        info = GaugeMetricFamily(
            "kubernetes_build_info",
            "A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, "
            "build date, Go version, and compiler from which Kubernetes was built, and platform on which it is "
            "running.",
            labels=["major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version",
                    "compiler", "platform"])
        # go_version/compiler name this build's interpreter: the agent has no Go toolchain
        info.add_metric([major, minor, KUBERNETES_VERSION, __version__, "", self._build_date,
                         f"python{sys.version.split()[0]}", sys.implementation.name, _platform()], 1)
        yield info
        gates = GaugeMetricFamily("kubernetes_feature_enabled",
                                  "This metric records the data about the stage and enablement of a k8s feature.",
                                  labels=["name", "stage"])
        for name, (stage, default) in sorted(FEATURE_GATES.items()):
            gates.add_metric([name, stage], 1 if self._gates.get(name, default) else 0)
        yield gates

