"""The Summary API (stats/v1alpha1 `Summary`, upstream `kubelet/pkg/apis/stats/v1alpha1/types.go`) as JSON.

Field names and omission follow the Go types: pointer fields with `omitempty` are left out when unknown; `time`
and `startTime` are RFC 3339 seconds. The body is indented with one space, as the kubelet's go-restful writes it.
"""

from __future__ import annotations

import json
from typing import Any

from minikubelet.base.kubetime import rfc3339
from minikubelet.stats.cgroup_reader import PSI, PSIData
from minikubelet.stats.interfaces import DEFAULT_INTERFACE, InterfaceSample
from minikubelet.stats.snapshot import ContainerEntry, Fs, Measured, Network, NodeEntry, PodEntry, Snapshot

Json = dict[str, Any]


def _go_float(x: float) -> float | int:
    """Go's encoding/json writes a whole float64 without a fraction (0, not 0.0)."""
    return int(x) if x.is_integer() else x


def _psi_data(d: PSIData) -> Json:
    return {"total": d.total, "avg10": _go_float(d.avg10), "avg60": _go_float(d.avg60),
            "avg300": _go_float(d.avg300)}


def _psi(p: PSI) -> Json:
    return {"full": _psi_data(p.full), "some": _psi_data(p.some)}


def cpu(m: Measured) -> Json:
    out: Json = {"time": rfc3339(m.time)}
    if m.nano_cores is not None:
        out["usageNanoCores"] = m.nano_cores
    out["usageCoreNanoSeconds"] = m.sample.cpu_usage_ns
    if m.sample.cpu_psi is not None:
        out["psi"] = _psi(m.sample.cpu_psi)
    return out


def memory(m: Measured, available_from: int | None = None) -> Json:
    """`available_from`: the limit to subtract the working set from; the cgroup's own limit when None."""
    s = m.sample
    out: Json = {"time": rfc3339(m.time)}
    limit = available_from if available_from is not None else s.memory_limit
    if limit is not None:
        out["availableBytes"] = max(0, limit - s.memory_working_set)
    out.update(usageBytes=s.memory_usage, workingSetBytes=s.memory_working_set, rssBytes=s.memory_rss,
               pageFaults=s.page_faults, majorPageFaults=s.major_page_faults)
    if s.memory_psi is not None:
        out["psi"] = _psi(s.memory_psi)
    return out


def io(m: Measured) -> Json | None:
    """IOStats carries only PSI: none on cgroup v1, so no `io` there."""
    if m.sample.io_psi is None:
        return None
    return {"time": rfc3339(m.time), "psi": _psi(m.sample.io_psi)}


def swap(m: Measured) -> Json:
    return {"time": rfc3339(m.time), "swapUsageBytes": m.sample.swap_usage}


def _interface(i: InterfaceSample) -> Json:
    return {"name": i.name, "rxBytes": i.rx_bytes, "rxErrors": i.rx_errors, "txBytes": i.tx_bytes,
            "txErrors": i.tx_errors}


def network(n: Network) -> Json:
    """The inline InterfaceStats is eth0's (upstream's default interface), else only an empty name."""
    out: Json = {"time": rfc3339(n.time)}
    default = next((i for i in n.interfaces if i.name == DEFAULT_INTERFACE), None)
    out.update(_interface(default) if default is not None else {"name": ""})
    if n.interfaces:
        out["interfaces"] = [_interface(i) for i in n.interfaces]
    return out


def fs(f: Fs) -> Json:
    out: Json = {"time": rfc3339(f.time)}
    if f.capacity is not None:
        out.update(availableBytes=f.capacity.available, capacityBytes=f.capacity.capacity)
    if f.used is not None:
        out["usedBytes"] = f.used
    if f.capacity is not None:
        out.update(inodesFree=f.capacity.inodes_free, inodes=f.capacity.inodes)
    if f.inodes_used is not None:
        out["inodesUsed"] = f.inodes_used
    return out


def _put(out: Json, key: str, value: Json | None) -> None:
    if value is not None:
        out[key] = value


def container(c: ContainerEntry, only_cpu_and_memory: bool) -> Json:
    out: Json = {"name": c.name, "startTime": rfc3339(c.start_time)}
    if c.cgroup is not None:
        out["cpu"] = cpu(c.cgroup)
        out["memory"] = memory(c.cgroup)
        if not only_cpu_and_memory:
            _put(out, "io", io(c.cgroup))
    if not only_cpu_and_memory and c.rootfs is not None:
        out["rootfs"] = fs(c.rootfs)
    if not only_cpu_and_memory and c.logs is not None:
        out["logs"] = fs(c.logs)
    if c.cgroup is not None:
        out["swap"] = swap(c.cgroup)
    return out


