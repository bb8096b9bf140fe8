"""The Summary JSON against the structure kubelet 1.36.2 sent (same keys, same order, omitempty as the Go types)."""

from __future__ import annotations

import json
from typing import Any

from minikubelet.stats import summary
from tests.unit.stats.factories import T, snapshot
from tests.unit.stats.test_exposition import recorded_body


def shape(o: Any) -> Any:
    """Keys in order and value types; lists by their first element."""
    if isinstance(o, dict):
        return [(k, shape(v)) for k, v in o.items()]
    if isinstance(o, list):
        return [shape(o[0])] if o else []
    return type(o).__name__


def recorded() -> dict[str, Any]:
    body: dict[str, Any] = json.loads(recorded_body("proxy-stats-summary"))
    return body


def test_same_shape_as_the_recorded_summary() -> None:
    want = recorded()
    for fs in want["node"]["runtime"].values():
        del fs["inodesUsed"]  # Docker does not tell how many inodes its images use
    got = summary.summary(snapshot())
    assert shape(got["node"]) == shape(want["node"])
    assert shape(got["pods"][0]) == shape(want["pods"][0])


def test_values_and_encoding() -> None:
    got = summary.summary(snapshot())
    pod = got["pods"][0]
    assert pod["podRef"] == {"name": "shell", "namespace": "fixtures", "uid": "bd6bca9f-38b7-4a32-a9ba-4d6ae254cb00"}
    assert pod["containers"][0]["cpu"] == {
        "time": "2026-11-22T22:58:24Z", "usageNanoCores": 2875368, "usageCoreNanoSeconds": 77571374,
        "psi": {"full": {"total": 0, "avg10": 0, "avg60": 0, "avg300": 0},
                "some": {"total": 0, "avg10": 0, "avg60": 0, "avg300": 0}}}
    node = got["node"]
    # Node and "pods" available memory: capacity (resp. the kubepods limit) minus the working set.
    assert node["memory"]["availableBytes"] == 25276514304 - 4161925120
    assert node["systemContainers"][0]["memory"]["availableBytes"] == 25271701504 - 4812800
    # No limit on the container: no availableBytes (omitempty).
    assert "availableBytes" not in pod["containers"][0]["memory"]
    assert node["network"]["name"] == "eth0" and node["network"]["rxBytes"] == 524394916
    assert [i["name"] for i in node["network"]["interfaces"]] == ["ifb0", "eth0"]
    # Ephemeral storage: the writable layer, logs and the disk-backed volume; the tmpfs one uses no disk.
    assert pod["containers"][0]["rootfs"]["usedBytes"] == 49152
    assert pod["ephemeral-storage"]["usedBytes"] == 49152 + 0 + 8192
    assert pod["ephemeral-storage"]["inodesUsed"] == 15 + 1 + 2
    assert pod["volume"][0] == {"time": "2026-11-22T22:58:24Z", "availableBytes": 25171644416,
                                "capacityBytes": 25171656704, "usedBytes": 12288, "inodesFree": 3085503,
                                "inodes": 3085512, "inodesUsed": 9, "name": "kube-api-access-xz47d"}
    text = summary.encode(got).decode()
    assert text.startswith('{\n "node": {\n  "nodeName": "k8slab-kubelet",\n  "systemContainers": [\n   {\n')
    assert recorded_body("proxy-stats-summary").startswith(text[:40])


def test_v1_and_first_sample_leave_out_what_is_unknown() -> None:
    got = summary.summary(snapshot(psi=False, rate=None))
    c = got["pods"][0]["containers"][0]
    assert "usageNanoCores" not in c["cpu"] and "psi" not in c["cpu"]
    assert "io" not in c and "io" not in got["pods"][0]  # IOStats is only PSI
    assert got["node"]["cpu"]["usageNanoCores"] == 1332630310


def test_no_eth0_gives_an_empty_default_interface() -> None:
    snap = snapshot()
    from dataclasses import replace

    from minikubelet.stats.interfaces import InterfaceSample
    from minikubelet.stats.snapshot import Network

    pod = replace(snap.pods[0], network=Network(T, (InterfaceSample("net1", 1, 1, 0, 0, 2, 2, 0, 0),)))
    got = summary.summary(replace(snap, pods=(pod,)))
    assert got["pods"][0]["network"] == {"time": "2026-11-22T22:58:24Z", "name": "", "interfaces": [
        {"name": "net1", "rxBytes": 1, "rxErrors": 0, "txBytes": 2, "txErrors": 0}]}


def test_only_cpu_and_memory() -> None:
    got = summary.summary(snapshot(), only_cpu_and_memory=True)
    assert [k for k, _ in shape(got["node"])] == ["nodeName", "systemContainers", "startTime", "cpu", "memory", "swap"]
    assert [k for k, _ in shape(got["node"]["systemContainers"][0])] == ["name", "startTime", "cpu", "memory", "swap"]
    assert [k for k, _ in shape(got["pods"][0])] == ["podRef", "startTime", "containers", "cpu", "memory", "swap"]
    assert [k for k, _ in shape(got["pods"][0]["containers"][0])] == ["name", "startTime", "cpu", "memory", "swap"]
