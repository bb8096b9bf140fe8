"""process_*, kubernetes_build_info and kubernetes_feature_enabled."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil

from minikubelet import KUBERNETES_VERSION
from minikubelet.metrics_process import ComponentCollector, ProcessCollector, net_dev_totals

STAT = ("4242 (mini kubelet) S 1 4242 4242 0 -1 4194560 100 0 0 0 "
        "250 150 0 0 20 0 3 0 5000 104857600 2560 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")
LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max open files            1048576              1048576              files
Max address space         unlimited            unlimited            bytes
"""
NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0:    5000      50    0    0    0     0          0         0      700       7    0    0    0     0       0          0
"""


def values(collector: ProcessCollector | ComponentCollector) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for m in collector.collect():
        for s in m.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def fake_proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    (proc / "4242" / "fd").mkdir(parents=True)
    (proc / "4242" / "net").mkdir()
    for fd in ("0", "1", "2", "7"):
        (proc / "4242" / "fd" / fd).write_text("")
    (proc / "4242" / "stat").write_text(STAT)
    (proc / "4242" / "limits").write_text(LIMITS)
    (proc / "4242" / "net" / "dev").write_text(NET_DEV)
    (proc / "stat").write_text("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n")
    return proc


def test_process_figures_from_proc_files(tmp_path: Path) -> None:
    v = values(ProcessCollector(4242, str(fake_proc(tmp_path))))
    ticks = os.sysconf("SC_CLK_TCK")
    assert v["process_cpu_seconds_total"] == [({}, 400 / ticks)]
    assert v["process_open_fds"] == [({}, 4)]
    assert v["process_max_fds"] == [({}, 1048576)]
    assert v["process_virtual_memory_max_bytes"] == [({}, float("inf"))]
    assert v["process_virtual_memory_bytes"] == [({}, 104857600)]
    assert v["process_resident_memory_bytes"] == [({}, 2560 * os.sysconf("SC_PAGE_SIZE"))]
    assert v["process_start_time_seconds"] == [({}, 1700000000 + 5000 / ticks)]
    assert v["process_network_receive_bytes_total"] == [({}, 6000)]
    assert v["process_network_transmit_bytes_total"] == [({}, 1700)]
    assert net_dev_totals(NET_DEV) == (6000, 1700)


def test_this_process_as_the_kernel_and_psutil_see_it() -> None:
    v = values(ProcessCollector())
    me = psutil.Process()
    rss = v["process_resident_memory_bytes"][0][1]
    assert abs(rss - me.memory_info().rss) < 64 << 20
    assert abs(v["process_start_time_seconds"][0][1] - me.create_time()) < 1.0
    cpu = me.cpu_times()
    assert abs(v["process_cpu_seconds_total"][0][1] - (cpu.user + cpu.system)) < 1.0
    assert v["process_open_fds"][0][1] >= 3
    assert v["process_start_time_seconds"][0][1] < time.time()


def test_a_vanished_process_yields_nothing(tmp_path: Path) -> None:
    assert values(ProcessCollector(99999, str(tmp_path))) == {}


def test_build_info_and_the_honoured_feature_gates() -> None:
    v = values(ComponentCollector({"TaintTolerationComparisonOperators": True, "GracefulNodeShutdown": False,
                                   "SomethingElse": True}))
    [(labels, one)] = v["kubernetes_build_info"]
    assert one == 1 and labels["git_version"] == KUBERNETES_VERSION
    assert (labels["major"], labels["minor"]) == tuple(KUBERNETES_VERSION.lstrip("v").split(".")[:2])
    assert labels["platform"].startswith("linux/")
    gates = {(lb["name"], lb["stage"]): value for lb, value in v["kubernetes_feature_enabled"]}
    assert gates == {("ExtendWebSocketsToKubelet", "BETA"): 1, ("GracefulNodeShutdown", "BETA"): 0,
                     ("GracefulNodeShutdownBasedOnPodPriority", "BETA"): 1,
                     ("TaintTolerationComparisonOperators", "ALPHA"): 1}