def ephemeral_storage(p: PodEntry, time: float) -> Fs | None:
    """Container writable layers and logs plus the pod's volumes on the node's filesystem (tmpfs-backed ones use
    no disk), as upstream's calcEphemeralStorage: a writable layer counts wherever the runtime keeps it."""
    parts = [c.logs for c in p.containers if c.logs is not None]
    parts += [v.fs for v in p.volumes]
    layers = [c.rootfs for c in p.containers if c.rootfs is not None]
    root = next((f.capacity for f in parts if f.capacity is not None), None)
    disk = [f for f in parts if f.capacity is None or root is None or f.capacity.capacity == root.capacity]
    if not parts and not layers:
        return None
    disk += layers
    return Fs(time, root or next((f.capacity for f in layers), None), sum(f.used or 0 for f in disk),
              sum(f.inodes_used or 0 for f in disk))


def pod(p: PodEntry, only_cpu_and_memory: bool, now: float) -> Json:
    out: Json = {
        "podRef": {"name": p.name, "namespace": p.namespace, "uid": p.uid},
        "startTime": rfc3339(p.start_time),
        "containers": [container(c, only_cpu_and_memory) for c in p.containers],
    }
    if p.cgroup is not None:
        out["cpu"] = cpu(p.cgroup)
        out["memory"] = memory(p.cgroup)
        if not only_cpu_and_memory:
            _put(out, "io", io(p.cgroup))
    if not only_cpu_and_memory:
        if p.network is not None:
            out["network"] = network(p.network)
        if p.volumes:
            out["volume"] = [{**fs(v.fs), "name": v.name} for v in p.volumes]
        eph = ephemeral_storage(p, now)
        if eph is not None:
            out["ephemeral-storage"] = fs(eph)
        if p.cgroup is not None:
            out["process_stats"] = {"process_count": p.cgroup.sample.pids}
    if p.cgroup is not None:
        out["swap"] = swap(p.cgroup)
    return out


def node(n: NodeEntry, only_cpu_and_memory: bool) -> Json:
    out: Json = {"nodeName": n.name}
    if n.pods_cgroup is not None:
        pods: Json = {"name": "pods", "startTime": rfc3339(n.pods_start_time), "cpu": cpu(n.pods_cgroup),
                      "memory": memory(n.pods_cgroup, n.pods_cgroup.sample.memory_limit or n.memory_capacity)}
        if not only_cpu_and_memory:
            _put(pods, "io", io(n.pods_cgroup))
        pods["swap"] = swap(n.pods_cgroup)
        out["systemContainers"] = [pods]
    out["startTime"] = rfc3339(n.boot_time)
    if n.root is not None:
        out["cpu"] = cpu(n.root)
        out["memory"] = memory(n.root, n.memory_capacity)
        if not only_cpu_and_memory:
            _put(out, "io", io(n.root))
    if not only_cpu_and_memory:
        if n.network is not None:
            out["network"] = network(n.network)
        if n.fs is not None:
            out["fs"] = fs(n.fs)
        if n.image_fs is not None:
            out["runtime"] = {"imageFs": fs(n.image_fs), "containerFs": fs(n.container_fs or n.image_fs)}
        if n.rlimit is not None:
            rl: Json = {"time": rfc3339(n.rlimit.time)}
            if n.rlimit.max_pid is not None:
                rl["maxpid"] = n.rlimit.max_pid
            if n.rlimit.cur_proc is not None:
                rl["curproc"] = n.rlimit.cur_proc
            out["rlimit"] = rl
    if n.root is not None:
        out["swap"] = {"time": rfc3339(n.root.time), "swapAvailableBytes": n.swap_free,
                       "swapUsageBytes": n.swap_total - n.swap_free}
    return out


def summary(snap: Snapshot, only_cpu_and_memory: bool = False) -> Json:
    return {"node": node(snap.node, only_cpu_and_memory),
            "pods": [pod(p, only_cpu_and_memory, snap.time) for p in snap.pods]}


def encode(body: Json) -> bytes:
    return json.dumps(body, indent=1, ensure_ascii=False).encode()
