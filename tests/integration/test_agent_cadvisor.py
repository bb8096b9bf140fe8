"""Issue 29: /metrics/cadvisor of the real agent against a real v1.36 kubelet's scrape (every family served with
the same type and label names, or listed as not applicable in docs/metrics.md), and its values against the
kernel: threads, processes, descriptors, CPU quota and shares, the memory limit, an OOM kill, the machine."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration import agent_env
from tests.integration.agent_env import AgentProcess, simple_pod

pytestmark = pytest.mark.integration
agent = agent_env.agent
docker = agent_env.docker

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "fixtures" / "metrics" / "kubelet-v1.36-cadvisor.txt"
CGROUP = Path("/sys/fs/cgroup")
V2 = (CGROUP / "cgroup.controllers").exists()


def shapes(text: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Family → (TYPE, the label names of its samples), read from the exposition text."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    labels: dict[str, set[str]] = {name: set() for name in types}
    for line in text.splitlines():
        m = re.match(r"([a-z_0-9]+)(?:\{(.*)\})? ", line)
        if m and not line.startswith("#"):
            labels[m.group(1)].update(re.findall(r'([a-zA-Z_0-9]+)="', m.group(2) or ""))
    return {name: (kind, frozenset(labels[name])) for name, kind in types.items()}


def not_applicable() -> set[str]:
    """The families docs/metrics.md lists under /metrics/cadvisor as not served (wildcards expanded by the test)."""
    doc = (REPO / "docs" / "metrics.md").read_text()
    section = doc.split("## /metrics/cadvisor", 1)[1].split("\n## ", 1)[0]
    table = section.split("### Not served", 1)[1]
    return {name for row in table.splitlines() if row.startswith("| `") for name in re.findall(r"`([^`]+)`", row.split("|")[1])}


def listed(name: str, patterns: set[str]) -> bool:
    return any(re.fullmatch(p.replace("*", ".*"), name) for p in patterns)


def kernel_int(cgroup_id: str, v1: str, v2: str, v2_pick: Callable[[str], int] = int,
               v1_pick: Callable[[str], int] = int) -> int:
    """A cgroup file's number: `v1` is "<controller>/<file>", `v2` the file in the unified tree."""
    if V2:
        return v2_pick((CGROUP / cgroup_id.lstrip("/") / v2).read_text().strip())
    controller, name = v1.split("/")
    return v1_pick((CGROUP / controller / cgroup_id.lstrip("/") / name).read_text().strip())


def procs_of(cgroup_id: str) -> list[int]:
    path = CGROUP / cgroup_id.lstrip("/") / "cgroup.procs" if V2 else CGROUP / "cpu" / cgroup_id.lstrip("/") / "cgroup.procs"
    return [int(p) for p in path.read_text().split()]


