"""Interface counters from /proc/<pid>/net/dev, as cAdvisor reads them."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikubelet.stats.interfaces import InterfaceSample, interfaces_from_net_dev
from minikubelet.stats.network import InterfaceReader

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     420       6    0    0    0     0          0         0      420       6    0    0    0     0       0          0
  eth0: 1234567    8901    2    3    0     0          0         0   765432     4321    4    5    0     0       0          0
vethab12:     10       1    0    0    0     0          0         0       20        2    0    0    0     0       0          0
  bad0: x y
"""


def test_net_dev_lines_become_samples_without_loopback_or_veths() -> None:
    assert interfaces_from_net_dev(NET_DEV) == [InterfaceSample(
        name="eth0", rx_bytes=1234567, rx_packets=8901, rx_errors=2, rx_dropped=3,
        tx_bytes=765432, tx_packets=4321, tx_errors=4, tx_dropped=5)]


def test_the_reader_reads_the_namespace_of_the_process_behind_the_path(tmp_path: Path) -> None:
    for pid in ("self", "4242"):
        (tmp_path / pid / "net").mkdir(parents=True)
    (tmp_path / "self" / "net" / "dev").write_text(NET_DEV.replace("eth0", "ens3"))
    (tmp_path / "4242" / "net" / "dev").write_text(NET_DEV)
    reader = InterfaceReader(str(tmp_path))
    assert [i.name for i in reader(None)] == ["ens3"]
    assert [i.name for i in reader("/proc/4242/ns/net")] == ["eth0"]
    with pytest.raises(ValueError, match="not a /proc/<pid>/ns/net path"):
        reader("/var/run/netns/../../etc/x")
    with pytest.raises(FileNotFoundError):
        reader("/proc/999/ns/net")


def test_the_real_proc_of_this_process() -> None:
    names = [i.name for i in InterfaceReader()(None)]
    assert "lo" not in names