def one(fams: dict[str, Any], name: str, **labels: str) -> float:
    values = [s.value for s in fams[name].samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(values) == 1, (name, labels, values)
    return float(values[0])


async def test_cadvisor_families_match_the_kubelet_and_values_the_kernel(agent: AgentProcess) -> None:
    grace = {"terminationGracePeriodSeconds": 1}
    agent.put("threads.yaml", simple_pod("threads", [{
        "name": "sleeps", "command": ["sh", "-c", "sleep 3600 & sleep 3600 & sleep 3600 & exec sleep 3600"],
        "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}}}], **grace))
    # The shell outlives the OOM kill of its child, so the counters stay on a live container.
    agent.put("oom.yaml", simple_pod("oom", [{
        "name": "hog", "command": ["sh", "-c", "tail /dev/zero; exec sleep 3600"],
        "resources": {"limits": {"memory": "24Mi"}}}], **grace))
    agent.start()
    await agent.wait_phase("threads", "Running")
    await agent.wait_phase("oom", "Running")

    async def scraped() -> dict[str, Any] | None:
        status, text = await agent.get_text("/metrics/cadvisor")
        assert status == 200
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        def of(name: str, container: str) -> list[float]:
            return [s.value for s in fams[name].samples if s.labels["container"] == container] if name in fams else []

        threads, ooms = of("container_threads", "sleeps"), of("container_oom_events", "hog")
        if threads == [4] and ooms and ooms[0] >= 1:
            return {"text": text, "fams": fams}
        return None

    got = await agent.wait_for("threads and the OOM kill in /metrics/cadvisor", scraped, timeout=60)
    text, fams = got["text"], got["fams"]

    # Every reference family: served with the kubelet's type and label names, or documented as not applicable.
    reference, ours, na = shapes(REFERENCE.read_text()), shapes(text), not_applicable()
    assert len(reference) == 68
    missing = [n for n in reference if n not in ours and not listed(n, na)]
    assert missing == []
    for name, shape in reference.items():
        if name in ours:
            assert ours[name] == shape, name
    # Nothing served that the kubelet would not: the extra ones are the CPU-limit families cAdvisor adds for a quota.
    assert set(ours) - set(reference) <= {"container_spec_cpu_quota", "container_cpu_cfs_periods_total",
                                          "container_cpu_cfs_throttled_periods_total",
                                          "container_cpu_cfs_throttled_seconds_total",
                                          "container_fs_reads_bytes_total", "container_fs_writes_bytes_total"}

    # Values against the kernel.
    sleeps = next(s.labels for s in fams["container_threads"].samples if s.labels["container"] == "sleeps")
    cid = sleeps["id"]
    pids = procs_of(cid)
    assert len(pids) == 4
    assert one(fams, "container_processes", id=cid) == 4
    assert one(fams, "container_threads", id=cid) == kernel_int(cid, "pids/pids.current", "pids.current") == 4
    fds = sum(len(os.listdir(f"/proc/{p}/fd")) for p in pids)
    assert one(fams, "container_file_descriptors", id=cid) == fds > 0
    assert one(fams, "container_sockets", id=cid) == 0
    assert one(fams, "container_spec_cpu_quota", id=cid) == 25000 == kernel_int(
        cid, "cpu/cpu.cfs_quota_us", "cpu.max", lambda t: int(t.split()[0]))
    assert one(fams, "container_spec_cpu_period", id=cid) == kernel_int(
        cid, "cpu/cpu.cfs_period_us", "cpu.max", lambda t: int(t.split()[1])) == 100000
    if not V2:
        assert one(fams, "container_spec_cpu_shares", id=cid) == kernel_int(cid, "cpu/cpu.shares", "") == 256
    assert one(fams, "container_spec_memory_limit_bytes", id=cid) == 64 * 2**20
    assert one(fams, "container_cpu_cfs_periods", id=cid) > 0
    with open(f"/proc/{min(pids)}/limits") as fh:
        soft = int(re.search(r"^Max open files\s+(\d+)", fh.read(), re.M).group(1))  # type: ignore[union-attr]
    assert one(fams, "container_ulimits_soft", id=cid, ulimit="max_open_files") == soft

    hog = next(s.labels["id"] for s in fams["container_oom_events"].samples if s.labels["container"] == "hog")

    def oom_kill(t: str) -> int:
        return int(re.search(r"^oom_kill (\d+)", t, re.M).group(1))  # type: ignore[union-attr]

    kills = kernel_int(hog, "memory/memory.oom_control", "memory.events", oom_kill, oom_kill)
    assert one(fams, "container_oom_events", id=hog) == kills >= 1
    if not V2:
        # memory.failcnt counts failed charges of the memory counter alone; with swap accounting the memory+swap
        # counter (same limit) can take them and this one stay 0 on an OOM kill: the series says what the kernel does.
        assert one(fams, "container_memory_failcnt", id=hog) == kernel_int(hog, "memory/memory.failcnt", "")
    assert one(fams, "container_memory_max_usage_bytes", id=hog) >= 20 * 2**20

    with open("/proc/meminfo") as fh:
        mem_total = int(re.search(r"MemTotal:\s+(\d+) kB", fh.read()).group(1)) * 1024  # type: ignore[union-attr]
    assert one(fams, "machine_memory_bytes") == mem_total
    assert one(fams, "machine_cpu_cores") == os.cpu_count()
    with open("/proc/sys/kernel/random/boot_id") as fh:
        assert fams["machine_cpu_cores"].samples[0].labels["boot_id"] == fh.read().strip()
    assert fams["cadvisor_version_info"].samples[0].labels["kernelVersion"] == os.uname().release
